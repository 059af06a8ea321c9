"""toolret: tool retrieval methods on one platform (catalogs, retrievers, metrics, reports).

The public API (:mod:`toolret.api`): ``load_catalog``, ``Tool``, ``Catalog``, ``build``, ``evaluate``,
``compare``, ``EvalResult``, ``ToolSearcher`` / ``ToolHit``, ``adapt`` and ``ToolretError``; loaded on first use, so that
``import toolret`` stays light.
"""

from __future__ import annotations

from typing import Any

from toolret.reproducibility import pin_numeric_kernels

pin_numeric_kernels()  # before numpy / torch load: the same kernels, and bytes, on every x86-64 machine

__version__ = "0.1.0"

_API = ("Catalog", "EvalResult", "Tool", "ToolHit", "ToolSearcher", "ToolretError", "adapt", "build", "compare",
        "evaluate", "load_catalog")


def __getattr__(name: str) -> Any:
    if name in _API:
        # imported by name, not by an import statement: every DVC stage imports this package, and its code deps
        # (toolret.stages, from import statements) must not grow by the facade no stage runs
        import importlib

        return getattr(importlib.import_module("toolret.api"), name)
    raise AttributeError(f"module 'toolret' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])


__all__ = ["__version__", *_API]
