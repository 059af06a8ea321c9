"""A persistent text -> embedding store, shared by processes that encode the same texts with the same
encoder.

Why: the six ToolBench groups share one 2,479-API corpus, so their Re-Invoke evaluations encode the
same 24,790 expanded copies ("Documentation: <doc> Query: <q>") — ~15 min of MiniLM on 2 CPU cores per
group. With the store the first group encodes them and the other five read them back.

Layout: ``<root>/<fingerprint>/<shard>.npz``, each shard holding ``keys`` (sha256 of the text, hex) and
``vectors`` (float32). A shard is written to a temporary file and renamed into place, so a killed
writer leaves no half shard, and concurrent writers never touch the same file (duplicate keys across
shards are harmless: the first one read wins). ``fingerprint`` identifies everything an embedding
depends on: the encoder folder's content hash (weights, tokenizer, config), ``max_seq_length``,
normalisation and device type. It is a cache, not an artifact: deleting the folder costs only
encoding time.

Numerics: sentence-transformers pads each batch to its longest text, so the same text encoded in a
different batch can differ in the last float bits; a stored vector is the one the first encoding
produced (the in-process memo of Re-Invoke has the same property).
"""

from __future__ import annotations

import hashlib
import json
import logging
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from toolret.atomic import atomic_path
from toolret.provenance import sha256_tree
from toolret.retrieval.models import resolve_encoder

log = logging.getLogger(__name__)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def encoder_fingerprint(config) -> str:
    """Identity of a ``DenseConfig``'s embedding function (weights, max length, normalisation, device)."""

    ident = {
        "weights": sha256_tree(resolve_encoder(config.model)),
        "max_seq_length": config.max_seq_length,
        "normalize": config.normalize,
        "device": str(config.device).split(":")[0],
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


class EmbeddingStore:
    """Append-only shards of (text hash, vector) for one encoder fingerprint."""

    def __init__(self, root: str | Path, fingerprint: str) -> None:
        self.folder = Path(root) / fingerprint
        self._vectors: dict[str, np.ndarray] = {}
        self.skipped_shards = 0
        self._load()

    def _load(self) -> None:
        if not self.folder.is_dir():
            return
        for shard in sorted(self.folder.glob("*.npz")):
            try:
                with np.load(shard) as z:
                    keys, vectors = z["keys"], z["vectors"]
                if len(keys) != len(vectors):
                    raise ValueError(f"{len(keys)} keys but {len(vectors)} vectors")
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # unreadable shard: ignore it, re-encode
                self.skipped_shards += 1
                log.warning("embedding store: skipping unreadable shard %s (%s)", shard, exc)
                continue
            for k, v in zip(keys.tolist(), vectors):
                self._vectors.setdefault(k, v)

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those ``texts`` that have one (keyed by text)."""
        out = {}
        for t in texts:
            v = self._vectors.get(text_key(t))
            if v is not None:
                out[t] = v
        return out

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Persist new vectors as one shard (atomic: temp file + rename)."""
        keys = [text_key(t) for t in texts]
        new = [i for i, k in enumerate(keys) if k not in self._vectors]
        if not new:
            return
        keys_arr = np.array([keys[i] for i in new])
        vecs = np.ascontiguousarray(np.asarray(vectors)[new], dtype=np.float32)
        name = hashlib.sha256("".join(keys_arr.tolist()).encode()).hexdigest()[:16]
        with atomic_path(self.folder / f"{name}.npz", suffix=".npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, keys=keys_arr, vectors=vecs)
        for k, v in zip(keys_arr.tolist(), vecs):
            self._vectors.setdefault(k, v)
