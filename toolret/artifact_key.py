"""What a trained artifact was made from, recorded in it and checked before it is used.

Every trained artifact folder (dense-ft, the ToolRerank reranker, COLT's model, QTA's adapters) holds
``artifact_key.json``::

    {"kind", "config" (the training settings of its config section), "train_data_md5",
     "base_model", "first_stage" (fingerprint of the retriever that mined or fed its data, or null)}

``fit`` computes the key the current params and data would give and compares: equal -> the artifact is
reused; different -> a :class:`StaleArtifactError` naming every field that differs and how to retrain.
An artifact is never silently reused after its inputs changed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from toolret.errors import CatalogError
from toolret.errors import StaleArtifactError

KEY_FILE = "artifact_key.json"


def fingerprint(obj: Any) -> str:
    """md5 of the canonical JSON of ``obj`` (training data, a config)."""
    return hashlib.md5(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                                  default=str).encode("utf-8")).hexdigest()


def make_key(kind: str, config: dict[str, Any], train_data: Any, base_model: str,
             first_stage: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "config": config, "train_data_md5": fingerprint(train_data), "base_model": base_model,
            "first_stage": first_stage}


def write_key(folder: str | Path, key: dict[str, Any]) -> None:
    (Path(folder) / KEY_FILE).write_text(json.dumps(key, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def read_key(folder: str | Path) -> dict[str, Any] | None:
    path = Path(folder) / KEY_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def differences(recorded: dict[str, Any] | None, expected: dict[str, Any]) -> list[str]:
    """Human-readable differences (``config.lr: 0.0002 -> 0.0001``); empty when the key matches."""
    if recorded is None:
        return [f"no {KEY_FILE} (made before artifacts recorded their inputs)"]
    out = []
    for field in sorted(set(recorded) | set(expected)):
        old, new = recorded.get(field), expected.get(field)
        if field == "config" and isinstance(old, dict) and isinstance(new, dict):
            out += [f"config.{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new))
                    if old.get(k) != new.get(k)]
        elif old != new:
            out.append(f"{field}: {old!r} -> {new!r}" if field != "train_data_md5" else
                       "train_data_md5: the training data changed")
    return out


def require_current(folder: str | Path, expected: dict[str, Any], retrain: str) -> None:
    """Raise :class:`StaleArtifactError` unless ``folder``'s key equals ``expected``; ``retrain`` says how."""
    diff = differences(read_key(folder), expected)
    if diff:
        raise StaleArtifactError(f"{folder}: this {expected['kind']} artifact was trained on other inputs "
                                 f"({'; '.join(diff)}); it is not reused. Retrain it: {retrain}")
