"""JSONL artifacts with a ``.meta.json`` sidecar (Re-Invoke generations, QTA preferences and rewrites, any
rewriter's stored outputs: :func:`write_rewrites`).

``<name>.jsonl`` holds one record per line; ``<name>.meta.json`` says what made it (config, model, prompt
versions, counts). Both are written atomically. A meta's ``run_info`` (timings, cache hits) is not part of
the artifact: it goes to the untracked run-info sidecar, so the artifact's md5 depends only on what made it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolret.atomic import atomic_path, write_json
from toolret.errors import CatalogError
from toolret.evaluation import run_info_path


def meta_path(path: str | Path) -> Path:
    """``x.jsonl`` → ``x.meta.json``."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")


def write_jsonl(path: str | Path, records: Sequence[dict[str, Any]], meta: dict[str, Any] | None = None) -> Path:
    """``records`` (and ``meta``, less its ``run_info``) atomically; ``run_info`` to the run-info sidecar."""

    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    if meta is not None:
        meta = dict(meta)
        info = meta.pop("run_info", None)
        if info is not None:
            write_json(run_info_path(meta_path(path)), info)
        write_json(meta_path(path), meta)
    return path


def read_jsonl(path: str | Path, missing: str = "artifact not found") -> list[dict[str, Any]]:
    """The records of ``path``; a missing file or a line that is not a JSON object is a ``CatalogError``
    naming the file (and the line)."""
    path = Path(path)
    if not path.is_file():
        raise CatalogError(f"{path}: {missing}")
    records = []
    # "\n" only: str.splitlines() would also split at U+2028 / U+2029 / NEL, kept raw inside JSON strings
    # written with ensure_ascii=False (ToolBench documents hold some)
    for i, line in enumerate(path.read_text(encoding="utf-8").split("\n")):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise CatalogError(f"{path}: line {i + 1} is not JSON ({e})") from None
        if not isinstance(record, dict):
            raise CatalogError(f"{path}: line {i + 1} is not a JSON object")
        records.append(record)
    return records


def write_rewrites(rewriter: Any, catalog: Any, split: str, out: str | Path) -> dict[str, Any]:
    """Rewrite every judged query of ``split`` and store the outputs in ``out`` (JSONL + meta; ``toolret
    rewrite``): ``write_artifact(catalog, split, out)`` where the rewriter defines it (see
    :class:`toolret.roles.QueryRewriter`), else one ``{query_id, text, rewrites}`` row per query. Returns the meta."""
    write_artifact = getattr(rewriter, "write_artifact", None)
    if write_artifact is not None:
        return write_artifact(catalog, split, out)
    queries = [q for q in catalog.split(split) if catalog.gold(q.id)]
    rewrites = rewriter.rewrite([q.text for q in queries])
    rows = [{"query_id": q.id, "text": q.text, "rewrites": list(r)} for q, r in zip(queries, rewrites)]
    meta = {"kind": "rewrites", "component": rewriter.name, "dataset": catalog.name, "split": split,
            "counts": {"n": len(rows)}}
    write_jsonl(out, rows, meta)
    return meta
