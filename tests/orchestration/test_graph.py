"""The asset graph is DVC's graph: keys, groups and deps come from dvc.yaml via DVC itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from orch_helpers import BIN, REPO, env_for

from dagster_project.definitions import ALL_JOB, RUN_JOB, build_definitions
from dagster_project.dvc_assets import load_stage_items, op_name_for

pytestmark = pytest.mark.integration

K = dg.AssetKey


def test_definitions_validate_cli(tmp_path: Path) -> None:
    """`dagster definitions validate -m dagster_project` loads the code location of the repo."""
    env = env_for(DAGSTER_HOME=str(tmp_path))
    (tmp_path / "dagster.yaml").write_text((REPO / "dagster_home" / "dagster.yaml").read_text())
    proc = subprocess.run([str(BIN / "dagster"), "definitions", "validate", "-m", "dagster_project"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Validation successful" in proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def stage_items():
    """The repository's stage items, read once for the tests below (they only read them)."""
    return load_stage_items(REPO)


@pytest.fixture(scope="module")
def definitions():
    """The repository's Definitions, built once for the tests below (they only read them)."""
    return build_definitions(REPO)


def test_real_dvc_yaml_graph(stage_items, definitions) -> None:
    """Every expanded stage item of the repository's dvc.yaml is an asset with deps from deps/outs."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    items = stage_items
    names = {i.name for i in items}
    for ds in params["datasets"]:
        assert {f"catalog@{ds}", f"clean@{ds}"} <= names
        for m in params["methods"]:
            assert {f"index@{ds}-{m}", f"evaluate@{ds}-{m}"} <= names

    graph = definitions.resolve_asset_graph()
    keys = graph.get_all_asset_keys()
    assert K(["catalog", "toollens"]) in keys
    assert K(["index", "mtrb-restbench.bm25"]) in keys  # matrix values, not a split on "-"
    assert graph.get(K(["evaluate", "toollens.bm25"])).parent_keys == {
        K(["index", "toollens.bm25"]), K(["clean", "toollens"])}
    assert graph.get(K(["clean", "toollens"])).parent_keys == {K(["catalog", "toollens"])}
    assert graph.get(K(["index", "toollens.bm25"])).parent_keys == {K(["clean", "toollens"])}
    assert graph.get(K(["catalog", "toollens"])).parent_keys == set()
    if "toollens" in params.get("finetune_datasets", []):
        assert graph.get(K(["index_ft", "toollens.dense-ft"])).parent_keys == {
            K(["clean", "toollens"]), K(["finetune", "toollens.dense-ft"])}
        assert graph.get(K(["report", "toollens.dense-ft"])).parent_keys == {K(["evaluate_ft", "toollens.dense-ft"])}
    for m in params["methods"]:  # a report asset per evaluation stage, depending on that stage only
        assert graph.get(K(["report", f"toollens.{m}"])).parent_keys == {K(["evaluate", f"toollens.{m}"])}
    assert graph.get(K(["evaluate", "toollens.bm25"])).group_name == "evaluate"
    n_items = len(items)
    n_reports = len([i for i in items if i.result_dirs and i.dataset])
    from dagster_project.reproduction_assets import KEY as REPRODUCTION
    assert REPRODUCTION in keys and graph.get(REPRODUCTION).parent_keys == set()  # reads git, after no stage
    assert len(keys) == n_items + n_reports + 1


def test_node_labels_name_dataset_and_method_and_groups_fit(stage_items, definitions) -> None:
    """The asset graph shows a node's last key part only (and cuts it past 31 characters in the middle),
    a collapsed group's name up to 17 characters: no group holds two nodes with the same label, a label
    names the item's dataset and method, a group name is not cut."""
    from dagster_project.dvc_assets import GROUP_NAME_MAX

    items = stage_items
    graph = definitions.resolve_asset_graph()
    by_key = {i.asset_key: i for i in items}
    by_name = {i.name: i for i in items}
    labels: dict[str, list[str]] = {}
    from dagster_project.reproduction_assets import KEY as REPRODUCTION
    for key in graph.get_all_asset_keys() - {REPRODUCTION}:  # the matrix asset is not a DVC stage
        node = graph.get(key)
        labels.setdefault(node.group_name, []).append(key.path[-1])
        assert len(node.group_name) <= GROUP_NAME_MAX, node.group_name
        item = by_key.get(key) or by_name[node.metadata["dvc/stage"]]  # a report: its evaluation's facets
        facets = item.facets
        for facet in ("dataset", "method"):
            if facets.get(facet):
                assert facets[facet] in key.path[-1], (key, facet)
    assert all(len(set(v)) == len(v) for v in labels.values()), {g: v for g, v in labels.items()
                                                                  if len(set(v)) != len(v)}
    groups = {i.stage: graph.get(i.asset_key).group_name for i in items}
    assert len(set(groups.values())) == len(groups)  # shortening never merges two stages
    assert groups["evaluate"] == "evaluate" and groups.get("reinvoke_ablations", "reinvoke_ablate") == "reinvoke_ablate"


