"""A run's fixed cost and its guard on costly stages.

One ``dvc status`` for the whole graph per run: a current stage is not handed to ``dvc repro`` again; a
stale costly stage (LLM generation, training) whose committed outputs exist stops before it runs, naming
the dependency that changed and the commands that rebuild or re-record it, unless asked to run.
"""

from __future__ import annotations

import json

import dagster as dg
import pytest
import yaml

from dagster_project.definitions import ALL_JOB, RUN_JOB, build_definitions
from dagster_project.resources import DvcResource

pytestmark = pytest.mark.integration

GRAPH = {
    "stages": {
        "prepare": {"cmd": "mkdir -p out && cat src/a.txt > out/prep.txt", "deps": ["src"], "outs": ["out/prep.txt"]},
        "generate": {"cmd": "cat out/prep.txt out/prep.txt > out/gen.txt", "deps": ["out/prep.txt", "prompt.txt"],
                     "outs": ["out/gen.txt"], "meta": {"costly": True}},
        "report": {"cmd": "wc -l out/gen.txt > out/report.txt", "deps": ["out/gen.txt"], "outs": ["out/report.txt"]},
    }
}


def _project(tmp_path):
    from orch_helpers import make_dvc_project, sh

    project = make_dvc_project(tmp_path / "p", GRAPH, {}, copy_code=False)
    (project / "src").mkdir()
    (project / "src" / "a.txt").write_text("one\n")
    (project / "prompt.txt").write_text("v1\n")
    sh(["git", "add", "-A"], project)
    return project


def _messages(result) -> list[str]:
    """Every log line of the run (the steps' own ``context.log`` lines included)."""
    return [r.user_message or "" for r in result.dagster_run_instance.all_logs(result.run_id)]


def _run(project, allow_costly: bool = False, job: str = RUN_JOB, tags=None):
    defs = build_definitions(project)
    instance = dg.DagsterInstance.ephemeral()
    result = defs.resolve_job_def(job).execute_in_process(
        instance=instance, raise_on_error=False, tags=tags,
        resources={"dvc": DvcResource(project_dir=str(project), allow_costly=allow_costly)})
    result.dagster_run_instance = instance
    return result


def test_a_current_graph_runs_one_status_and_no_repro(tmp_path) -> None:
    project = _project(tmp_path)
    first = _run(project, job=ALL_JOB)  # builds everything (`make paper`: the costly output is absent)
    assert first.success
    logs = "\n".join(_messages(first))
    assert logs.count("repro --single-item") == 3
    second = _run(project)
    assert second.success
    logs = "\n".join(_messages(second))
    assert "repro --single-item" not in logs
    assert logs.count("dvc status of the whole graph") == 1
    assert logs.count("is up to date") == 3


def test_a_cheap_change_reruns_downstream_but_a_stale_costly_stage_stops_the_run(tmp_path) -> None:
    project = _project(tmp_path)
    assert _run(project, job=ALL_JOB).success
    gen_before = (project / "out" / "gen.txt").read_text()
    (project / "prompt.txt").write_text("v2\n")  # what the costly stage reads changed
    result = _run(project)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    text = str(failure.event_specific_data.error)
    assert "costly stage `generate` is stale" in text
    assert "prompt.txt (modified)" in text
    assert "dvc commit -f generate" in text and "make paper" in text
    assert (project / "out" / "gen.txt").read_text() == gen_before  # not regenerated
    # asked to: it runs
    assert _run(project, allow_costly=True).success
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert lock["stages"]["generate"]["deps"][1]["path"] == "prompt.txt"


def test_an_upstream_rerun_that_leaves_the_costly_stage_current_does_not_stop(tmp_path) -> None:
    project = _project(tmp_path)
    assert _run(project, job=ALL_JOB).success
    # `prepare` is stale (its dep's mtime and bytes change) but writes the same output: `generate` stays current
    (project / "src" / "b.txt").write_text("unrelated\n")
    result = _run(project)
    assert result.success, [str(e.event_specific_data.error) for e in result.all_events
                            if e.event_type_value == "STEP_FAILURE"]
    logs = "\n".join(_messages(result))
    assert "repro --single-item prepare" in logs
    assert "repro --single-item generate" not in logs


