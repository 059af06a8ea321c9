"""Metric names as MLflow accepts them (MLflow forbids ``@`` in metric keys)."""

from __future__ import annotations

import re

_MLFLOW_ALLOWED = re.compile(r"^[A-Za-z0-9_\-. /]+$")


def metric_name_for_mlflow(name: str) -> str:
    """Turn a metric name into a valid MLflow metric key.

    ``@`` becomes ``_at_``: ``'recall@5' -> 'recall_at_5'``, ``'mrr' -> 'mrr'``.

    Args:
        name: a metric name such as ``'ndcg@10'``.

    Returns:
        The MLflow-safe key.

    Raises:
        ValueError: if the name is empty or, after the replacement, still holds characters
            MLflow rejects (anything but alphanumerics, ``_ - . /`` and space).
    """
    key = name.replace("@", "_at_")
    if not key or not _MLFLOW_ALLOWED.match(key):
        raise ValueError(f"metric name {name!r} cannot be made into an MLflow key")
    return key


def metric_name_from_mlflow(key: str) -> str:
    """Inverse of :func:`metric_name_for_mlflow` for ``<name>_at_<k>`` keys.

    Args:
        key: an MLflow key such as ``'recall_at_5'``.

    Returns:
        The metric name, e.g. ``'recall@5'``; keys without a trailing ``_at_<int>`` are
        returned unchanged.
    """
    m = re.match(r"^(.*)_at_(\d+)$", key)
    return f"{m.group(1)}@{m.group(2)}" if m else key
