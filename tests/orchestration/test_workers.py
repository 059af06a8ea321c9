"""`make run WORKERS=N`: independent stages run at once, DVC's own commands one at a time.

Two stages that can only finish together (each waits for the other to have started) succeed with two
workers and fail with one: what the run's wall time gains rests on that, not on a clock in a test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orch_helpers import BIN, REPO, make_dvc_project, sh

pytestmark = pytest.mark.integration


def _waits_for(me: str, other: str) -> str:
    """A stage command that marks its start, waits up to 15 s for ``other``'s, and fails if it never came."""
    return (f"touch {me}.started && for i in $(seq 150); do [ -f {other}.started ] && break; sleep 0.1; done "
            f"&& test -f {other}.started && cat src.txt > {me}.out")


GRAPH = {"stages": {
    "left": {"cmd": _waits_for("left", "right"), "deps": ["src.txt"], "outs": ["left.out"]},
    "right": {"cmd": _waits_for("right", "left"), "deps": ["src.txt"], "outs": ["right.out"]},
    "joined": {"cmd": "cat left.out right.out > joined.out", "deps": ["left.out", "right.out"], "outs": ["joined.out"]},
}}


def _launch(project: Path, home: Path, workers: str) -> subprocess.CompletedProcess:
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TOOLRET_PROJECT_DIR": str(project), "DAGSTER_HOME": str(home), "TOOLRET_WORKERS": workers,
           "PYTHONPATH": str(REPO)}
    return subprocess.run([str(BIN / "python"), "-m", "dagster_project.launch", "-m", "dagster_project", "-j",
                           "toolret_run"], cwd=project, env=env, capture_output=True, text=True, timeout=600)


def _project(path: Path) -> Path:
    project = make_dvc_project(path, GRAPH, {}, copy_code=False)
    (project / "src.txt").write_text("x\n")
    sh(["git", "add", "-A"], project)
    return project


def test_two_workers_run_independent_stages_at_once_and_one_worker_does_not(tmp_path: Path) -> None:
    two = _project(tmp_path / "two")
    proc = _launch(two, tmp_path / "home-two", "2")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (two / "joined.out").read_text() == "x\nx\n"
    lock = (two / "dvc.lock").read_text()  # the run's stages recorded at its end, as with one worker
    assert all(f"{stage}:" in lock for stage in ("left", "right", "joined"))
    status = subprocess.run([str(BIN / "dvc"), "status"], cwd=two, capture_output=True, text=True)
    assert "up to date" in status.stdout, status.stdout + status.stderr

    one = _project(tmp_path / "one")
    proc = _launch(one, tmp_path / "home-one", "1")
    assert proc.returncode != 0  # the first stage waited for a second that could not start
    out = proc.stdout + proc.stderr
    assert "exited with 1" in out and ("stage `left`" in out or "stage `right`" in out), out[-4000:]
    assert not (one / "joined.out").exists()


def test_a_bad_worker_count_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from dagster_project.definitions import run_executor

    monkeypatch.setenv("TOOLRET_WORKERS", "two")
    with pytest.raises(ValueError, match="TOOLRET_WORKERS='two'"):
        run_executor()
    assert run_executor(1).name == "in_process"
    assert run_executor(3).name == "multiprocess_3"
