"""Orchestration test fixtures.

The session fixture ``pipeline`` builds one small DVC project from the real ``dvc.yaml`` (the
fixture catalog as a ``source.beir`` dataset, BM25 only to stay fast) and materializes every asset
once, in process; the tests then read its artifacts, ``dvc.lock``, asset-check results and MLflow
store. Tests that need other graphs write their own ``dvc.yaml`` with ``make_dvc_project``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from orch_helpers import fixture_dvc_yaml, fixture_params, make_dvc_project, make_instance  # noqa: E402


@dataclass
class Pipeline:
    project: Path
    source: Path
    dagster_home: Path
    instance: Any
    defs: Any
    result: Any
    seconds: float


@pytest.fixture(scope="session")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    """The fixture project, every asset materialized once (``toolret_all``, in process)."""
    from make_fixture import write_fixture_catalog

    from dagster_project.definitions import ALL_JOB, build_definitions

    base = tmp_path_factory.mktemp("pipeline")
    source = write_fixture_catalog(base / "sources" / "fixture", n_tools=30, n_train=40, n_test=20, seed=0)
    params = fixture_params(source, methods=["bm25"], finetune=False)
    project = make_dvc_project(base / "project", fixture_dvc_yaml(params), params)
    saved = os.environ.pop("MLFLOW_TRACKING_URI", None)
    instance = make_instance(base / "dagster_home")
    defs = build_definitions(project)
    start = time.perf_counter()
    try:
        result = defs.resolve_job_def(ALL_JOB).execute_in_process(instance=instance, raise_on_error=False)
    finally:
        if saved is not None:
            os.environ["MLFLOW_TRACKING_URI"] = saved
    return Pipeline(project, source, base / "dagster_home", instance, defs, result, time.perf_counter() - start)
