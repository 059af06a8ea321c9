"""``tools/record_code_change.py`` records a code change in ``dvc.lock`` as ``dvc commit`` would: DVC itself
then finds the stage current, and an entry recording another version of the file is left alone."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from toolret.stages import ROOT

pytestmark = pytest.mark.integration


def _tool():
    spec = importlib.util.spec_from_file_location("record_code_change", ROOT / "tools" / "record_code_change.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dvc_finds_the_stage_current_after_the_recorded_change(tmp_path: Path) -> None:
    dvc = shutil.which("dvc")
    if dvc is None:
        pytest.skip("dvc not installed")
    run = lambda *cmd: subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, text=True)  # noqa: E731
    run("git", "init", "-q")
    run(dvc, "init", "-q")
    (tmp_path / "code.py").write_text("print('v1')\n")
    (tmp_path / "dvc.yaml").write_text("stages:\n  s:\n    cmd: python code.py > out.txt\n    deps: [code.py]\n"
                                       "    outs: [out.txt]\n")
    run(dvc, "repro", "-q")
    lock = (tmp_path / "dvc.lock").read_text()
    old = __import__("hashlib").md5(b"print('v1')\n").hexdigest()
    (tmp_path / "code.py").write_text("print('v1')  # a comment cannot alter out.txt\n")
    assert "changed deps" in run(dvc, "status").stdout
    new_bytes = (tmp_path / "code.py").read_bytes()
    text, n = _tool().record(lock, "code.py", old, __import__("hashlib").md5(new_bytes).hexdigest(), len(new_bytes))
    assert n == 1
    (tmp_path / "dvc.lock").write_text(text)
    assert "up to date" in run(dvc, "status").stdout
    # an entry recording another version is not touched
    assert _tool().record(lock, "code.py", "0" * 32, "1" * 32, 1) == (lock, 0)
