"""The raw-data sensor (cursor of source fingerprints) and the retraining schedule."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import pytest
import yaml

from dagster_project.definitions import build_definitions
from dagster_project.sensors import dataset_sources, fingerprint

from orch_helpers import REPO, fixture_dvc_yaml

pytestmark = pytest.mark.integration


def _project(tmp_path: Path) -> tuple[Path, Path]:
    from make_fixture import write_fixture_catalog

    source = write_fixture_catalog(tmp_path / "sources" / "fixture")
    other = write_fixture_catalog(tmp_path / "sources" / "other", n_tools=5, n_train=0, n_test=3)
    project = tmp_path / "project"
    project.mkdir()
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params.update(datasets=["fixture", "other"], finetune_datasets=[], methods=["bm25"], synthetic={}, trained_on={}, selections={},
                  source={"root": str(tmp_path / "sources"), "beir": {"fixture": str(source), "other": str(other)}})
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    (project / "dvc.yaml").write_text(fixture_dvc_yaml(params))
    return project, source


def test_sensor_requests_catalog_runs_for_changed_sources(tmp_path: Path) -> None:
    project, source = _project(tmp_path)
    defs = build_definitions(project)
    sensor = defs.resolve_sensor_def("raw_data_sensor")
    instance = dg.DagsterInstance.ephemeral()

    first = sensor(dg.build_sensor_context(instance=instance, cursor=None))
    assert not first.run_requests  # baseline only
    assert set(json.loads(first.cursor)) == {"fixture", "other"}

    again = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
    assert not again.run_requests and again.cursor == first.cursor

    corpus = source / "corpus.jsonl"
    corpus.write_text(corpus.read_text() + "\n")
    st = corpus.stat()
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    changed = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
    (request,) = changed.run_requests
    assert request.asset_selection == [dg.AssetKey(["catalog", "fixture"])]
    assert request.run_config == {"ops": {"dvc__catalog__fixture": {"config": {"force": True}}}}
    assert request.run_key.startswith("fixture:")
    job = defs.resolve_implicit_global_asset_job_def()
    assert dg.validate_run_config(job, request.run_config)  # the config the asset accepts
    assert json.loads(changed.cursor)["fixture"] != json.loads(first.cursor)["fixture"]


def test_a_folder_read_by_several_datasets_is_fingerprinted_once_per_tick(tmp_path: Path, monkeypatch) -> None:
    """Six ToolBench groups read one folder (and the env groups a 12k-file one): a tick stats it once."""
    import dagster_project.sensors as sensors

    project, source = _project(tmp_path)
    params = yaml.safe_load((project / "params.yaml").read_text())
    shared = {f"copy{i}": str(source) for i in range(5)}
    params.update(datasets=["fixture", "other", *shared], source={**params["source"],
                                                                  "beir": {**params["source"]["beir"], **shared}})
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    (project / "dvc.yaml").write_text(fixture_dvc_yaml(params))
    sensor = build_definitions(project).resolve_sensor_def("raw_data_sensor")
    calls: list[Path] = []
    real = sensors.fingerprint
    monkeypatch.setattr(sensors, "fingerprint", lambda folder: calls.append(folder) or real(folder))
    result = sensor(dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(), cursor=""))
    cursor = json.loads(result.cursor)
    assert set(cursor) == {"fixture", "other", *shared}
    assert {cursor[ds] for ds in ("fixture", *shared)} == {fingerprint(source)}
    assert sorted(map(str, calls)) == sorted(map(str, {Path(source), Path(params["source"]["beir"]["other"])}))


def test_dataset_sources_of_the_real_params() -> None:
    sources = dataset_sources(REPO, ["toollens", "mtrb-restbench", "toolbench-g1-tool", "toolbench-env-g1-tool"])
    assert [p.name for p in sources["toollens"]] == ["toollens"]
    assert [p.name for p in sources["mtrb-restbench"]] == ["mtrb"]
    assert [p.name for p in sources["toolbench-g1-tool"]] == ["toolbench-stabletoolbench"]
    assert [p.name for p in sources["toolbench-env-g1-tool"]] == ["toolbench-stabletoolbench", "toolbench-toolenv"]
    if sources["toollens"][0].is_dir():
        assert fingerprint(sources["toollens"][0]) == fingerprint(sources["toollens"][0])
    assert fingerprint(REPO / "does-not-exist") is None


def test_weekly_schedule_targets_training_and_evaluation() -> None:
    defs = build_definitions(REPO)
    schedule = defs.resolve_schedule_def("weekly_retrain")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert schedule.cron_schedule == "0 3 * * 1"
    job = defs.resolve_job_def(schedule.job_name)
    keys = job.asset_layer.selected_asset_keys
    graph = defs.resolve_asset_graph()
    groups = {graph.get(k).group_name for k in keys}
    assert {"index", "evaluate", "report"} <= groups
    assert not groups & {"catalog", "clean"}
    stages = {k.path[0] for k in keys}  # a shortened group (evaluate_toolrerank -> eval_toolrerank) stays in
    if "evaluate_toolrerank" in {k.path[0] for k in graph.get_all_asset_keys()}:
        assert "evaluate_toolrerank" in stages


def test_empty_cursor_records_a_baseline(tmp_path: Path) -> None:
    """The UI's "Preview tick" evaluates the sensor with cursor "": that is no cursor, not "everything changed"."""
    project, _ = _project(tmp_path)
    sensor = build_definitions(project).resolve_sensor_def("raw_data_sensor")
    instance = dg.DagsterInstance.ephemeral()
    result = sensor(dg.build_sensor_context(instance=instance, cursor=""))
    assert not result.run_requests
    assert set(json.loads(result.cursor)) == {"fixture", "other"}  # the baseline is recorded
    again = sensor(dg.build_sensor_context(instance=instance, cursor=result.cursor))
    assert not again.run_requests