def test_every_data_dep_is_produced_by_a_stage(stage_items) -> None:
    """A stage reading data/... that no stage writes (e.g. a *_datasets list naming a dataset missing
    from `datasets`) would fail at `dvc repro` time; catch it when the graph is built."""
    import subprocess

    items = stage_items
    outs = [o for i in items for o in i.outs]
    # committed inputs are not stage outputs: the durable LLM generations (data/generations, written by
    # `toolret generate-shards` and kept in git) -- a dep is fine when git tracks files under it
    tracked = subprocess.run(["git", "ls-files", "data"], cwd=REPO, capture_output=True, text=True).stdout.split()
    dangling = sorted({f"{i.name}: {d}" for i in items for d in i.deps if d.startswith("data/")
                       and not any(d == o or d.startswith(o + "/") for o in outs)
                       and not any(t == d or t.startswith(d + "/") for t in tracked)})
    assert not dangling, dangling


def test_checks_schedule_sensor_job_present(definitions) -> None:
    defs = definitions
    check_keys = defs.resolve_asset_graph().asset_check_keys
    assert dg.AssetCheckKey(K(["catalog", "toollens"]), "catalog_valid") in check_keys
    assert dg.AssetCheckKey(K(["clean", "toollens"]), "catalog_valid") in check_keys
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    if "toollens" in params.get("finetune_datasets", []) and "dense" in params["methods"]:
        assert dg.AssetCheckKey(K(["evaluate_ft", "toollens.dense-ft"]), "not_worse_than_dense") in check_keys
    schedule = defs.resolve_schedule_def("weekly_retrain")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    sensor = defs.resolve_sensor_def("raw_data_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    job = defs.resolve_job_def(ALL_JOB)
    assert job.executor_def.name == "in_process"


def test_paper_job_retrains_exactly_the_training_stages(stage_items, definitions) -> None:
    """`make paper` (toolret_all) forces every stage that trains a model: their committed artifacts are up to
    date for DVC, so without --force the paper protocol would retrain none of them."""
    items = stage_items
    trains = {i.name.split("@")[0] for i in items if i.trains}
    assert trains == {"finetune", "colt", "toolrerank_train", "qta_adapter", "qta_synthetic", "qta_syn_ft",
                      "qta_syn_large"}
    defs = definitions
    ops = (defs.resolve_job_def(ALL_JOB).run_config or {}).get("ops", {})  # the job's default run config
    assert set(ops) == {op_name_for(i.name) for i in items if i.trains}
    assert all(v == {"config": {"force": True}} for v in ops.values())
    assert defs.resolve_job_def(RUN_JOB).run_config is None  # make run reuses what is committed


HAND_WRITTEN = {
    "stages": {
        "prepare": {"foreach": "${items}", "do": {"cmd": "mkdir -p out/prep && echo ${item} > out/prep/${item}.txt",
                                                  "deps": ["src"], "outs": ["out/prep/${item}.txt"]}},
        "train": {"matrix": {"item": "${items}", "model": ["a-b", "c"]},
                  "cmd": "mkdir -p out/train && cat out/prep/${item.item}.txt > out/train/${item.item}-${item.model}.txt",
                  "deps": ["out/prep/${item.item}.txt"], "params": ["lr"],
                  "outs": ["out/train/${item.item}-${item.model}.txt"]},
        "summary": {"cmd": "cat out/train/* > out/summary.txt", "deps": ["out/train"], "outs": ["out/summary.txt"]},
    }
}


def test_hand_written_foreach_matrix_plain(tmp_path: Path) -> None:
    """foreach / matrix / plain stages, dir deps on file outs, in a project DVC was never run in."""
    (tmp_path / "src").mkdir()
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(HAND_WRITTEN))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"items": ["x-1", "y"], "lr": 0.1}))
    items = {i.name: i for i in load_stage_items(tmp_path)}
    assert set(items) == {"prepare@x-1", "prepare@y", "train@x-1-a-b", "train@x-1-c", "train@y-a-b",
                          "train@y-c", "summary"}
    assert items["train@x-1-a-b"].key_path == ("train", "x-1.a-b")
    assert items["train@x-1-a-b"].facets == {"item": "x-1", "model": "a-b"}
    assert items["train@x-1-a-b"].upstream == ("prepare@x-1",)
    assert items["train@x-1-a-b"].params == ("lr",)
    assert items["prepare@y"].key_path == ("prepare", "y")
    assert items["summary"].key_path == ("summary",)
    assert set(items["summary"].upstream) == {n for n in items if n.startswith("train@")}
    assert op_name_for("train@x-1-a-b") == "dvc__train__x_1_a_b"
    defs = build_definitions(tmp_path)
    graph = defs.resolve_asset_graph()
    assert graph.get(K(["summary"])).parent_keys == {K(["train", f"{a}.{b}"]) for a in ("x-1", "y") for b in ("a-b", "c")}


