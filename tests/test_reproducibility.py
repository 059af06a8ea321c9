"""Numeric kernels are pinned wherever toolret builds an output (toolret.reproducibility).

The failures this guards against: on an AVX-512 machine, ``tests/test_committed_catalogs_rebuild.py``
rebuilt the BM25-filtered synthetic catalogs to other bytes than dvc.lock records (tied BM25 scores
ordered by another sort kernel); and a fresh clone's ``make run`` on another machine rewrote the dense
indexes' and their evaluations' hashes in dvc.lock (torch's AVX-512 GEMMs round otherwise than its AVX2 ones).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from toolret.reproducibility import ENV, NUMPY_DISABLED_CPU_FEATURES, PINNED, numpy_dispatch_pinned, pin_numeric_kernels

ROOT = Path(__file__).resolve().parents[1]


def test_the_makefile_pins_the_same_values_as_the_package() -> None:
    exported = {}
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("export ") and line.split()[1] in PINNED:
            exported[line.split()[1]] = re.split(r"\s*\??=\s*", line, maxsplit=1)[1].strip()
    assert exported == PINNED


def test_importing_toolret_first_pins_numpy_in_a_process_without_the_variable() -> None:
    env = {k: v for k, v in os.environ.items() if k not in PINNED}
    code = ("import os, toolret, numpy; from toolret.reproducibility import numpy_dispatch_pinned; "
            "print(numpy_dispatch_pinned(), os.environ['MKL_CBWR'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", PINNED["MKL_CBWR"]]


def test_a_setting_of_the_user_is_kept() -> None:
    env = {ENV: "AVX512_SPR", "MKL_CBWR": "AUTO"}
    pin_numeric_kernels(env)
    assert env == {**PINNED, ENV: "AVX512_SPR", "MKL_CBWR": "AUTO"}
    for unset in ({}, {ENV: ""}):
        pin_numeric_kernels(unset)
        assert unset == PINNED and unset[ENV] == NUMPY_DISABLED_CPU_FEATURES


def test_the_stage_environment_carries_the_pins(monkeypatch) -> None:
    from dagster_project.resources import stage_env

    for name in PINNED:
        monkeypatch.delenv(name, raising=False)
    assert {k: stage_env()[k] for k in PINNED} == PINNED


def test_this_test_process_runs_the_pinned_kernels() -> None:
    """`make test` exports the variables (and conftest imports toolret before numpy otherwise)."""
    assert numpy_dispatch_pinned()
    assert all(os.environ.get(k) == v for k, v in PINNED.items())


ENCODE = ("import hashlib, sys, toolret; from toolret.retrieval.models import load_sentence_transformer; "
          "m = load_sentence_transformer('all-MiniLM-L6-v2'); texts = [f'get the weather in city {i} and convert "
          "{i * 7} euros' for i in range(96)]; e = m.encode(texts, batch_size=32, convert_to_numpy=True, "
          "normalize_embeddings=True); print(hashlib.md5(e.tobytes()).hexdigest())")


def _encoded(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in PINNED and k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", ENCODE], env={**base, **env}, capture_output=True, text=True,
                          check=True)
    return done.stdout.split()[-1]


def test_pinned_encodings_are_the_same_bytes_whatever_the_thread_count() -> None:
    """The vectors under the pins do not depend on the thread count (MKL's strict reproducibility mode), and a
    process that imports toolret runs the pinned kernels: the same bytes as the pins spelled out in its
    environment (on an AVX-512 machine an unpinned run differs in 97% of the values)."""
    one, two = _encoded(OMP_NUM_THREADS="1"), _encoded(OMP_NUM_THREADS="2")
    assert one == two
    # the same pins spelled out in the child's environment (no toolret default involved) agree
    assert _encoded(OMP_NUM_THREADS="2", **PINNED) == one
    assert re.fullmatch(r"[0-9a-f]{32}", one)  # a digest came back
