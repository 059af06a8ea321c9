"""Committed tool vectors: each tool's mean expanded-copy embedding, so a fresh clone encodes no copy.

With ``aggregation: mean`` a tool's score is the query's inner product with the mean of its copies'
L2-normalised embeddings (:mod:`expansion`), so the index needs one vector per tool, not the copies.
Encoding the copies is the slow part of Re-Invoke on a new machine (ToolBench at n = 10: 24,790 copies,
~17 min of MiniLM on 2 CPU cores); the mean vectors of its 2,479 tools are 3.8 MB of float32.

Content-addressed: a tool's key is the sha256 of its copy texts (document + synthetic queries, in order,
after expansion), and a file holds the vectors of one encoder fingerprint
(:func:`toolret.retrieval.embedding_store.encoder_fingerprint`). A lookup therefore hits only where the
same encoder would see exactly the same copies: any catalog sharing the tools (the six ToolBench groups
share one corpus) reads them, and a changed document, query, ``n_queries`` or ``expansion`` misses and
is encoded. Files: ``<root>/<name>.npz`` with ``keys``, ``vectors`` (float32), ``tool_ids`` and
``meta`` (JSON: fingerprint, encoder, dataset, settings). Written atomically by
``toolret reinvoke-tool-vectors`` (a DVC stage, output kept in git); read-only at index time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.atomic import atomic_path
from toolret.errors import CatalogError
from toolret.registry import BuildContext, build_component


def tool_key(copies: Sequence[str]) -> str:
    """The key of one tool's vector: sha256 of its copy texts in order (record-separator joined)."""
    return hashlib.sha256("\x1e".join(copies).encode("utf-8")).hexdigest()


def copy_groups(texts: Sequence[str], owner: np.ndarray, n_tools: int) -> list[list[str]]:
    """Each tool's copy texts, in copy order."""
    groups: list[list[str]] = [[] for _ in range(n_tools)]
    for text, t in zip(texts, owner.tolist()):
        groups[t].append(text)
    return groups


def read_vector_file(path: Path) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """``(meta, keys, vectors)`` of one file; a file that does not read is an error naming it."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            keys, vectors = z["keys"], z["vectors"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise CatalogError(f"tool-vector file {path} does not read: {exc}") from exc
    if vectors.ndim != 2 or len(keys) != len(vectors):
        raise CatalogError(f"tool-vector file {path}: {len(keys)} keys for vectors of shape {vectors.shape}")
    return meta, keys, vectors


class ToolVectors:
    """The committed tool vectors of one encoder fingerprint (every ``*.npz`` under ``root`` made by it)."""

    def __init__(self, root: str | Path, fingerprint: str) -> None:
        self.root = Path(root)
        self.fingerprint = fingerprint
        self.files: list[str] = []
        self._vectors: dict[str, np.ndarray] = {}
        for path in sorted(self.root.glob("*.npz")) if self.root.is_dir() else ():
            meta, keys, vectors = read_vector_file(path)
            if meta.get("fingerprint") != fingerprint:
                continue  # another encoder's vectors
            self.files.append(path.name)
            for k, v in zip(keys.tolist(), vectors):
                self._vectors.setdefault(k, v)

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, groups: Sequence[Sequence[str]]) -> dict[int, np.ndarray]:
        """``{tool position: mean vector}`` for the tools (given by their copy texts) that have one."""
        out = {}
        for t, copies in enumerate(groups):
            v = self._vectors.get(tool_key(copies))
            if v is not None:
                out[t] = v
        return out


def write_vector_file(path: str | Path, fingerprint: str, tool_ids: Sequence[str], groups: Sequence[Sequence[str]],
                      vectors: np.ndarray, meta: dict[str, Any] | None = None) -> Path:
    """Write one tool-vector file atomically (rows: ``tool_ids`` / ``groups`` / ``vectors`` aligned)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if not (len(tool_ids) == len(groups) == len(vectors)):
        raise ValueError(f"{len(tool_ids)} tools, {len(groups)} copy groups, {len(vectors)} vectors")
    path = Path(path)
    full = {"fingerprint": fingerprint, "n_tools": len(tool_ids), **(meta or {})}
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, keys=np.array([tool_key(g) for g in groups]), vectors=vectors,
                     tool_ids=np.array(list(tool_ids)), meta=np.array(json.dumps(full, sort_keys=True)))
    return path


def tool_vectors_command(args: argparse.Namespace, params, catalog) -> None:
    """``toolret reinvoke-tool-vectors``: every tool's mean copy vector (original documents) into ``--out``."""

    index = build_component("reinvoke-qgen", BuildContext(catalog, params))
    path = index.write_tool_vectors(catalog.tool_ids, catalog.docs("original"), args.out,
                                    meta={"dataset": catalog.name, "docs": "original"})
    print(json.dumps({"dataset": catalog.name, "out": str(path), "n_tools": len(catalog.tool_ids),
                      "stats": index.stats}))


def tool_vectors_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="the .npz file to write (e.g. data/reinvoke/tool-vectors/<ds>.npz)")
