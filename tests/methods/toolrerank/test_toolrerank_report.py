"""The ToolRerank report's target row: ToolRerank against the best of the untrained retrievers (BM25, dense,
hybrid) and the paper's Rerank-m rows, not against its own (trained) first stage."""

from __future__ import annotations

import json

from toolret.catalog.model import Catalog, Query, Tool
from toolret.methods.toolrerank.hierarchy import SeenSet
from toolret.methods.toolrerank.report import dataset_data


def _grid(run_dir, rows: dict[str, list[float]]) -> None:
    run_dir.mkdir(parents=True)
    variants = {}
    for row, values in rows.items():
        mean = sum(values) / len(values)
        variants[row] = {"metrics": {"recall@5": mean, "ndcg@5": mean, "comp@5": mean},
                         "ci95": {"recall@5": [mean, mean], "ndcg@5": [mean, mean]}}
        (run_dir / f"{row}.per_query.jsonl").write_text(
            "".join(json.dumps({"query_id": f"q{i}", "recall@5": v}) + "\n" for i, v in enumerate(values)))
    (run_dir / "summary.json").write_text(json.dumps({"variants": variants}))


def test_the_target_is_the_best_untrained_retriever_or_rerank_m(tmp_path):
    tools = [Tool(id=f"t{i}", name=f"api{i}", tool=f"tool{i}", docs={"original": f"doc {i}"}) for i in range(4)]
    queries = [Query(f"q{i}", f"query {i}", "test") for i in range(4)]
    catalog = Catalog("fx", tools, queries, {f"q{i}": {f"t{i}": 1} for i in range(4)})
    seen = SeenSet([("tool0", "api0")])
    _grid(tmp_path / "fx" / "toolrerank-ablations", {
        "bm25": [0, 0, 1, 0], "dense": [0, 0, 0, 0],
        "hybrid": [1, 1, 0, 0],          # the best untrained retriever
        "first_stage": [1, 1, 1, 1],     # trained: not a baseline of the target
        "rerank-10": [1, 0, 0, 0], "toolrerank": [1, 1, 1, 0]})
    data = dataset_data(tmp_path, "fx", catalog, seen, None)
    assert data["target"]["best_baseline"] == "hybrid"
    assert data["target"]["baseline"] == 0.5 and data["target"]["toolrerank"] == 0.75
    assert data["groups"] == {"seen": 1, "unseen": 3, "mixed": 0}
    assert data["rows"]["toolrerank"]["recall@5_by_group"]["seen"] == 1.0
