"""The public API (`import toolret`): a catalog in, a fitted pipeline, scores with CIs, a comparison, and
a searcher that answers with tools (not ids) from a saved index."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    from make_fixture import write_fixture_catalog

    import toolret

    folder = write_fixture_catalog(tmp_path_factory.mktemp("api") / "fixture", n_tools=30, n_train=40, n_test=20,
                                   seed=0)
    return toolret.load_catalog(folder)


def test_import_toolret_is_light() -> None:
    code = ("import sys, toolret; heavy = [m for m in ('torch', 'sentence_transformers', 'dagster', 'mlflow') "
            "if m in sys.modules]; assert not heavy, heavy; assert callable(toolret.build)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_build_evaluate_compare_and_search(catalog, tmp_path) -> None:
    import toolret
    from toolret.evaluation import evaluate_retriever

    bm25 = toolret.build("bm25", catalog)
    result = toolret.evaluate(bm25, catalog)
    assert isinstance(result, toolret.EvalResult) and len(result.query_ids) == 20
    # the same numbers as the evaluation the CLI and DVC stages run
    reference, _ = evaluate_retriever(bm25, catalog, method="bm25", docs="original", ks=[1, 3, 5, 10], k_max=10,
                                      measure_latency=False)
    assert result.means["recall@5"] == pytest.approx(reference["metrics"]["recall@5"])
    lo, hi = result.ci["recall@5"]
    assert lo <= result.means["recall@5"] <= hi
    stem = toolret.build("bm25", catalog, params=_params(stemmer="english", split_identifiers=True))
    comparison = toolret.compare({"bm25": result, "bm25-stem": toolret.evaluate(stem, catalog)}, baseline="bm25",
                                 metric="ndcg@5")
    assert {t.system for t in comparison.tests} == {"bm25-stem"}

    bm25.save(tmp_path / "index")
    searcher = toolret.ToolSearcher.load(tmp_path / "index")
    assert len(searcher) == 30
    hits = searcher.search("What's the weather like in Paris right now?", k=3)
    assert isinstance(hits[0], toolret.ToolHit)
    assert hits[0].name == "Current Weather" and hits[0].tool == "SkyCast" and hits[0].category == "Weather"
    assert hits[0].score > hits[-1].score and hits[0].input_schema["type"] == "object"
    assert [h.tool_id for h in hits] == bm25.search(["What's the weather like in Paris right now?"], 3).ranked_ids(0)
    # a query as a str (not a list): an error saying what to pass, not one ranking per letter
    with pytest.raises(TypeError, match=r"takes a list of queries.*\[query\]"):
        bm25.search("find a book", 3)


def _params(**bm25):
    from toolret.config import apply_overrides, validate_params

    return apply_overrides(validate_params({}), {f"bm25.{k}": v for k, v in bm25.items()})


def test_one_error_type_catches_what_toolret_refuses(tmp_path) -> None:
    """A missing catalog (CatalogError), a malformed evaluation input (EvaluationError): both ToolretError."""
    import toolret
    from toolret.evaluate_api import Qrels

    with pytest.raises(toolret.ToolretError, match="nowhere"):
        toolret.load_catalog(tmp_path / "nowhere")
    with pytest.raises(toolret.ToolretError):
        Qrels({"q1": {"": 1}})
