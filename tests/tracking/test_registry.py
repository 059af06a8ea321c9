"""Trained models (DVC outputs under data/models/) in the MLflow model registry, one version per md5."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers import per_query, write_lock, write_result

pytestmark = pytest.mark.integration


def _lock(model_md5: str) -> dict:
    idx = f"idx-of-{model_md5}"  # a retrained model is a new index, a new evaluation
    return {
        "finetune@toy": {"cmd": "c", "deps": [{"path": "data/curated/toy", "md5": "cur.dir"}],
                         "params": {"params.yaml": {"finetune": {"epochs": 2}}},
                         "outs": [{"path": "data/models/toy/dense-ft", "md5": model_md5}]},
        "index_ft@toy": {"cmd": "c", "deps": [{"path": "data/models/toy/dense-ft", "md5": model_md5}],
                         "params": {"params.yaml": {"dense": {"batch_size": 64}}},
                         "outs": [{"path": "data/indexes/toy/dense-ft", "md5": idx}]},
        "evaluate_ft@toy": {"cmd": "c", "deps": [{"path": "data/indexes/toy/dense-ft", "md5": idx}],
                            "params": {"params.yaml": {"evaluation": {"ks": [1, 5]}}},
                            "outs": [{"path": "data/runs/toy/dense-ft", "md5": "runs.dir"}]},
        "evaluate@toy-bm25": {"cmd": "c", "deps": [{"path": "data/curated/toy", "md5": "cur.dir"}],
                              "outs": [{"path": "data/runs/toy/bm25", "md5": "runs2.dir"}]},
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "data/models/toy/dense-ft").mkdir(parents=True)
    (project / "data/models/toy/dense-ft/model.safetensors").write_bytes(b"w1")
    (project / "dvc.yaml").write_text("stages: {}\n")
    write_lock(project, _lock("aaa.dir"))
    return project


def test_model_registered_once_per_md5(project: Path, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import register_models

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    (first,) = register_models(project, "toy", tracking_uri=uri)
    (again,) = register_models(project, "toy", tracking_uri=uri)
    assert first["created"] and not again["created"] and again["version"] == first["version"]
    client = MlflowClient(uri)
    (mv,) = client.search_model_versions("name='toy.dense-ft'")  # <dataset>.<method>: MLflow forbids "/"
    assert mv.tags == {"dvc_md5": "aaa.dir", "dvc_stage": "finetune@toy", "dvc_path": "data/models/toy/dense-ft"}
    assert mv.source == "data/models/toy/dense-ft"  # portable: no path of this machine
    assert str(client.get_model_version_by_alias("toy.dense-ft", "current").version) == str(mv.version)
    assert "finetune@toy" in mv.description and "aaa.dir" in mv.description  # the model card

    write_lock(project, _lock("bbb.dir"))  # retrained: a new md5 is a new version, the old one stays
    (retrained,) = register_models(project, "toy", tracking_uri=uri)
    assert retrained["created"] and int(retrained["version"]) == int(first["version"]) + 1
    versions = {v.version: v.tags["dvc_md5"] for v in client.search_model_versions("name='toy.dense-ft'")}
    assert sorted(versions.values()) == ["aaa.dir", "bbb.dir"]
    assert str(client.get_model_version_by_alias("toy.dense-ft", "current").version) == retrained["version"]
    assert register_models(project, "other", tracking_uri=uri) == []


def test_evaluation_of_a_trained_model_links_its_version(project: Path, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import log_evaluation_run

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rng = np.random.default_rng(0)
    ft = write_result(project / "data/runs/toy/dense-ft", "dense-ft", "original", per_query(rng, 0.5))
    bm25 = write_result(project / "data/runs/toy/bm25", "bm25", "original", per_query(rng, 0.5))
    client = MlflowClient(uri)
    ft_run = client.get_run(log_evaluation_run(ft, tracking_uri=uri, project_dir=project))
    assert ft_run.data.tags["toolret.model.toy.dense-ft"] == "models:/toy.dense-ft/1"
    (mv,) = client.search_model_versions("name='toy.dense-ft'")
    assert mv.tags["evaluation.toy.dense-ft.original"] == ft_run.info.run_id
    assert mv.run_id == ft_run.info.run_id  # the registry links the version to the run that used it
    # its params: the evaluation's, the index's and the training's (the lineage up to the model)
    assert {"evaluation.ks", "dense.batch_size", "finetune.epochs"} <= set(ft_run.data.params)
    bm25_run = client.get_run(log_evaluation_run(bm25, tracking_uri=uri, project_dir=project))
    assert not any(k.startswith("toolret.model.") for k in bm25_run.data.tags)


def test_a_version_the_reports_register_links_the_run_that_evaluated_it(project: Path, tmp_path: Path) -> None:
    """`register_models` (the reports path) registers a version no evaluation run registered yet (e.g. one
    logged without registering, or the model of another dataset's report): it links the current evaluation
    run that read this md5 of the model, not one of an earlier training."""
    from mlflow import MlflowClient

    from toolret.tracking import log_evaluation_run, register_models

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ft = write_result(project / "data/runs/toy/dense-ft", "dense-ft", "original",
                      per_query(np.random.default_rng(0), 0.5))
    run_id = log_evaluation_run(ft, tracking_uri=uri, project_dir=project, register_models=False)
    client = MlflowClient(uri)
    assert client.search_model_versions("name='toy.dense-ft'") == []
    (first,) = register_models(project, "toy", tracking_uri=uri)
    mv = client.get_model_version("toy.dense-ft", first["version"])
    assert mv.run_id == run_id
    assert mv.source == "data/models/toy/dense-ft" and "finetune@toy" in mv.description

    write_lock(project, _lock("bbb.dir"))  # retrained; its evaluation not logged yet: the old run is not its run
    (retrained,) = register_models(project, "toy", tracking_uri=uri)
    assert retrained["created"] and not client.get_model_version("toy.dense-ft", retrained["version"]).run_id


def test_a_version_links_the_training_run_of_its_folder(project: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A training that logged its steps to MLflow (toolret.tracking.training_steps) tagged its run with the
    artifact's project-relative folder: the version of that folder links to it."""
    from mlflow import MlflowClient

    from toolret.tracking import register_models
    from toolret.tracking.training_steps import MLflowSteps

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(project))
    logger = MLflowSteps("toolret-toy-training", "toy/dense-ft", {"epochs": 2}, tmp_path / "work")
    logger._start()
    logger.finish(project / "data/models/toy/dense-ft")
    client = MlflowClient(uri)
    assert client.get_run(logger.run_id).data.tags["toolret.artifact"] == "data/models/toy/dense-ft"
    (mv,) = register_models(project, "toy", tracking_uri=uri)
    assert client.get_model_version("toy.dense-ft", mv["version"]).run_id == logger.run_id


def test_a_version_registered_without_its_card_gets_it(project: Path, tmp_path: Path) -> None:
    """A version an older toolret registered (no description) gets the model card as its description."""
    from mlflow import MlflowClient

    from toolret.tracking import register_models

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    client.create_registered_model("toy.dense-ft")
    client.create_model_version("toy.dense-ft", source="data/models/toy/dense-ft",
                                tags={"dvc_md5": "aaa.dir", "dvc_stage": "finetune@toy",
                                      "dvc_path": "data/models/toy/dense-ft"})
    (mv,) = register_models(project, "toy", tracking_uri=uri)
    assert not mv["created"]
    description = client.get_model_version("toy.dense-ft", mv["version"]).description
    assert "finetune@toy" in description and "aaa.dir" in description