def test_hand_written_pipeline_materializes(tmp_path: Path) -> None:
    """Each asset runs `dvc repro --single-item`; dvc.lock records it; metadata carries the md5."""
    from orch_helpers import make_dvc_project

    project = make_dvc_project(tmp_path / "p", HAND_WRITTEN, {"items": ["x-1", "y"], "lr": 0.1}, copy_code=False)
    (project / "src").mkdir()
    (project / "src" / "a.txt").write_text("source\n")
    defs = build_definitions(project)
    result = defs.resolve_job_def(ALL_JOB).execute_in_process(instance=dg.DagsterInstance.ephemeral())
    assert result.success
    assert (project / "out" / "summary.txt").read_text().count("\n") == 4
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"prepare@x-1", "prepare@y", "train@x-1-a-b", "train@x-1-c", "train@y-a-b",
                                   "train@y-c", "summary"}
    mats = {m.asset_key: m for m in result.get_asset_materialization_events()}
    summary = mats[K(["summary"])].materialization
    assert summary.metadata["dvc/md5/out/summary.txt"].value == lock["stages"]["summary"]["outs"][0]["md5"]
    assert summary.tags.get("dagster/data_version") == lock["stages"]["summary"]["outs"][0]["md5"]


def test_failing_stage_raises_with_output_tail(tmp_path: Path) -> None:
    from orch_helpers import make_dvc_project

    dvc_yaml = {"stages": {"boom": {"cmd": "echo about to fail && echo 'bad thing happened' >&2 && exit 3",
                                    "outs": ["never.txt"]}}}
    project = make_dvc_project(tmp_path / "p", dvc_yaml, {}, copy_code=False)
    result = build_definitions(project).resolve_job_def(ALL_JOB).execute_in_process(
        instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    text = json.dumps(str(failure.event_specific_data.error))
    assert "bad thing happened" in text


def test_project_dir_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dagster_project.dvc_assets import default_project_dir

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    assert default_project_dir() == tmp_path.resolve()
    monkeypatch.delenv("TOOLRET_PROJECT_DIR")
    assert default_project_dir() == REPO
    assert os.path.basename(sys.executable).startswith("python")
