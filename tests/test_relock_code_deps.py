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


def test_a_folder_dep_narrowed_to_a_committed_subfolder_is_recorded_as_dvc_would(tmp_path: Path) -> None:
    """``data/gen`` -> ``data/gen/m1`` (the shards of the one generator the stage reads): DVC finds the stage
    current afterwards; a subfolder with an untracked file is not taken (it may hold data git does not know)."""
    dvc = shutil.which("dvc")
    if dvc is None:
        pytest.skip("dvc not installed")

    def run(*cmd: str) -> str:
        return subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    run("git", "init", "-q")
    run(dvc, "init", "-q")
    for model in ("m1", "m2"):
        (tmp_path / "gen" / model).mkdir(parents=True)
        (tmp_path / "gen" / model / "shard-0.jsonl").write_text(f'{{"out": "{model}"}}\n')
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  s:\n    cmd: cat gen/m1/shard-0.jsonl > s.txt\n    deps: [gen]\n    outs: [s.txt]\n")
    run(dvc, "repro", "-q")
    run("git", "add", "-A")
    run("git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "c")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  s:\n    cmd: cat gen/m1/shard-0.jsonl > s.txt\n    deps: [gen/m1]\n    outs: [s.txt]\n")
    (tmp_path / "gen" / "m2" / "shard-1.jsonl").write_text('{"out": "new"}\n')  # another generator's new shard
    assert "changed deps" in run(dvc, "status", "s")
    (tmp_path / "gen" / "m1" / "untracked.jsonl").write_text("{}\n")
    assert _tool().main([], root=tmp_path) == 2  # not all committed: refused, nothing written
    assert "changed deps" in run(dvc, "status", "s")
    (tmp_path / "gen" / "m1" / "untracked.jsonl").unlink()

    assert _tool().main([], root=tmp_path) == 0

    assert "up to date" in run(dvc, "status", "s")
