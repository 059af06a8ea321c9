"""MLflow tracking of evaluation runs and comparison reports (provenance helpers: :mod:`toolret.provenance`).

No Dagster import anywhere in this package; MLflow and matplotlib are imported inside functions.
Logging is idempotent (same inputs -> the same run); trained models under ``data/models/`` are
registered in the MLflow model registry by their DVC md5 (:mod:`toolret.tracking.model_registry`).

Typical use::

    from toolret.tracking import log_evaluation_run, log_comparison_report
    run_id = log_evaluation_run("data/runs/toollens/bm25/original.json", None, tags={"dagster.run_id": rid})
    report = log_comparison_report("toollens", ["data/runs/toollens/bm25/original.json", ...])

The names below are loaded on first use, so that ``import toolret.tracking`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "compare_results": "comparison",
    "log_comparison_report": "comparison",
    "order_metrics": "comparison",
    "find_result_files": "runs",
    "is_evaluation_result": "runs",
    "load_per_query": "runs",
    "load_result": "runs",
    "log_evaluation_run": "runs",
    "per_query_path_for": "runs",
    "register_models": "model_registry",
    "log_reproduction_matrix": "reproduction",
    "registered_model_name": "model_registry",
    "default_tracking_uri": "store",
    "get_client": "store",
    "get_or_create_experiment": "store",
    "model_version_url": "store",
    "run_url": "store",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = sorted(_EXPORTS)
