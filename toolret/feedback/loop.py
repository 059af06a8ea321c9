"""Retraining that follows traffic: when enough new feedback arrived, and whether a promoted champion held up.

``feedback_loop.yaml`` at the project root (or the file ``$TOOLRET_FEEDBACK_LOOP`` names) lists, per user
catalog, the gateway receipt logs that serve it and how many new (query, called tool) pairs ask for a
re-adapt::

    shop:
      receipts: [logs/gateway-shop.jsonl]   # relative to the project
      new_pairs: 200                        # default 200

Dagster reads it (``dagster_project.adapt_assets``: one sensor per catalog); the counting is here, the
asset check's comparison is :func:`toolret.adapt.promotion.champion_held_up`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from toolret.errors import ToolretError
from toolret.feedback.clicks import read_clicks
from toolret.gateway.receipts import log_files

LOOP_FILE = "feedback_loop.yaml"
DEFAULT_NEW_PAIRS = 200


@dataclass(frozen=True)
class LoopConfig:
    catalog: str
    receipts: tuple[Path, ...]
    new_pairs: int = DEFAULT_NEW_PAIRS


def loop_file(project_dir: str | Path) -> Path:
    return Path(os.environ.get("TOOLRET_FEEDBACK_LOOP") or Path(project_dir) / LOOP_FILE)


def load_loop_config(project_dir: str | Path) -> dict[str, LoopConfig]:
    """The catalogs of the feedback-loop file (``{}`` where there is none).

    Raises:
        ToolretError: a malformed file, naming it and the key.
    """
    import yaml

    path = loop_file(project_dir)
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ToolretError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(data, dict):
        raise ToolretError(f"{path}: expected a mapping of catalog -> {{receipts, new_pairs}}")
    out = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or set(entry) - {"receipts", "new_pairs"}:
            raise ToolretError(f"{path}: {name}: a mapping with receipts and new_pairs only")
        logs = entry.get("receipts")
        logs = [logs] if isinstance(logs, str) else logs
        if not logs or not isinstance(logs, list) or not all(isinstance(r, str) for r in logs):
            raise ToolretError(f"{path}: {name}.receipts: a receipt log path or a list of them")
        n = entry.get("new_pairs", DEFAULT_NEW_PAIRS)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ToolretError(f"{path}: {name}.new_pairs: a positive integer, got {n!r}")
        out[str(name)] = LoopConfig(str(name), tuple(Path(r) if Path(r).is_absolute() else Path(project_dir) / r
                                                     for r in logs), n)
    return out


def count_pairs(logs: list[str | Path] | tuple[Path, ...]) -> int:
    """The (search, called tool) pairs -- clicks -- the receipt logs hold so far (logs not written yet: 0)."""
    present = [log for log in logs if log_files(log)]
    return len(read_clicks(present)[0]) if present else 0


def retrain_due(pairs: int, cursor: int, new_pairs: int) -> bool:
    """Whether ``pairs - cursor`` (new since the last request) reached ``new_pairs``."""
    return pairs - cursor >= new_pairs


__all__ = ["DEFAULT_NEW_PAIRS", "LOOP_FILE", "LoopConfig", "count_pairs", "load_loop_config",
           "loop_file", "retrain_due"]
