"""Numeric code paths pinned so that an output is the same bytes on every x86-64 machine.

numpy dispatches its sorts and partitions to AVX-512 kernels (x86-simd-sort) where the CPU has them, and
those order *tied* values differently from the AVX2 kernels. BM25 scores tie often (short tool documents,
repeated terms), so the top-k that ``bm25s`` selects with ``np.argpartition`` -- and everything decided
from it: the BM25-filtered synthetic training catalogs, their rerankers, every BM25 ranking -- depended on
the machine: an AVX-512 box rebuilt ``synthesize@toolbench-synthetic-filtered`` to other bytes than
``dvc.lock`` records (``tests/test_committed_catalogs_rebuild.py``), and the outputs flipped with the
machine a session ran on. Disabling numpy's AVX-512 dispatch targets (``NPY_DISABLE_CPU_FEATURES``; read once,
when numpy is imported) makes every x86-64 machine with AVX2 take the same kernels. The Makefile exports the
variable for every command it runs, the orchestration passes it to each stage (``dagster_project.resources.
stage_env``), and ``import toolret`` sets it where numpy is not imported yet (the ``toolret`` command).
Names a machine does not know (an ARM machine) are ignored by numpy.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

ENV = "NPY_DISABLE_CPU_FEATURES"
NUMPY_DISABLED_CPU_FEATURES = "X86_V4 AVX512_ICL AVX512_SPR"


def pin_numpy_dispatch(environ: MutableMapping[str, str] | None = None) -> None:
    """Set :data:`ENV` in ``environ`` where it is unset or empty (default: this process, effective if numpy
    is not imported yet); a value someone set is kept."""
    environ = os.environ if environ is None else environ
    if not environ.get(ENV, "").strip():
        environ[ENV] = NUMPY_DISABLED_CPU_FEATURES


def numpy_dispatch_pinned() -> bool:
    """``True`` if this process's numpy runs none of the dispatch targets :data:`NUMPY_DISABLED_CPU_FEATURES`
    names (also where the CPU lacks them)."""
    from numpy._core._multiarray_umath import __cpu_features__ as features

    return not any(features.get(name, False) for name in NUMPY_DISABLED_CPU_FEATURES.split())


__all__ = ["ENV", "NUMPY_DISABLED_CPU_FEATURES", "numpy_dispatch_pinned", "pin_numpy_dispatch"]
