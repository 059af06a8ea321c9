"""Logging the same evaluation twice reuses its MLflow run; changed inputs make a new one."""

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


def _evaluation_runs(uri: str) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("t")
    return [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("toolret.kind") == "evaluation"]


def test_same_result_logged_twice_is_one_run(tmp_path: Path, uri: str) -> None:
    from toolret.tracking import log_evaluation_run

    path = write_result(tmp_path / "data/runs/toy/bm25", "bm25", "original", per_query(np.random.default_rng(0), 0.4))
    first = log_evaluation_run(path, None, tags={"dagster.run_id": "r1"}, experiment="t", tracking_uri=uri)
    second = log_evaluation_run(path, None, tags={"dagster.run_id": "r2"}, experiment="t", tracking_uri=uri)
    assert second == first
    (run,) = _evaluation_runs(uri)
    assert run.data.tags["dagster.run_id"] == "r2"  # reused and updated


def test_changed_result_is_a_new_run_and_supersedes_the_old(tmp_path: Path, uri: str) -> None:
    from toolret.tracking import log_evaluation_run

    folder = tmp_path / "data/runs/toy/bm25"
    path = write_result(folder, "bm25", "original", per_query(np.random.default_rng(0), 0.4))
    original = path.read_text()
    old = log_evaluation_run(path, None, experiment="t", tracking_uri=uri)
    result = json.loads(original)
    result["metrics"]["recall@5"] = 0.99
    path.write_text(json.dumps(result))
    new = log_evaluation_run(path, None, experiment="t", tracking_uri=uri)
    assert new != old
    runs = {r.info.run_id: r for r in _evaluation_runs(uri)}
    assert set(runs) == {old, new}
    assert runs[new].data.metrics["recall_at_5"] == pytest.approx(0.99)
    assert runs[new].data.tags["toolret.current"] == "true"
    assert runs[old].data.tags["toolret.current"] == "false"
    assert runs[old].data.tags["toolret.superseded_by"] == new
    # the old inputs again (a revert): the same evaluation, so its run is reused and current again
    path.write_text(original)
    assert log_evaluation_run(path, None, experiment="t", tracking_uri=uri) == old
    runs = {r.info.run_id: r for r in _evaluation_runs(uri)}
    assert set(runs) == {old, new}
    assert runs[old].data.tags["toolret.current"] == "true"
    assert runs[new].data.tags["toolret.current"] == "false" and runs[new].data.tags["toolret.superseded_by"] == old
