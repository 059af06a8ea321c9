"""``tools/relock_code_deps.py`` records an output-neutral code change in ``dvc.lock`` as ``dvc commit`` would
(DVC itself then finds the stage current), and leaves alone a stage whose lock already recorded an older
version of its code: a change committed earlier without being recorded is not hidden by a later relock."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from toolret.stages import ROOT

pytestmark = pytest.mark.integration


def _tool():
    spec = importlib.util.spec_from_file_location("relock_code_deps", ROOT / "tools" / "relock_code_deps.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_relocked_change_is_current_and_an_older_unrecorded_one_stays_stale(tmp_path: Path) -> None:
    dvc = shutil.which("dvc")
    if dvc is None:
        pytest.skip("dvc not installed")

    def run(*cmd: str) -> str:
        return subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    def commit() -> None:
        run("git", "add", "-A")
        run("git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "c")

    run("git", "init", "-q")
    run(dvc, "init", "-q")
    (tmp_path / "a.py").write_text("print('a')\n")
    (tmp_path / "b.py").write_text("print('b')\n")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n"
        "  sa:\n    cmd: python a.py > a.txt\n    deps: [a.py]\n    outs: [a.txt]\n"
        "  sb:\n    cmd: python b.py > b.txt\n    deps: [b.py]\n    outs: [b.txt]\n")
    run(dvc, "repro", "-q")
    commit()
    # b.py changes in a commit of its own and is never recorded: sb is stale at HEAD
    (tmp_path / "b.py").write_text("print('B')\n")
    commit()
    # the change under review: a comment in a.py (cannot alter a.txt) and another in b.py
    (tmp_path / "a.py").write_text("print('a')  # a comment\n")
    (tmp_path / "b.py").write_text("print('B')  # a comment\n")
    assert "sa" in run(dvc, "status") and "sb" in run(dvc, "status")

    assert _tool().main([], root=tmp_path) == 0

    status = run(dvc, "status", "sa")
    assert "up to date" in status
    assert "changed deps" in run(dvc, "status", "sb")
