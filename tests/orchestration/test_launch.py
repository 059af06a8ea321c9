"""`make run` launches its job through the code location: the run belongs to the job in the UI.

The job's Runs tab and the overview timeline of the Dagster UI list the runs whose job name matches and
whose ``.dagster/repository`` tag is ``<repository>@<code location>``, a tag Dagster derives from the
run's remote job origin. A run made by ``dagster job execute`` has no such origin and shows on the Runs
page only. These tests run the Makefile's own `run` recipe line (module and job swapped for a tiny
definitions module written here) against a temporary ``DAGSTER_HOME`` and read the stored runs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from orch_helpers import BIN, REPO, env_for, make_instance

pytestmark = pytest.mark.integration

MODULE = "tiny_launch_defs"
TINY_DEFS = '''
import dagster as dg


@dg.asset
def greeting() -> str:
    return "hello"


@dg.asset
def broken() -> None:
    raise RuntimeError("broken on purpose (test_launch)")


defs = dg.Definitions(
    assets=[greeting, broken],
    jobs=[dg.define_asset_job("tiny_ok", selection=["greeting"]),
          dg.define_asset_job("tiny_fail", selection=["broken"])],
)
'''
REPOSITORY = "__repository__"  # the repository Dagster makes of a module's `Definitions`
REPOSITORY_LABEL_TAG = ".dagster/repository"  # what the UI's job pages filter runs on (with the job name)


def _recipe(target: str) -> list[str]:
    """The recipe lines of ``target`` in the project Makefile."""
    lines = (REPO / "Makefile").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^{target}:", line))
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        out.append(line[1:])
    return out


def _make_run_line(module: str, job: str) -> str:
    """`make run`'s launch line with the code location module and the job swapped."""
    (line,) = [line for line in _recipe("run") if "-j toolret_run" in line]
    assert re.search(r"-m dagster_project(?=\s)", line), f"`make run` does not name its code location: {line}"
    line = re.sub(r"-m dagster_project(?=\s)", f"-m {module}", line).replace("-j toolret_run", f"-j {job}")
    line = line.replace("$(BIN)/", f"{BIN}/")
    assert "$(" not in line, line
    return line


def _expected_location(workdir: Path) -> str:
    """The code location name `dagster dev -m <MODULE>` (run in ``workdir``) shows."""
    from dagster._cli.workspace.cli_target import workspace_opts_to_load_target
    from dagster_shared.cli import WorkspaceOpts

    target = workspace_opts_to_load_target(WorkspaceOpts(module_name=(MODULE,), working_directory=str(workdir)))
    (origin,) = target.create_origins()
    return origin.location_name


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    (tmp_path / f"{MODULE}.py").write_text(TINY_DEFS, encoding="utf-8")
    # `python -m dagster_project.launch` imports `dagster_project`, whose code location is built from
    # $TOOLRET_PROJECT_DIR's dvc.yaml: an empty pipeline keeps that import cheap
    (tmp_path / "dvc.yaml").write_text("stages: {}\n", encoding="utf-8")
    (tmp_path / "params.yaml").write_text("{}\n", encoding="utf-8")
    return tmp_path


def _launch(workdir: Path, home: Path, job: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", _make_run_line(MODULE, job)], cwd=workdir, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, env=env_for(workdir, DAGSTER_HOME=str(home)))


def _runs_in_ui(instance: dg.DagsterInstance, job: str, location: str) -> list[dg.DagsterRun]:
    """The runs the UI lists under ``job`` of code location ``location``."""
    return list(instance.get_runs(filters=dg.RunsFilter(
        job_name=job, tags={REPOSITORY_LABEL_TAG: f"{REPOSITORY}@{location}"})))


def test_make_run_attaches_the_run_to_its_code_location(workdir: Path) -> None:
    home = workdir / "dagster_home"
    instance = make_instance(home)
    location = _expected_location(workdir)

    proc = _launch(workdir, home, "tiny_ok")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    assert len(list(instance.get_runs(filters=dg.RunsFilter(job_name="tiny_ok")))) == 1
    runs = _runs_in_ui(instance, "tiny_ok", location)
    assert len(runs) == 1, (f"the run of tiny_ok is not in code location {location!r}: tags "
                            f"{[r.tags for r in instance.get_runs()]}")
    run = runs[0]
    assert run.status == dg.DagsterRunStatus.SUCCESS
    origin = run.remote_job_origin
    assert origin is not None, "the run has no remote job origin (made outside the code location)"
    assert origin.job_name == "tiny_ok"
    assert origin.location_name == location
    assert origin.repository_origin.repository_name == REPOSITORY
    assert instance.get_run_stats(run.run_id).steps_succeeded == 1


def test_make_run_fails_when_the_run_fails(workdir: Path) -> None:
    home = workdir / "dagster_home"
    instance = make_instance(home)

    proc = _launch(workdir, home, "tiny_fail")
    assert proc.returncode != 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = _runs_in_ui(instance, "tiny_fail", _expected_location(workdir))
    assert run.status == dg.DagsterRunStatus.FAILURE


def test_unknown_job_is_a_clear_error(workdir: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from dagster_project.launch import main

    monkeypatch.setenv("DAGSTER_HOME", str(workdir / "dagster_home"))
    make_instance(workdir / "dagster_home")
    monkeypatch.chdir(workdir)
    assert main(["-m", MODULE, "-j", "no_such_job"]) == 2
    err = capsys.readouterr().err
    assert "'no_such_job' not found" in err and "tiny_ok" in err
