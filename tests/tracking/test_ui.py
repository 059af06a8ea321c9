"""Where `make ui` sends a user: the runs table of `toolret` (classic workflow) with a view whose columns
are the headline metrics. The formats are the MLflow 3.17 UI's (see toolret/tracking/ui.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import per_query, write_result

pytestmark = pytest.mark.integration


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def test_make_ui_prints_the_runs_table_with_the_headline_view(tmp_path: Path, uri: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import log_evaluation_run
    from toolret.tracking.ui import main

    path = write_result(tmp_path / "runs/toy/bm25", "bm25", "original", per_query(np.random.default_rng(0), 0.5))
    log_evaluation_run(path, tracking_uri=uri, experiment="toolret")
    assert main(["--ui-url", "http://127.0.0.1:5123", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("toolret")
    cmp = client.get_experiment_by_name("toolret-comparisons")
    runs_url = (f"http://127.0.0.1:5123/#/experiments/{exp.experiment_id}/runs"
                "?workflowType=machine_learning&viewStateShareKey=toolret-headline")
    assert runs_url in out.splitlines()[0]
    cmp_url = (f"http://127.0.0.1:5123/#/experiments/{cmp.experiment_id}/runs"
               "?workflowType=machine_learning&viewStateShareKey=toolret-comparisons")
    assert cmp_url in out.splitlines()[1]

    # the shared view the UI applies for viewStateShareKey=toolret-headline: an envelope with a string state
    envelope = json.loads(exp.tags["mlflow.sharedViewState.toolret-headline"])
    assert isinstance(envelope["name"], str) and isinstance(envelope["createdAt"], int)
    state = json.loads(envelope["state"])
    columns = state["selectedColumns"]
    # the result's metrics at cutoff 5 and MRR, as the runs table names metric columns
    assert [c for c in columns if c.startswith("metrics.")] == [
        "metrics.`recall_at_5`", "metrics.`ndcg_at_5`", "metrics.`mrr`"]
    assert "params.`method`" in columns and "params.`dataset`" in columns
    assert state["searchFilter"] == "tags.`toolret.current` = 'true'"


def test_runs_view_is_written_once(uri: str) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import get_client, get_or_create_experiment
    from toolret.tracking.ui import ensure_runs_view

    client = get_client(uri)
    exp_id = get_or_create_experiment(client, "toolret")
    ensure_runs_view(client, exp_id, ["recall_at_5"])
    first = MlflowClient(uri).get_experiment(exp_id).tags["mlflow.sharedViewState.toolret-headline"]
    ensure_runs_view(client, exp_id, ["recall_at_5"])
    assert MlflowClient(uri).get_experiment(exp_id).tags["mlflow.sharedViewState.toolret-headline"] == first
    ensure_runs_view(client, exp_id, ["recall_at_5", "mrr"])  # new metrics: the view follows, same createdAt
    changed = json.loads(MlflowClient(uri).get_experiment(exp_id).tags["mlflow.sharedViewState.toolret-headline"])
    assert "metrics.`mrr`" in json.loads(changed["state"])["selectedColumns"]
    assert changed["createdAt"] == json.loads(first)["createdAt"]


def test_the_comparisons_link_opens_on_the_comparison_headline_columns(tmp_path: Path, uri: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The second link `make ui` prints: the comparison runs (one per dataset, current ones) with the strongest
    baseline's, the best system's and the number of better systems per headline metric as columns, each a
    metric the comparison run logged, and the dataset and the systems behind the numbers as params."""
    from mlflow import MlflowClient

    from toolret.tracking import log_comparison_report
    from toolret.tracking.ui import main

    rng = np.random.default_rng(0)
    results = [write_result(tmp_path / f"runs/toy/{m}", m, "original", per_query(rng, level))
               for m, level in (("bm25", 0.3), ("dense", 0.5), ("sys-a", 0.9))]
    report = log_comparison_report("toy", results, tracking_uri=uri, n_samples=200)
    assert main(["--ui-url", "http://127.0.0.1:5123", "--tracking-uri", uri]) == 0
    cmp_line = capsys.readouterr().out.splitlines()[1]
    client = MlflowClient(uri)
    cmp = client.get_experiment_by_name("toolret-comparisons")
    assert cmp_line.endswith(f"/#/experiments/{cmp.experiment_id}/runs"
                             "?workflowType=machine_learning&viewStateShareKey=toolret-comparisons")

    envelope = json.loads(cmp.tags["mlflow.sharedViewState.toolret-comparisons"])
    assert isinstance(envelope["name"], str) and isinstance(envelope["createdAt"], int)
    state = json.loads(envelope["state"])
    assert state["searchFilter"] == "tags.`toolret.current` = 'true'"
    columns = state["selectedColumns"]
    metrics = [c[len("metrics.`"):-1] for c in columns if c.startswith("metrics.")]
    params = [c[len("params.`"):-1] for c in columns if c.startswith("params.")]
    assert metrics == ["n_systems", "reference/recall_at_5", "best/recall_at_5", "n_better/recall_at_5",
                       "reference/ndcg_at_5", "best/ndcg_at_5", "n_better/ndcg_at_5",
                       "reference/mrr", "best/mrr", "n_better/mrr"]
    assert params == ["dataset", "reference/recall_at_5", "best/recall_at_5"]
    run = client.get_run(report["run_id"])
    assert set(metrics) <= set(run.data.metrics) and set(params) <= set(run.data.params)
    assert run.data.params["reference/recall_at_5"] == "dense/original"
    assert run.data.params["best/recall_at_5"] == "sys-a/original"
    dense = json.loads(results[1].read_text())["metrics"]["recall@5"]
    assert run.data.metrics["reference/recall_at_5"] == round(dense, 3)


