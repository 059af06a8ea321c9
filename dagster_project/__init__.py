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

defs = build_definitions()

__all__ = ["build_definitions", "defs"]
