"""numpy's kernels are pinned wherever toolret builds an output (toolret.reproducibility).

The failure this guards against: on an AVX-512 machine, ``tests/test_committed_catalogs_rebuild.py``
rebuilt the BM25-filtered synthetic catalogs to other bytes than dvc.lock records (tied BM25 scores
ordered by another sort kernel); with the kernels pinned they rebuild to the locked bytes on both kinds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from toolret.reproducibility import ENV, NUMPY_DISABLED_CPU_FEATURES, numpy_dispatch_pinned, pin_numpy_dispatch

ROOT = Path(__file__).resolve().parents[1]


def test_the_makefile_pins_the_same_features_as_the_package() -> None:
    line = next(ln for ln in (ROOT / "Makefile").read_text().splitlines() if ln.startswith(f"export {ENV}"))
    assert re.split(r"\s*\??=\s*", line, maxsplit=1)[1].strip() == NUMPY_DISABLED_CPU_FEATURES


def test_importing_toolret_first_pins_numpy_in_a_process_without_the_variable() -> None:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    code = ("import toolret, numpy; from toolret.reproducibility import numpy_dispatch_pinned; "
            "print(numpy_dispatch_pinned())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_a_setting_of_the_user_is_kept() -> None:
    env = {ENV: "AVX512_SPR"}
    pin_numpy_dispatch(env)
    assert env == {ENV: "AVX512_SPR"}
    for unset in ({}, {ENV: ""}):
        pin_numpy_dispatch(unset)
        assert unset == {ENV: NUMPY_DISABLED_CPU_FEATURES}


def test_the_stage_environment_carries_the_pin(monkeypatch) -> None:
    from dagster_project.resources import stage_env

    monkeypatch.delenv(ENV, raising=False)
    assert stage_env()[ENV] == NUMPY_DISABLED_CPU_FEATURES


def test_this_test_process_runs_the_pinned_kernels() -> None:
    """`make test` exports the variable (and conftest imports toolret before numpy otherwise)."""
    assert numpy_dispatch_pinned()
