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

Floats have the same trouble: torch picks MKL, oneDNN and its own kernels for the CPU it runs on, and an
AVX-512 machine encodes a document to vectors that differ from an AVX2 machine's in the last bits (97% of
all-MiniLM-L6-v2's values, up to 2e-7), so every dense index and the evaluations under it were other bytes on
another machine, and a fresh clone's ``make run`` rewrote ``dvc.lock``. MKL's conditional numerical
reproducibility (``MKL_CBWR=AVX2,STRICT``: the AVX2 code path, results independent of the thread count; checked
with 1, 2 and 4 threads), ATen's and oneDNN's ISA caps and OpenBLAS's core type pin each to its AVX2 kernels
(:data:`PINNED`), which every x86-64 machine of the last decade runs.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

ENV = "NPY_DISABLE_CPU_FEATURES"
NUMPY_DISABLED_CPU_FEATURES = "X86_V4 AVX512_ICL AVX512_SPR"
# every numeric library's kernel choice, pinned to its AVX2 code path (read once, when the library loads):
PINNED = {
    ENV: NUMPY_DISABLED_CPU_FEATURES,  # numpy's sorts and partitions (tied BM25 scores)
    "MKL_CBWR": "AVX2,STRICT",  # torch's MKL GEMMs (every encoder): MKL's conditional numerical reproducibility
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's own vectorised kernels
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # torch's oneDNN primitives
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS (matrix products of vectors)
}


def pin_numeric_kernels(environ: MutableMapping[str, str] | None = None) -> None:
    """Set each :data:`PINNED` variable in ``environ`` where it is unset or empty (default: this process,
    effective for a library not loaded yet); a value someone set is kept."""
    environ = os.environ if environ is None else environ
    for name, value in PINNED.items():
        if not environ.get(name, "").strip():
            environ[name] = value


def kernel_pins() -> dict[str, str | None]:
    """This process's value of each :data:`PINNED` variable (``None``: unset): what its vectors were made under."""
    return {name: os.environ.get(name) for name in PINNED}


def numpy_dispatch_pinned() -> bool:
    """``True`` if this process's numpy runs none of the dispatch targets :data:`NUMPY_DISABLED_CPU_FEATURES`
    names (also where the CPU lacks them)."""
    from numpy._core._multiarray_umath import __cpu_features__ as features

    return not any(features.get(name, False) for name in NUMPY_DISABLED_CPU_FEATURES.split())


__all__ = ["ENV", "NUMPY_DISABLED_CPU_FEATURES", "PINNED", "kernel_pins", "numpy_dispatch_pinned", "pin_numeric_kernels"]
