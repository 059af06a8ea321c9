"""Where runs go: the project's local MLflow store (sqlite + artifact folder) unless told otherwise."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

_KEY_BAD = re.compile(r"[^A-Za-z0-9_\-. /:]")


def default_tracking_uri(project_dir: str | Path | None = None) -> str:
    """``$MLFLOW_TRACKING_URI`` or ``sqlite:///<project>/data/mlflow/mlflow.db`` (folder created)."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    root = Path(project_dir) if project_dir else Path(__file__).resolve().parents[2]
    folder = root.resolve() / "data" / "mlflow"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


def local_artifact_root(tracking_uri: str) -> str | None:
    """``<db folder>/artifacts`` as a file URI for a local sqlite store, else ``None`` (server decides)."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///"):])
        if not db.is_absolute():
            db = Path.cwd() / db
        folder = db.parent / "artifacts"
        folder.mkdir(parents=True, exist_ok=True)
        return folder.resolve().as_uri()
    return None


def get_client(tracking_uri: str | None = None, project_dir: str | Path | None = None) -> Any:
    """An :class:`mlflow.MlflowClient` for ``tracking_uri`` (default: :func:`default_tracking_uri`)."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri or default_tracking_uri(project_dir))


def get_or_create_experiment(client: Any, name: str) -> str:
    """The id of experiment ``name``, created (with the project's artifact folder) when missing."""
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(name, artifact_location=local_artifact_root(client.tracking_uri))
    except Exception:  # created concurrently
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def safe_key(key: str) -> str:
    """A param/tag key MLflow accepts (``@`` -> ``_at_``, other odd characters -> ``_``)."""
    return _KEY_BAD.sub("_", key.replace("@", "_at_"))[:250]


def flatten(obj: Any, prefix: str = "") -> dict[str, str]:
    """Nested dicts -> ``{"a.b": "value"}`` with string values (lists JSON-encoded, 500 chars max)."""
    import json

    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    else:
        text = obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True, default=str)
        out[prefix or "value"] = text[:500]
    return out
