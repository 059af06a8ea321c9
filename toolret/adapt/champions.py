"""Champion and challenger of a catalog in the MLflow model registry (``adapt-<catalog>``).

The first ``toolret adapt`` of a catalog registers its model with the alias ``champion`` and writes it to
``<out>/champion``; while a champion exists, a later adapt registers its model as the ``challenger`` and
writes it to ``<out>/challenger`` (the champion's folder is left alone: gateways keep serving it).
:func:`toolret.adapt.promotion.promote` decides whether the challenger becomes the champion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolret.paths import project_dir
from toolret.tracking import get_client

CHAMPION, CHALLENGER, PREVIOUS = "champion", "challenger", "previous"


def model_name(catalog: str) -> str:
    """The registered model of a catalog's adapted retrievers."""
    return f"adapt-{catalog}"


def alias_version(client: Any, model: str, alias: str) -> Any | None:
    """The model version ``alias`` names, or ``None`` (no such model or alias)."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(model, alias)
    except MlflowException:
        return None


def role_for(client: Any, catalog: str) -> str:
    """What a new adapt of ``catalog`` becomes: ``challenger`` where a champion is registered, else
    ``champion``."""
    return CHALLENGER if alias_version(client, model_name(catalog), CHAMPION) is not None else CHAMPION


def served_identity(folder: str | Path, alias: str, tracking_uri: str | None = None) -> str:
    """How receipts name the model served from ``folder`` as ``alias``: ``adapt-<catalog>/<version>`` where
    the registry's ``alias`` of the catalog (``pipeline.json``'s) is that folder, else the folder itself."""
    folder = Path(folder)
    try:
        name = (json.loads((folder / "pipeline.json").read_text(encoding="utf-8")).get("catalog") or {}).get("name")
        mv = alias_version(get_client(tracking_uri), model_name(name), alias) if name else None
    except Exception:  # noqa: BLE001 - no registry here: the folder names it
        mv = None
    if mv is not None:
        source = Path(mv.source)
        if (source if source.is_absolute() else project_dir() / source).resolve() == folder.resolve():
            return f"{model_name(name)}/{mv.version}"
    return str(folder)


__all__ = ["CHALLENGER", "CHAMPION", "PREVIOUS", "alias_version", "model_name", "role_for", "served_identity"]
