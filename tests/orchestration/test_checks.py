"""Asset checks: a failing catalog validation blocks downstream assets; the dense-ft gate warns."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from dagster_project.checks import summarize_validation, validate_catalog_dir
from dagster_project.definitions import ALL_JOB, build_definitions

from orch_helpers import make_dvc_project

pytestmark = pytest.mark.integration

K = dg.AssetKey

COPY = "python -c \"import shutil,sys; shutil.copytree(sys.argv[1], sys.argv[2], dirs_exist_ok=True)\""


def _invalid_catalog(directory: Path) -> Path:
    """A catalog the loader accepts but validation rejects: a test query without gold, a 3k-char query."""
    from toolret.catalog.io import save_catalog
    from toolret.catalog.model import Catalog, Query, Tool

    tools = [Tool(id=f"t{i}", name=f"api {i}", docs={"original": f"does thing {i}"}) for i in range(3)]
    queries = [Query("q0", "do thing 0", "test"), Query("q1", "do thing 1", "test"),
               Query("q_nogold", "a test query nobody judged", "test"), Query("q_long", "x " * 1500, "train")]
    qrels = {"q0": {"t0": 1}, "q1": {"t1": 1}, "q_long": {"t2": 1}}
    return save_catalog(Catalog("bad", tools, queries, qrels), directory)


def test_validation_names_offending_records(tmp_path: Path) -> None:
    passed, md = validate_catalog_dir(_invalid_catalog(tmp_path / "bad"))
    assert not passed
    assert "test.has_gold" in md["failed_checks"] and "queries.length" in md["failed_checks"]
    assert "q_nogold" in md["offending/test.has_gold"]
    assert "q_long" in md["offending/queries.length"]
    assert "q_nogold" in md["offending_records"].value


def test_unloadable_catalog_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    passed, md = validate_catalog_dir(tmp_path / "broken")
    assert not passed and "does not load" in md["error"].value


def test_summarize_tolerates_plain_reports() -> None:
    report = {"success": False, "results": [{"name": "x.y", "success": False, "severity": "error",
                                             "offending_ids": ["a", "b"], "message": "2 bad"}]}
    passed, md = summarize_validation(report)
    assert not passed and md["failed_checks"] == "x.y" and md["offending/x.y"] == "a, b"


def test_failing_validation_blocks_downstream(tmp_path: Path) -> None:
    dvc_yaml = {"stages": {
        "catalog": {"foreach": ["bad"], "do": {"cmd": f"{COPY} src/${{item}} data/catalogs/${{item}}",
                                                "deps": ["src/${item}"], "outs": ["data/catalogs/${item}"]}},
        "clean": {"foreach": ["bad"], "do": {"cmd": f"{COPY} data/catalogs/${{item}} data/curated/${{item}}",
                                              "deps": ["data/catalogs/${item}"], "outs": ["data/curated/${item}"]}},
        "index": {"cmd": "mkdir -p data/indexes && touch data/indexes/done", "deps": ["data/curated/bad"],
                  "outs": ["data/indexes"]},
    }}
    project = make_dvc_project(tmp_path / "p", dvc_yaml, {}, copy_code=False)
    _invalid_catalog(project / "src" / "bad")
    defs = build_definitions(project)
    result = defs.resolve_job_def(ALL_JOB).execute_in_process(instance=dg.DagsterInstance.ephemeral(),
                                                               raise_on_error=False)
    materialized = {m.asset_key for m in result.get_asset_materialization_events()}
    assert materialized == {K(["catalog", "bad"])}
    (check,) = result.get_asset_check_evaluations()
    assert check.asset_key == K(["catalog", "bad"]) and not check.passed
    assert check.severity == dg.AssetCheckSeverity.ERROR
    assert "q_nogold" in check.metadata["offending/test.has_gold"].value
    started = {e.step_key for e in result.all_events if e.event_type_value == "STEP_START"}
    assert "dvc__catalog__bad" in started
    assert not started & {"dvc__clean__bad", "dvc__index"}  # never ran: DVC was not even called
    assert not (project / "data" / "curated" / "bad").exists()
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"catalog@bad"}


WRITE_RESULT = '''
import json, sys
from pathlib import Path
out, method, recall = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
out.mkdir(parents=True, exist_ok=True)
result = {"dataset": "fx", "method": method, "docs": "original", "n_queries": 4,
          "metrics": {"recall@5": recall, "mrr": recall}, "ci95": {"recall@5": [recall - .1, recall + .1]}}
(out / "original.json").write_text(json.dumps(result))
'''


def test_dense_ft_quality_gate_warns_without_blocking(tmp_path: Path) -> None:
    dvc_yaml = {"stages": {
        "evaluate": {"matrix": {"dataset": ["fx"], "method": ["dense"]},
                     "cmd": "python write_result.py data/runs/${item.dataset}/${item.method} ${item.method} 0.5",
                     "deps": ["write_result.py"], "outs": ["data/runs/${item.dataset}/${item.method}"]},
        "evaluate_ft": {"foreach": ["fx"], "do": {
            "cmd": "python write_result.py data/runs/${item}/dense-ft dense-ft 0.4",
            "deps": ["write_result.py"], "outs": ["data/runs/${item}/dense-ft"]}},
    }}
    project = make_dvc_project(tmp_path / "p", dvc_yaml, {}, copy_code=False)
    (project / "write_result.py").write_text(WRITE_RESULT)
    defs = build_definitions(project)
    ft, dense = K(["evaluate_ft", "fx.dense-ft"]), K(["evaluate", "fx.dense"])
    assert dg.AssetCheckKey(ft, "not_worse_than_dense") in defs.resolve_asset_graph().asset_check_keys
    result = defs.resolve_job_def(ALL_JOB).execute_in_process(
        instance=dg.DagsterInstance.ephemeral(), asset_selection=[ft, dense])
    assert result.success  # WARN gate: the run goes on
    (gate,) = result.get_asset_check_evaluations()
    assert gate.check_name == "not_worse_than_dense" and not gate.passed
    assert gate.severity == dg.AssetCheckSeverity.WARN
    assert abs(gate.metadata["original/delta"].value + 0.1) < 1e-9
    assert json.loads((project / "data/runs/fx/dense-ft/original.json").read_text())["method"] == "dense-ft"
