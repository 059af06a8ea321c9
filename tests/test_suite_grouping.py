"""The suite's own scheduling (tests/conftest.py): under ``make test``'s ``-n 2 --dist loadgroup`` the tests of a
module with a module-scoped fixture run on ONE worker, so that fixture (an adapted catalogue, a trained model) is
built once, not once per worker. pytest-xdist 3.8 silently stopped grouping on pytest 9.2 (every module fixture
was built twice): this test runs the real pytest + xdist of the venv on a throwaway module and reads which worker
ran each test; the worker-spread module beside it shows that two workers were there to spread over."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # starts a pytest with two xdist workers (~5 s)

TESTS = Path(__file__).resolve().parent

MODULE = r'''
import os, time
import pytest

@pytest.fixture(scope="module")
def built():
    return os.environ["PYTEST_XDIST_WORKER"]

@pytest.mark.parametrize("i", range(6))
def test_uses_the_module_fixture(built, i):
    time.sleep(0.2)
    with open(os.environ["RAN_LOG"], "a") as f:
        f.write(f"grouped {os.environ['PYTEST_XDIST_WORKER']} {built}\n")
'''

SPREAD = r'''
import os, time
import pytest

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    time.sleep(0.3)
    with open(os.environ["RAN_LOG"], "a") as f:
        f.write(f"free {os.environ['PYTEST_XDIST_WORKER']}\n")
'''


def test_a_module_with_a_module_fixture_runs_on_one_worker(tmp_path: Path) -> None:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "fixtures").mkdir()
    shutil.copy(TESTS / "fixtures" / "make_fixture.py", tmp_path / "fixtures")  # what the suite's conftest imports
    (tmp_path / "test_grouped.py").write_text(MODULE)
    (tmp_path / "test_spread.py").write_text(SPREAD)
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                          "-q", "--rootdir", str(tmp_path), str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))},
                              "RAN_LOG": str(tmp_path / "ran.log")})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ran = [line.split() for line in (tmp_path / "ran.log").read_text().splitlines()]
    grouped = {tuple(r[1:]) for r in ran if r[0] == "grouped"}
    assert len([r for r in ran if r[0] == "grouped"]) == 6
    assert len(grouped) == 1, f"the module fixture's tests ran on several workers: {sorted(grouped)}"
    assert len({r[1] for r in ran if r[0] == "free"} | {w for w, _ in grouped}) == 2, "only one worker ran anything"
