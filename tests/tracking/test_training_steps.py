"""Training steps reach MLflow through the logger the CLI installs (:mod:`toolret.training_log`); a method's
training imports no tracking code."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_no_logger_unless_installed_and_the_installed_ones_by_name(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from toolret import training_log

    monkeypatch.setattr(training_log, "_FACTORIES", {})  # none installed (a CLI call in this process installs MLflow's)

    made = []

    def factory(experiment, run_name, params, state_dir):
        made.append((experiment, run_name, dict(params), state_dir))
        return object()

    assert training_log.training_loggers("exp", "run", {}, tmp_path) == []
    training_log.install("probe", factory)
    try:
        loggers = training_log.training_loggers("exp", "run", {"lr": 1e-3}, tmp_path)
        assert len(loggers) == 1 and made == [("exp", "run", {"lr": 1e-3}, tmp_path)]
    finally:
        training_log.uninstall("probe")
    assert training_log.training_loggers("exp", "run", {}, tmp_path) == []


def test_mlflow_steps_log_every_numeric_value_into_one_run_that_a_resume_continues(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow import MlflowClient
    from transformers import TrainerState

    from toolret.tracking.training_steps import MLflowSteps

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    state_dir, artifact = tmp_path / "work", tmp_path / "adapter"
    artifact.mkdir()
    (artifact / "adapter_config.json").write_text("{}")

    def run_steps(steps):
        logger = MLflowSteps("toolret-qta-training", "qta/m2", {"lr": 1e-5, "targets": ["q_proj"]}, state_dir)
        cb, state = logger.callback(), TrainerState()
        cb.on_train_begin(None, state, None)
        for step, loss in steps:
            state.global_step = step
            cb.on_log(None, state, None, logs={"loss": loss, "rewards/margins": 0.5, "epoch": 1, "note": "x",
                                               "flag": True})
        return logger

    first = run_steps([(1, 0.69), (2, 0.60)])
    resumed = run_steps([(3, 0.50)])  # a resumed training: the same run, its id read from the state folder
    resumed.finish(artifact)
    assert first.run_id == resumed.run_id
    client = MlflowClient(uri)
    run = client.get_run(first.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["toolret.method"] == "qta"
    assert run.data.params == {"lr": "1e-05", "targets": '["q_proj"]'}
    assert [(m.step, m.value) for m in client.get_metric_history(first.run_id, "loss")] == [(1, 0.69), (2, 0.60),
                                                                                          (3, 0.50)]
    assert "rewards_margins" in run.data.metrics and "note" not in run.data.metrics and "flag" not in run.data.metrics
    assert [a.path for a in client.list_artifacts(first.run_id, "adapter")] == ["adapter/adapter_config.json"]
