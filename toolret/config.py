"""Project paths and ``params.yaml``: the one parameter file shared by DVC, Dagster, MLflow and the CLI."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def project_dir() -> Path:
    """The project root: ``$TOOLRET_PROJECT_DIR``, else the current directory if it holds a
    ``params.yaml``, else the repository this package lives in."""
    env = os.environ.get("TOOLRET_PROJECT_DIR")
    if env:
        return Path(env).resolve()
    cwd = Path.cwd()
    return cwd if (cwd / "params.yaml").is_file() else PACKAGE_ROOT


def load_params(path: str | Path | None = None) -> dict[str, Any]:
    """Read ``params.yaml`` (default: the project's); empty dict if absent."""
    import yaml

    path = Path(path) if path else project_dir() / "params.yaml"
    if not path.is_file():
        return {}
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def data_dir() -> Path:
    return project_dir() / "data"
