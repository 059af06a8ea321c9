"""Issue 78 (8): looking up a registry URI where no MLflow store exists creates none (it used to create
``data/mlflow/mlflow.db`` inside the project, ~10 s of migrations) and is an error naming the store."""

from __future__ import annotations

import time

import pytest

from toolret.adapt import resolve_index
from toolret.errors import ToolretError


def test_no_store_is_created_by_a_lookup_named_by_the_environment(tmp_path, monkeypatch):
    (tmp_path / "mlflow").mkdir()
    db = tmp_path / "mlflow" / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    t0 = time.monotonic()
    with pytest.raises(ToolretError, match=rf"models:/adapt-missing@champion: no MLflow store at {db}"):
        resolve_index("models:/adapt-missing@champion")
    assert not db.exists() and time.monotonic() - t0 < 2


def test_no_store_is_created_in_the_project_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    with pytest.raises(ToolretError, match=r"no MLflow store at .*data/mlflow/mlflow.db"):
        resolve_index("models:/adapt-missing@champion")
    assert not (tmp_path / "data").exists()


def test_a_folder_is_returned_as_given():
    assert resolve_index("data/adapt/x/champion") == "data/adapt/x/champion"
