"""toolret.tracking without Dagster: evaluation runs, the comparison report, provenance look-ups."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.integration

METRICS = ["recall@1", "recall@5", "ndcg@5", "comp@5", "mrr"]


def _write_result(folder: Path, method: str, docs: str, per_query: dict[str, dict[str, float]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    means = {m: float(np.mean([row[m] for row in per_query.values()])) for m in METRICS}
    result = {"dataset": "toy", "method": method, "docs": docs, "n_queries": len(per_query), "metrics": means,
              "ci95": {m: [max(0.0, v - 0.1), min(1.0, v + 0.1)] for m, v in means.items()},
              "latency_ms": {"p50": 1.5, "p95": 3.0}, "index_build_s": 2.0, "batch_search_s": 1.25,
              "provenance": {"git_sha": "abc123", "params": {"bm25": {"k1": 1.2, "b": 0.75}, "evaluation": {"ks": [1, 5]}},
                             "dataset_checksums": {"toy/corpus.jsonl": "00"}, "artifact_versions": {"index": "ff"}}}
    path = folder / f"{docs}.json"
    path.write_text(json.dumps(result))
    with open(folder / f"{docs}.per_query.jsonl", "w") as f:
        for qid, row in per_query.items():
            f.write(json.dumps({"query_id": qid, **row, "ranked": ["t1", "t2"], "gold": ["t1"]}) + "\n")
    return path


def _per_query(rng: np.random.Generator, level: float, n: int = 30) -> dict[str, dict[str, float]]:
    out = {}
    for i in range(n):
        hit = float(rng.random() < level)
        out[f"q{i:02d}"] = {"recall@1": hit * 0.5, "recall@5": hit, "ndcg@5": hit * 0.8, "comp@5": hit, "mrr": hit * 0.7}
    return out


@pytest.fixture
def results(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(0)
    runs = tmp_path / "data" / "runs" / "toy"
    return [_write_result(runs / "bm25", "bm25", "original", _per_query(rng, 0.3)),
            _write_result(runs / "dense", "dense", "original", _per_query(rng, 0.5)),
            _write_result(runs / "reinvoke", "reinvoke", "original", _per_query(rng, 0.95))]


def test_log_evaluation_run(tmp_path: Path, results: list[Path]) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import log_evaluation_run

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = log_evaluation_run(results[0], None, tags={"dagster.run_id": "r-1"}, experiment="t", tracking_uri=uri)
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "bm25 (original) @ toy"
    assert run.info.end_time - run.info.start_time == 3250  # the evaluation's index + search time, not logging's
    assert run.data.metrics["recall_at_5"] == pytest.approx(json.loads(results[0].read_text())["metrics"]["recall@5"])
    assert {"ci95/recall_at_5/lo", "ci95/recall_at_5/hi", "latency_p50_ms", "mrr", "n_queries"} <= set(run.data.metrics)
    assert [m.step for m in client.get_metric_history(run_id, "recall_by_k")] == [1, 5]
    assert run.data.params["bm25.k1"] == "1.2" and run.data.params["ks"] == "[1, 5]"
    assert run.data.tags["dagster.run_id"] == "r-1" and run.data.tags["git_sha"] == "abc123"
    arts = {a.path for folder in ("plots", "per_query", "result") for a in client.list_artifacts(run_id, folder)}
    assert {"plots/metrics_vs_k.png", "per_query/per_query.csv", "result/original.json"} <= arts
    assert (tmp_path / "artifacts").is_dir()  # the store's artifact folder, not ./mlruns


def test_comparison_report(tmp_path: Path, results: list[Path]) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import compare_results, log_comparison_report

    cmp = compare_results("toy", results, n_samples=2000)
    assert cmp.reference["recall@5"] == "dense/original"  # strongest *baseline*, not the best system
    tests = {(t["system"], t["metric"]): t for t in cmp.tests}
    assert tests[("reinvoke/original", "recall@5")]["significant"]
    assert tests[("reinvoke/original", "recall@5")]["mean_diff"] > 0
    assert tests[("bm25/original", "recall@5")]["n"] == 30
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    report = log_comparison_report("toy", results, experiment="t", tracking_uri=uri, n_samples=2000)
    assert "▲" in report["markdown"] and "(ref)" in report["markdown"]
    client = MlflowClient(uri)
    run = client.get_run(report["run_id"])
    assert run.data.tags["toolret.kind"] == "comparison"
    assert "reinvoke.original/recall_at_5" in run.data.metrics
    arts = {a.path for folder in ("report", "plots") for a in client.list_artifacts(report["run_id"], folder)}
    assert {"report/comparison.md", "report/comparison.html", "report/significance.json", "plots/comparison.png"} <= arts


def test_provenance(tmp_path: Path) -> None:
    from toolret.provenance import dvc_md5, git_state, sha256_file, stage_versions

    lock = {"schema": "2.0", "stages": {"evaluate@a-b": {
        "cmd": "x", "deps": [{"path": "data/curated/a", "md5": "d1.dir"}],
        "outs": [{"path": "data/runs/a/b", "md5": "o1.dir"}]}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert dvc_md5("data/runs/a/b/original.json", tmp_path) == "o1.dir"
    assert dvc_md5(tmp_path / "data/runs/a/b", tmp_path) == "o1.dir"
    assert dvc_md5("data/curated/a/corpus.jsonl", tmp_path) == "d1.dir"
    assert dvc_md5("elsewhere", tmp_path) is None
    assert stage_versions("evaluate@a-b", tmp_path) == {"deps": {"data/curated/a": "d1.dir"},
                                                       "outs": {"data/runs/a/b": "o1.dir"}}
    assert git_state(tmp_path).label == "unknown"
    (tmp_path / "f").write_bytes(b"abc")
    assert sha256_file(tmp_path / "f") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
