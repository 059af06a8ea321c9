"""Writers of evaluation results (and their dvc.lock entries) for the toolret.tracking tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

METRICS = ["recall@1", "recall@3", "recall@5", "recall@10", "ndcg@5", "mrr"]


def per_query(rng: np.random.Generator, level: float, n: int = 30) -> dict[str, dict[str, float]]:
    out = {}
    for i in range(n):
        hit = float(rng.random() < level)
        out[f"q{i:02d}"] = {"recall@1": hit * 0.5, "recall@3": hit * 0.8, "recall@5": hit, "recall@10": hit,
                            "ndcg@5": hit * 0.8, "mrr": hit * 0.7}
    return out


def write_result(folder: Path, method: str, docs: str, rows: dict[str, dict[str, float]], dataset: str = "toy",
                 extra: dict[str, Any] | None = None) -> Path:
    """A DVC-style (deterministic) result JSON + its per-query JSONL, as toolret.evaluation writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    means = {m: float(np.mean([row[m] for row in rows.values()])) for m in METRICS}
    result = {"dataset": dataset, "method": method, "docs": docs, "split": "test", "n_queries": len(rows),
              "metrics": means, "ci95": {m: [max(0.0, v - 0.1), min(1.0, v + 0.1)] for m, v in means.items()},
              "provenance": {"dataset_checksums": {"toy/corpus.jsonl": "00"}, "dataset_source": "fixture",
                             "artifact_versions": {}}, **(extra or {})}
    path = folder / f"{docs}.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    with open(folder / f"{docs}.per_query.jsonl", "w", encoding="utf-8") as f:
        for qid, row in rows.items():
            f.write(json.dumps({"query_id": qid, "query": f"query text of {qid} — naïve", **row,
                                "ranked": ["t1", "t2"], "gold": ["t1"], "gold_names": ["Sky Cast/Current Weather"],
                                "top5_names": ["Sky Cast/Current Weather", "Sky Cast/5 Day Forecast"]},
                               ensure_ascii=False) + "\n")
    return path


def write_lock(project: Path, stages: dict[str, dict[str, Any]]) -> None:
    (project / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}, sort_keys=False))
