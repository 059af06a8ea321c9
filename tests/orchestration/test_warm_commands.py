"""Stage commands ``toolret ...`` run as children of a warm server (imports done once per run): the same
outputs and exit codes as a fresh ``toolret`` process, one server for many commands, and anything that is
not exactly a ``toolret`` command left to bash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dagster_project import warm_commands
from dagster_project.resources import stage_env
from dagster_project.warm_commands import run_warm, warm_argv

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_only_a_plain_toolret_command_is_run_warm(monkeypatch) -> None:
    assert warm_argv("toolret catalog build --dataset toollens --out data/catalogs/toollens") == [
        "catalog", "build", "--dataset", "toollens", "--out", "data/catalogs/toollens"]
    assert warm_argv("toolret index --catalog a && rm -rf b") is None  # shell syntax: bash runs it
    assert warm_argv("toolret report > out.md") is None
    assert warm_argv("python tools/x.py --out y") is None
    monkeypatch.setenv("TOOLRET_WARM_COMMANDS", "0")
    assert warm_argv("toolret datasets") is None


def test_a_warm_command_writes_what_a_fresh_process_writes_and_exits_as_it_does(tmp_path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    from make_fixture import write_fixture_catalog

    source = write_fixture_catalog(tmp_path / "fixture", n_tools=30, n_train=40, n_test=20, seed=0)
    env = stage_env({"TOOLRET_PROJECT_DIR": str(ROOT)})
    cold = subprocess.run([sys.executable, "-m", "toolret.cli", "catalog", "build", "--dataset", str(source),
                           "--out", str(tmp_path / "cold")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert cold.returncode == 0, cold.stderr[-2000:]
    lines: list[str] = []
    rc = run_warm(["catalog", "build", "--dataset", str(source), "--out", str(tmp_path / "warm")], ROOT, env,
                  tmp_path / "logs" / "build.log", lines.append)
    assert rc == 0 and any('"n_tools": 30' in line for line in lines)
    cold_files = sorted(p.relative_to(tmp_path / "cold") for p in (tmp_path / "cold").rglob("*") if p.is_file())
    warm_files = sorted(p.relative_to(tmp_path / "warm") for p in (tmp_path / "warm").rglob("*") if p.is_file())
    assert cold_files == warm_files and cold_files
    for rel in cold_files:
        assert (tmp_path / "cold" / rel).read_bytes() == (tmp_path / "warm" / rel).read_bytes(), rel
    server = warm_commands._server

    # a failing command: its exit code and its message, and the server goes on serving
    failed: list[str] = []
    assert run_warm(["--params", str(tmp_path / "missing.yaml"), "datasets"], ROOT, env,
                    tmp_path / "logs" / "missing.log", failed.append) == 2
    assert any("missing.yaml" in line and "not found" in line for line in failed)
    assert run_warm(["no-such-command"], ROOT, env, tmp_path / "logs" / "bad.log", failed.append) == 2
    listed: list[str] = []
    assert run_warm(["datasets"], ROOT, env, tmp_path / "logs" / "datasets.log", listed.append) == 0
    assert any("toollens" in line for line in listed)
    assert warm_commands._server is server and server.poll() is None  # one server for all of them
    assert os.getpid() != server.pid
