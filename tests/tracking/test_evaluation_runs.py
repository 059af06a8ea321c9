"""What an evaluation run holds: the stage's params, grouped CI bounds, run-info sidecar, per-query names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import per_query, write_lock, write_result

pytestmark = pytest.mark.integration

LOCK = {  # a bm25 and a dense branch over one curated catalog, as dvc.lock records them
    "catalog@toy": {"cmd": "c", "deps": [{"path": "/data/raw/toy", "md5": "raw.dir"}],
                    "params": {"params.yaml": {"source": {"root": "/data/raw"}, "catalog": {"seed": 13}}},
                    "outs": [{"path": "data/catalogs/toy", "md5": "cat.dir"}]},
    "clean@toy": {"cmd": "c", "deps": [{"path": "data/catalogs/toy", "md5": "cat.dir"}],
                  "params": {"params.yaml": {"cleanup": {"target_length": "median"}, "dense.model": "m"}},
                  "outs": [{"path": "data/curated/toy", "md5": "cur.dir"}]},
    "index@toy-bm25": {"cmd": "c", "deps": [{"path": "data/curated/toy", "md5": "cur.dir"},
                                            {"path": "toolret/retrieval/bm25.py", "md5": "code1"}],
                       "params": {"params.yaml": {"bm25": {"k1": 1.2, "b": 0.75}}},
                       "outs": [{"path": "data/indexes/toy/bm25", "md5": "idx.dir"}]},
    "index@toy-dense": {"cmd": "c", "deps": [{"path": "data/curated/toy", "md5": "cur.dir"}],
                        "params": {"params.yaml": {"dense": {"model": "m", "batch_size": 64}}},
                        "outs": [{"path": "data/indexes/toy/dense", "md5": "idx2.dir"}]},
    "evaluate@toy-bm25": {"cmd": "c", "deps": [{"path": "data/curated/toy", "md5": "cur.dir"},
                                               {"path": "data/indexes/toy/bm25", "md5": "idx.dir"},
                                               {"path": "toolret/metrics", "md5": "code2.dir"}],
                          "params": {"params.yaml": {"evaluation": {"ks": [1, 5]}}},
                          "outs": [{"path": "data/runs/toy/bm25", "md5": "runs.dir"}]},
}
FULL_DUMP = {"source": {"root": "/data/raw"}, "bm25": {"k1": 1.2, "b": 0.75}, "dense": {"model": "m"},
             "evaluation": {"ks": [1, 5]}, "finetune": {"epochs": 2}}


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "dvc.yaml").write_text("stages: {}\n")
    write_lock(project, LOCK)
    return project


def _bm25_result(project: Path) -> Path:
    return write_result(project / "data/runs/toy/bm25", "bm25", "original", per_query(np.random.default_rng(1), 0.5))


def test_new_experiment_opens_on_the_runs_table(uri: str) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import get_client, get_or_create_experiment

    client = MlflowClient(uri)
    old = client.create_experiment("made-elsewhere")  # untagged: MLflow 3's UI guesses its kind
    get_or_create_experiment(get_client(uri), "made-elsewhere")
    new_id = get_or_create_experiment(get_client(uri), "fresh")
    # the tag and value MLflow 3's UI reads for "Machine learning" experiments (runs table first)
    for exp_id in (old, new_id):
        assert client.get_experiment(exp_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_params_are_the_stage_lineage_params_from_dvc_lock(project: Path, uri: str) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import log_evaluation_run

    path = _bm25_result(project)
    run = MlflowClient(uri).get_run(log_evaluation_run(path, tracking_uri=uri, project_dir=project))
    stage_params = {k: v for k, v in run.data.params.items() if "." in k and k != "dvc.stages"}
    # evaluate declared `evaluation`, its index stage `bm25`; catalog/clean (dataset prep) and the
    # dense branch are not this run's params
    assert stage_params == {"evaluation.ks": "[1, 5]", "bm25.k1": "1.2", "bm25.b": "0.75"}
    assert run.data.params["dvc.stages"] == "evaluate@toy-bm25, index@toy-bm25"
    tags = run.data.tags
    assert tags["dvc.stage"] == "evaluate@toy-bm25"
    assert tags["dvc.md5.data/indexes/toy/bm25"] == "idx.dir" and tags["dvc.md5.data/runs/toy/bm25"] == "runs.dir"
    assert "dvc.md5.code" in tags and not any(k.startswith("dvc.md5.toolret") for k in tags)


def test_params_without_dvc_lineage_narrow_the_dump(tmp_path: Path, uri: str) -> None:
    """A `toolret evaluate --output x.json` result carries the whole params dump: log its own sections."""
    from mlflow import MlflowClient

    from toolret.tracking import log_evaluation_run

    path = write_result(tmp_path / "elsewhere", "bm25", "original", per_query(np.random.default_rng(1), 0.5),
                        extra={"latency_ms": {"p50": 2.0, "p95": 4.0},
                               "provenance": {"git_sha": "abc123", "params": FULL_DUMP}})
    run = MlflowClient(uri).get_run(log_evaluation_run(path, tracking_uri=uri))
    stage_params = {k for k in run.data.params if "." in k and k != "dvc.stages"}
    assert stage_params == {"evaluation.ks", "bm25.k1", "bm25.b"}
    assert run.data.tags["git_sha"] == "abc123" and run.data.tags["toolret.git_sha_source"] == "result"
    assert run.data.metrics["latency_p50_ms"] == 2.0


def test_run_info_sidecar_is_merged_when_present(project: Path, uri: str) -> None:
    from mlflow import MlflowClient

    from toolret.evaluation import run_info_path
    from toolret.tracking import log_evaluation_run

    path = _bm25_result(project)
    sidecar = run_info_path(path)
    assert project / "data" / "run_info" in sidecar.parents  # outside the DVC output
    sidecar.parent.mkdir(parents=True)
    sidecar.write_text(json.dumps({"latency_ms": {"p50": 12.5, "p95": 30.0, "n": 20}, "batch_search_s": 0.7,
                                   "provenance": {"git_sha": "feedbeef", "params": FULL_DUMP}}))
    run = MlflowClient(uri).get_run(log_evaluation_run(path, tracking_uri=uri, project_dir=project))
    assert run.data.metrics["latency_p50_ms"] == 12.5 and run.data.metrics["batch_search_s"] == 0.7
    assert run.data.tags["git_sha"] == "feedbeef" and run.data.tags["toolret.git_sha_source"] == "run_info"
    assert "finetune.epochs" not in run.data.params  # the dump is not logged whole


def test_run_info_sidecar_may_be_absent(project: Path, uri: str) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import log_evaluation_run

    path = _bm25_result(project)  # e.g. after `dvc pull` on a fresh clone: no sidecar
    run = MlflowClient(uri).get_run(log_evaluation_run(path, tracking_uri=uri, project_dir=project))
    assert run.info.status == "FINISHED"
    assert not any(k.startswith("latency") for k in run.data.metrics)
    assert run.data.tags["toolret.git_sha_source"] == "report_time"


def test_ci_bounds_are_grouped_and_per_query_table_names_tools(project: Path, uri: str, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import log_evaluation_run

    path = _bm25_result(project)
    result = json.loads(path.read_text())
    client = MlflowClient(uri)
    run_id = log_evaluation_run(path, tracking_uri=uri, project_dir=project)
    metrics = client.get_run(run_id).data.metrics
    # logged as the runs table shows them: three decimals (the result artifact keeps every digit)
    assert metrics["ci95/recall_at_5/lo"] == round(result["ci95"]["recall@5"][0], 3)
    assert metrics["ci95/recall_at_5/hi"] == round(result["ci95"]["recall@5"][1], 3)
    assert not any(k.endswith(("_ci95_lo", "_ci95_hi")) for k in metrics)

    csv = Path(client.download_artifacts(run_id, "per_query/per_query.csv", str(tmp_path)))
    frame = pd.read_csv(csv, encoding="utf-8-sig")
    assert list(frame.columns[:4]) == ["query_id", "query", "gold_names", "top5_names"]
    row = frame.set_index("query_id").loc["q00"]
    assert row["query"] == "query text of q00 — naïve"
    assert row["gold_names"] == "Sky Cast/Current Weather"
    assert row["top5_names"] == "Sky Cast/Current Weather | Sky Cast/5 Day Forecast"
    table = json.loads(Path(client.download_artifacts(run_id, "per_query/per_query_table.json", str(tmp_path)))
                       .read_text(encoding="utf-8"))
    assert {"query", "gold_names", "top5_names"} <= set(table["columns"])


def test_params_are_only_the_sections_the_method_reads(tmp_path: Path, uri: str) -> None:
    """The index stage is one template for every method and declares `bm25` and `dense` (as the real
    dvc.lock does): a bm25 run carries no `dense.*`, a dense run no `bm25.*`."""
    from mlflow import MlflowClient

    from toolret.tracking import log_evaluation_run

    project = tmp_path / "project"
    project.mkdir()
    (project / "dvc.yaml").write_text("stages: {}\n")
    both = {"params.yaml": {"bm25": {"k1": 1.2, "b": 0.75}, "dense": {"model": "m", "batch_size": 64}}}
    lock = {**LOCK, "index@toy-bm25": {**LOCK["index@toy-bm25"], "params": both},
            "index@toy-dense": {**LOCK["index@toy-dense"], "params": both},
            "evaluate@toy-dense": {**LOCK["evaluate@toy-bm25"],
                                   "deps": [{"path": "data/curated/toy", "md5": "cur.dir"},
                                            {"path": "data/indexes/toy/dense", "md5": "idx2.dir"}],
                                   "outs": [{"path": "data/runs/toy/dense", "md5": "runs2.dir"}]}}
    write_lock(project, lock)
    rng = np.random.default_rng(1)
    client = MlflowClient(uri)
    params = {}
    for method in ("bm25", "dense"):
        path = write_result(project / f"data/runs/toy/{method}", method, "original", per_query(rng, 0.5))
        run = client.get_run(log_evaluation_run(path, tracking_uri=uri, project_dir=project))
        params[method] = {k for k in run.data.params if "." in k and k != "dvc.stages"}
    assert params["bm25"] == {"evaluation.ks", "bm25.k1", "bm25.b"}
    assert params["dense"] == {"evaluation.ks", "dense.model", "dense.batch_size"}
