"""Dagster code location of toolret: ``dagster dev -m dagster_project``.

Assets, checks, schedules and sensors are built from ``dvc.yaml`` in ``$TOOLRET_PROJECT_DIR``
(default: this repository). See :mod:`dagster_project.dvc_assets`.
"""

from __future__ import annotations

import os

for _k, _v in {"DVC_NO_ANALYTICS": "1", "MLFLOW_DISABLE_TELEMETRY": "true", "GX_ANALYTICS_ENABLED": "false",
               "DAGSTER_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}.items():
    os.environ.setdefault(_k, _v)

from dagster_project.definitions import build_definitions  # noqa: E402


def __getattr__(name: str):
    """``defs``, built on first use (PEP 562): Dagster's module discovery reads it (``dir`` + ``getattr``); a
    process that imports a submodule (a test, a stage helper) does not build the whole graph (~4 s)."""
    if name == "defs":
        value = globals()["defs"] = build_definitions()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "defs"})


__all__ = ["build_definitions", "defs"]