def test_a_batch_run_writes_dvc_lock_once_at_its_end(tmp_path) -> None:
    """`make run` (launch.py tags its run): stale stages run their commands without `dvc repro`; one
    `dvc commit` at the end records them all, after which DVC finds the whole graph current."""
    from orch_helpers import BIN, sh

    from dagster_project.dvc_assets import BATCH_TAG, commit_run

    project = _project(tmp_path)
    assert _run(project, job=ALL_JOB).success
    lock_before = (project / "dvc.lock").read_text()
    (project / "src" / "a.txt").write_text("two\n")  # prepare (cheap) and report are stale; generate is costly
    (project / "prompt.txt").write_text("v1\n")
    result = _run(project, allow_costly=True, tags={BATCH_TAG: "batch"})
    assert result.success
    logs = "\n".join(_messages(result))
    assert "repro --single-item" not in logs and logs.count("Running stage '") == 3
    assert (project / "dvc.lock").read_text() == lock_before  # nothing recorded yet
    assert (project / "out" / "report.txt").read_text().split()[0] == "2"
    assert commit_run(DvcResource(project_dir=str(project)), result.run_id) == ["prepare", "generate", "report"]
    status = sh([str(BIN / "dvc"), "status", "--json"], project).stdout
    assert json.loads(status[status.index("{"):]) == {}


@pytest.mark.parametrize("batch", [True, False], ids=["make-run", "ui"])
def test_a_fresh_clone_builds_what_it_lacks_and_produces_and_keeps_the_committed_costly_output(tmp_path, batch) -> None:
    """A fresh clone has the committed costly output but none of the cheap outputs: the report (what the run
    produces, read by nothing) is built; the cheap input of the costly stage is current by dvc.lock and, read
    by nothing the run runs, left unbuilt; the costly stage neither stops the run nor is regenerated."""
    from dagster_project.dvc_assets import BATCH_TAG

    project = _project(tmp_path)
    assert _run(project, job=ALL_JOB).success
    import shutil

    gen = (project / "out" / "gen.txt").read_text()
    (project / "out" / "prep.txt").unlink()  # what a clone lacks: outputs neither in git nor in a remote
    (project / "out" / "report.txt").unlink()
    shutil.rmtree(project / ".dvc" / "cache")  # ... nor in a DVC cache (`dvc pull` would check them out)
    result = _run(project, tags={BATCH_TAG: "batch"} if batch else None)
    assert result.success, [str(e.event_specific_data.error) for e in result.all_events
                            if e.event_type_value == "STEP_FAILURE"]
    logs = "\n".join(_messages(result))
    assert "Running stage 'generate'" not in logs and "repro --single-item generate" not in logs
    assert (project / "out" / "gen.txt").read_text() == gen and (project / "out" / "report.txt").is_file()
    assert not (project / "out" / "prep.txt").exists()
    assert "`prepare` is current by dvc.lock" in logs


EVAL_GRAPH = {
    "stages": {
        "prepare": {"cmd": "mkdir -p out && cat src/a.txt > out/prep.txt", "deps": ["src"], "outs": ["out/prep.txt"]},
        "index": {"cmd": "sort out/prep.txt > out/index.txt", "deps": ["out/prep.txt"], "outs": ["out/index.txt"]},
        "evaluate": {"cmd": "bash eval.sh", "deps": ["out/index.txt", "eval.sh"],
                     "outs": [{"results": {"cache": False}}]},  # kept in git, as data/runs is
    }
}


def _as_a_fresh_clone(project) -> None:
    """What a clone of ``project`` has: git's files (the results) and neither the DVC cache nor its outputs."""
    import shutil

    for name in ("prep.txt", "index.txt"):
        (project / "out" / name).unlink()
    shutil.rmtree(project / ".dvc" / "cache")


@pytest.mark.parametrize("batch", [True, False], ids=["make-run", "ui"])
def test_a_fresh_clone_with_the_results_in_git_builds_nothing_until_a_real_change_needs_it(tmp_path, batch) -> None:
    from orch_helpers import make_dvc_project, sh

    from dagster_project.dvc_assets import BATCH_TAG

    project = make_dvc_project(tmp_path / "p", EVAL_GRAPH, {}, copy_code=False)
    (project / "src").mkdir()
    (project / "src" / "a.txt").write_text("b\na\n")
    (project / "eval.sh").write_text("mkdir -p results && wc -l < out/index.txt > results/n.txt\n")
    sh(["git", "add", "-A"], project)
    tags = {BATCH_TAG: "batch"} if batch else None
    assert _run(project, job=ALL_JOB).success
    if batch:
        from dagster_project.dvc_assets import commit_run  # noqa: F401  (ALL_JOB is not a batch run)
    _as_a_fresh_clone(project)
    result = _run(project, tags=tags)
    assert result.success
    logs = "\n".join(_messages(result))
    assert "Running stage '" not in logs and "repro --single-item" not in logs
    assert logs.count("is current by dvc.lock") == 3
    assert not (project / "out" / "index.txt").exists()
    # a real change to what the evaluation runs: it re-runs, and the missing inputs it reads are built first
    (project / "eval.sh").write_text("mkdir -p results && cat out/index.txt > results/n.txt\n")
    result = _run(project, tags=tags)
    assert result.success, [str(e.event_specific_data.error) for e in result.all_events
                            if e.event_type_value == "STEP_FAILURE"]
    logs = "\n".join(_messages(result))
    ran = ("Running stage '{}'" if batch else "repro --single-item {}")
    assert all(ran.format(s) in logs for s in ("prepare", "index", "evaluate"))
    assert (project / "results" / "n.txt").read_text() == "a\nb\n"


