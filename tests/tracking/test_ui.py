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
    assert f"/#/experiments/{cmp.experiment_id}/runs?workflowType=machine_learning" in out.splitlines()[1]

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