def test_runs_are_logged_with_three_decimals_the_result_artifact_in_full(tmp_path: Path, uri: str) -> None:
    """MLflow's runs table shows a metric as logged: the evaluation and comparison runs log their numbers
    rounded to three decimals; the result JSON they log as an artifact keeps every digit."""
    from mlflow import MlflowClient

    from toolret.tracking import log_comparison_report, log_evaluation_run

    rng = np.random.default_rng(0)
    rows = per_query(rng, 0.5, n=61)  # means in 61ths: no short decimal
    path = write_result(tmp_path / "runs/toy/bm25", "bm25", "original", rows)
    other = write_result(tmp_path / "runs/toy/dense", "dense", "original", per_query(rng, 0.4, n=61))
    result = json.loads(path.read_text())
    assert result["metrics"]["recall@5"] != round(result["metrics"]["recall@5"], 3)
    client = MlflowClient(uri)
    run_id = log_evaluation_run(path, tracking_uri=uri, experiment="toolret")
    metrics = client.get_run(run_id).data.metrics
    assert metrics["recall_at_5"] == round(result["metrics"]["recall@5"], 3)
    assert metrics["ci95/recall_at_5/lo"] == round(result["ci95"]["recall@5"][0], 3)
    assert all(m.value == round(m.value, 3) for m in client.get_metric_history(run_id, "recall_by_k"))
    logged = json.loads(Path(client.download_artifacts(run_id, "result/original.json", str(tmp_path / "dl")))
                        .read_text(encoding="utf-8"))
    assert logged["metrics"]["recall@5"] == result["metrics"]["recall@5"]  # the artifact: full precision

    report = log_comparison_report("toy", [path, other], tracking_uri=uri, n_samples=100)
    cmp_metrics = client.get_run(report["run_id"]).data.metrics
    assert cmp_metrics["bm25.original/recall_at_5"] == round(result["metrics"]["recall@5"], 3)
    assert all(v == round(v, 3) for v in cmp_metrics.values())