def test_a_run_after_a_commit_killed_mid_write_puts_dvc_lock_back(tmp_path, capsys) -> None:
    """`make run` ends with one `dvc commit`, which rewrites dvc.lock in place: killed then, the lock is left
    empty and every stage (costly ones too) looks stale. The lock before the commit is kept until the commit
    returns, and the next run puts it back instead of stopping at the costly stage."""
    from dagster_project.dvc_assets import BATCH_TAG

    project = _project(tmp_path)
    assert _run(project, job=ALL_JOB).success
    lock = (project / "dvc.lock").read_text()
    (project / "src" / "a.txt").write_text("two\n")  # a cheap stage to rerun and commit in a batch run
    batch = _run(project, allow_costly=True, tags={BATCH_TAG: "batch"})
    assert batch.success
    from dagster_project.dvc_assets import commit_run

    assert commit_run(DvcResource(project_dir=str(project)), batch.run_id)
    backup = project / "data" / ".orchestration" / "dvc.lock.before-commit"
    assert not backup.exists()  # a commit that returned leaves no backup
    committed = (project / "dvc.lock").read_text()
    # a commit killed mid-write: the backup is there, the lock truncated
    backup.write_text(committed)
    (project / "dvc.lock").write_text("")
    result = _run(project)
    assert result.success, [str(e.event_specific_data.error) for e in result.all_events
                            if e.event_type_value == "STEP_FAILURE"]
    assert (project / "dvc.lock").read_text() == committed != lock
    assert "put back" in capsys.readouterr().err and not backup.exists()


def test_a_run_after_a_closed_run_with_nothing_changed_takes_its_status_and_a_change_asks_dvc_again(tmp_path) -> None:
    """The whole graph's ``dvc status`` (~40 s on the real graph) is kept by a run's end where it is known
    and taken by the next run while no file the graph reads changed (dagster_project.graph_snapshot)."""
    from dagster_project.dvc_assets import BATCH_TAG, close_run

    project = _project(tmp_path)
    assert _run(project, job=ALL_JOB).success
    dvc = DvcResource(project_dir=str(project))
    first = _run(project, tags={BATCH_TAG: "batch"})
    assert first.success
    close_run(dvc, first.run_id, succeeded=True)
    second = _run(project, tags={BATCH_TAG: "batch"})
    assert second.success
    logs = "\n".join(_messages(second))
    assert "dvc status of the whole graph (kept from the last run" in logs and "status --json" not in logs
    assert logs.count("is up to date") == 3
    close_run(dvc, second.run_id, succeeded=True)
    (project / "src" / "b.txt").write_text("unrelated\n")  # `prepare` reads src/ (its output stays the same)
    third = _run(project, tags={BATCH_TAG: "batch"})
    assert third.success
    logs = "\n".join(_messages(third))
    assert "dvc status of the whole graph (asked of DVC)" in logs and "Running stage 'prepare'" in logs
    close_run(dvc, third.run_id, succeeded=True)  # it ran stages: DVC is asked for the status it keeps
    fourth = _run(project, tags={BATCH_TAG: "batch"})
    logs = "\n".join(_messages(fourth))
    assert "kept from the last run" in logs and "Running stage" not in logs


def test_a_failed_run_keeps_no_status(tmp_path) -> None:
    from dagster_project import graph_snapshot
    from dagster_project.dvc_assets import BATCH_TAG, close_run

    project = _project(tmp_path)
    assert _run(project, job=ALL_JOB).success
    dvc = DvcResource(project_dir=str(project))
    run = _run(project, tags={BATCH_TAG: "batch"})
    close_run(dvc, run.run_id, succeeded=True)
    assert graph_snapshot.stored_status(project) is not None
    close_run(dvc, run.run_id, succeeded=False)
    assert graph_snapshot.stored_status(project) is None
