"""Lineage of a DVC output from ``dvc.lock``: which stage wrote it, what it read, the params it declared.

Reporting code only (MLflow runs, the model registry); kept out of :mod:`toolret.provenance`,
which the DVC stages themselves import (so editing this module does not make every stage stale).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolret.provenance import lock_entries
from toolret.tracking.store import digest, safe_key


def _under(path: str, root: str) -> bool:
    path, root = path.rstrip("/"), root.rstrip("/")
    return path == root or path.startswith(root + "/")


def producing_stage(path: str | Path, lock: dict[str, Any], project_dir: str | Path | None = None) -> str | None:
    """The ``dvc.lock`` stage whose output is ``path`` or holds it (longest matching out); ``None`` if none.

    ``path`` is relative to the project, or absolute under ``project_dir``.
    """
    p = Path(path)
    if p.is_absolute():
        if project_dir is None:
            return None
        try:
            p = p.resolve().relative_to(Path(project_dir).resolve())
        except ValueError:
            return None
    rel = p.as_posix()
    best: tuple[int, str] | None = None
    for stage, entry in lock_entries(lock, "outs"):
        epath = str(entry["path"]).rstrip("/")
        if _under(rel, epath) and (best is None or len(epath) > best[0]):
            best = (len(epath), stage)
    return best[1] if best else None


def upstream_stages(stage: str, lock: dict[str, Any], stop: Any = None) -> list[str]:
    """The stages whose outputs ``stage`` reads, transitively, nearest first (``stage`` excluded).

    Args:
        stage: a ``dvc.lock`` stage name.
        lock: the parsed ``dvc.lock``.
        stop: optional predicate on a stage's out paths (``list[str] -> bool``): a stage for which it is
            true is neither listed nor walked through (e.g. the dataset-preparation stages).
    """
    stages = lock.get("stages") or {}
    seen: list[str] = []
    frontier = [stage]
    while frontier:
        nxt: list[str] = []
        for name in frontier:
            for dep in (stages.get(name) or {}).get("deps") or []:
                if not isinstance(dep, dict) or "path" not in dep:
                    continue
                producer = producing_stage(str(dep["path"]), lock)
                if not producer or producer == stage or producer in seen:
                    continue
                outs = [str(o["path"]) for o in (stages.get(producer) or {}).get("outs") or [] if isinstance(o, dict)]
                if stop is not None and stop(outs):
                    continue
                seen.append(producer)
                nxt.append(producer)
        frontier = nxt
    return seen


def stage_params(stage: str, lock: dict[str, Any]) -> dict[str, Any]:
    """The params values ``dvc.lock`` recorded for a stage, merged over its params files.

    ``{"bm25": {"k1": 1.2}, "dense.model": "m"}``: sections as declared (a whole section or a dotted key).
    """
    body = (lock.get("stages") or {}).get(stage) or {}
    out: dict[str, Any] = {}
    for values in (body.get("params") or {}).values():
        if isinstance(values, dict):
            out.update(values)
    return out


def stage_md5s(stage: str, lock: dict[str, Any]) -> dict[str, str]:
    """``{path: md5}`` of the deps and outs ``dvc.lock`` records for ``stage``."""
    body = (lock.get("stages") or {}).get(stage) or {}
    return {str(e["path"]): str(e["md5"]) for e in [*(body.get("deps") or []), *(body.get("outs") or [])]
            if isinstance(e, dict) and e.get("md5")}


def version_tags(versions: dict[str, str]) -> dict[str, str]:
    """The run tags of a stage's md5s: ``dvc.md5.<path>`` per data dep/out, one digest ``dvc.md5.code`` of the
    source-file deps (dozens of them; every md5 is in the run's ``result/dvc_versions.json``)."""
    tags, code = {}, {}
    for path, md5 in versions.items():
        if path.startswith("data/") or Path(path).is_absolute():
            tags[safe_key(f"dvc.md5.{path}")] = md5
        else:
            code[path] = md5
    if code:
        tags["dvc.md5.code"] = digest(code)
    return tags


__all__ = ["producing_stage", "stage_md5s", "stage_params", "upstream_stages", "version_tags"]
