"""The whole pipeline of the real dvc.yaml, materialized in process on the fixture catalog."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml

from orch_helpers import read_json

pytestmark = pytest.mark.integration

K = dg.AssetKey
STAGES = ["catalog@fixture", "clean@fixture", "index@fixture-bm25", "evaluate@fixture-bm25"]


def test_run_succeeded_and_every_asset_materialized(pipeline) -> None:
    assert pipeline.result.success, [str(e.event_specific_data.error)
                                     for e in pipeline.result.all_events if e.event_type_value == "STEP_FAILURE"]
    materialized = {m.asset_key for m in pipeline.result.get_asset_materialization_events()}
    assert materialized == {K(["catalog", "fixture"]), K(["clean", "fixture"]), K(["index", "fixture.bm25"]),
                            K(["evaluate", "fixture.bm25"]), K(["report", "fixture.bm25"])}


def test_artifacts_exist(pipeline) -> None:
    from toolret.catalog.io import load_catalog

    p = pipeline.project
    catalog = load_catalog(p / "data" / "catalogs" / "fixture")
    assert len(catalog.tools) == 30 and len(catalog.split("test")) == 20
    curated = load_catalog(p / "data" / "curated" / "fixture")
    assert "cleaned" in curated.doc_variants()
    assert any((p / "data" / "indexes" / "fixture" / "bm25").iterdir())
    runs = p / "data" / "runs" / "fixture" / "bm25"
    for docs in ("original", "cleaned"):
        result = read_json(runs / f"{docs}.json")
        assert result["dataset"] == "fixture" and result["method"] == "bm25" and result["docs"] == docs
        assert result["n_queries"] == 20
        assert 0.0 <= result["metrics"]["recall@5"] <= 1.0
        lines = (runs / f"{docs}.per_query.jsonl").read_text().splitlines()
        assert len(lines) == 20


def test_dvc_lock_records_every_stage(pipeline) -> None:
    lock = yaml.safe_load((pipeline.project / "dvc.lock").read_text())
    assert set(STAGES) <= set(lock["stages"])
    for name in STAGES:
        outs = lock["stages"][name]["outs"]
        assert outs and all(o["md5"].endswith(".dir") for o in outs)
    mats = {m.asset_key: m.materialization for m in pipeline.result.get_asset_materialization_events()}
    md = mats[K(["evaluate", "fixture.bm25"])].metadata
    assert md["dvc/md5/data/runs/fixture/bm25"].value == lock["stages"]["evaluate@fixture-bm25"]["outs"][0]["md5"]
    assert 0.0 <= md["original/recall@5"].value <= 1.0  # headline metrics from the result JSONs
    assert md["original/n_queries"].value == 20


def test_catalog_checks_passed(pipeline) -> None:
    evaluations = {e.asset_key: e for e in pipeline.result.get_asset_check_evaluations()}
    for key in (K(["catalog", "fixture"]), K(["clean", "fixture"])):
        ev = evaluations[key]
        assert ev.check_name == "catalog_valid"
        assert ev.passed, ev.metadata
        assert ev.metadata["failed_checks"].value == "none"
        assert ev.metadata["n_checks"].value >= 10  # the GX suite ran, not just the loader


def test_mlflow_runs_logged(pipeline) -> None:
    from mlflow import MlflowClient

    db = pipeline.project / "data" / "mlflow" / "mlflow.db"
    assert db.is_file()
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name("toolret")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    evals = [r for r in runs if r.data.tags.get("toolret.kind") == "evaluation"]
    assert not [r for r in runs if r.data.tags.get("toolret.kind") == "comparison"]  # they have their own
    comps = client.search_runs([client.get_experiment_by_name("toolret-comparisons").experiment_id])
    assert {r.data.tags["toolret.docs"] for r in evals} == {"original", "cleaned"}
    dagster_run_id = pipeline.result.run_id
    for r in evals:
        assert r.info.status == "FINISHED"
        assert 0.0 <= r.data.metrics["recall_at_5"] <= 1.0
        assert "ci95/recall_at_5/lo" in r.data.metrics and "mrr" in r.data.metrics
        assert "latency_p50_ms" in r.data.metrics  # from the run-info sidecar: the DVC result has no timings
        assert r.data.params["method"] == "bm25"
        # the params its stages declared (evaluate: evaluation; index: the method's), not params.yaml whole
        assert "evaluation.ks" in r.data.params and "bm25.k1" in r.data.params
        assert not any(k.startswith(("source.", "catalog.", "cleanup.", "finetune.", "reinvoke."))
                       for k in r.data.params), sorted(r.data.params)
        assert r.data.tags["dagster.run_id"] == dagster_run_id
        assert r.data.tags["git_sha"] not in ("", "unknown")
        assert r.data.tags["toolret.git_sha_source"] == "run_info"
        assert r.data.tags["toolret.current"] == "true"
        assert any(k.startswith("dvc.md5.data/curated/fixture") for k in r.data.tags)
        artifacts = {a.path for a in client.list_artifacts(r.info.run_id, "plots")}
        assert "plots/metrics_vs_k.png" in artifacts
        assert {a.path for a in client.list_artifacts(r.info.run_id, "per_query")} >= {"per_query/per_query.csv"}
    assert len(comps) == 1
    report = {a.path for a in client.list_artifacts(comps[0].info.run_id, "report")}
    assert {"report/comparison.md", "report/comparison.csv", "report/significance.json"} <= report
    artifact_root = pipeline.project / "data" / "mlflow" / "artifacts"
    assert any(artifact_root.rglob("comparison.png"))


def test_rematerialize_is_a_noop_for_dvc(pipeline) -> None:
    """A second run of an up-to-date stage does not change its DVC version."""
    from dagster_project.definitions import ALL_JOB

    before = (pipeline.project / "dvc.lock").read_text()
    job = pipeline.defs.resolve_job_def(ALL_JOB)
    result = job.execute_in_process(instance=pipeline.instance, asset_selection=[K(["index", "fixture.bm25"])])
    assert result.success
    assert (pipeline.project / "dvc.lock").read_text() == before


def test_changed_raw_data_makes_the_catalog_stale(pipeline) -> None:
    """The raw source folder is a DVC dep of the catalog stage: an edited file marks the stage (and only
    the stages reading that source) changed, and restoring it makes the pipeline up to date again."""
    from orch_helpers import BIN, sh

    def stale() -> dict:
        out = sh([str(BIN / "dvc"), "status", "--json"], pipeline.project).stdout
        return yaml.safe_load(out) or {}

    assert stale() == {}
    corpus = pipeline.source / "corpus.jsonl"
    original = corpus.read_bytes()
    try:
        corpus.write_bytes(original + b"\n")
        changed = stale()
        assert list(changed) == ["catalog@fixture"]
        assert "changed deps" in changed["catalog@fixture"][0]
    finally:
        corpus.write_bytes(original)
    assert stale() == {}
