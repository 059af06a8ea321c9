"""Dense bi-encoder retriever: sentence-transformers embeddings (L2-normalised) in a faiss inner-product index."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from toolret.atomic import atomic_directory
from toolret.config import StrictModel, cache_home
from toolret.paths import under_project
from toolret.registry import COMPONENT_FILE, write_component_meta
from toolret.reproducibility import kernel_pins
from toolret.roles import Ranking, default_query_ids
from toolret.retrieval.embedding_store import EmbeddingStore, encoder_fingerprint
from toolret.retrieval.models import copy_encoder, encoder_refs, load_sentence_transformer


ENCODER_DIR = "encoder"  # a self-contained save's copy of a local encoder (DenseRetriever.embed_models)


class DenseConfig(StrictModel):
    """``params.yaml: dense``: the bi-encoder (a packaged model name or a local folder)."""

    model: str = "all-MiniLM-L6-v2"
    batch_size: int = 64
    max_seq_length: int = 256
    device: str = "cpu"  # cuda on a GPU machine
    normalize: bool = True
    # document embeddings persist here across processes (catalogs sharing a corpus, e.g. the six ToolBench
    # groups, encode it once); None = <cache home>/embeddings, "off" = never. A cache: results do not depend on it.
    embedding_cache: str | None = None
    # exact inner-product search (flat) or approximate HNSW graph search (faiss IndexHNSWFlat: M links per
    # node, efSearch candidates per query); benchmarks/scale.py measures its latency and Recall@5 loss
    index: Literal["flat", "hnsw"] = "flat"
    hnsw_m: int = 32
    hnsw_ef_search: int = 128

    def record_models(self) -> list[dict]:
        """The encoder a result record names (with the device it runs on)."""

        refs = encoder_refs(self.model)
        refs[0]["device"] = self.device
        return refs

    def store(self):
        """The persistent :class:`EmbeddingStore` of this encoder (``None`` when switched off)."""
        if self.embedding_cache == "off":
            return None

        root = under_project(self.embedding_cache) if self.embedding_cache else cache_home() / "embeddings"
        # vectors made under other kernel pins differ in their last bits (toolret.reproducibility): kept apart
        kernels = hashlib.sha256(json.dumps(kernel_pins(), sort_keys=True).encode()).hexdigest()[:8]
        return EmbeddingStore(root, f"{encoder_fingerprint(self)}-{kernels}")


class DenseRetriever:
    """Cosine-similarity retriever over a faiss ``IndexFlatIP`` (exact search; ``index: hnsw`` for an
    approximate HNSW graph).

    ``model`` is a packaged encoder name (``all-MiniLM-L6-v2``) or a local folder (e.g. a fine-tuned model).
    """

    name = "dense"
    # search() only reads the encoder and the faiss index (sentence-transformers ``encode`` checked from 16
    # threads: identical vectors): the server runs concurrent searches without a lock
    # (toolret.roles.concurrent_safe)
    concurrent_search = True

    def __init__(self, config: DenseConfig | None = None, encoder=None) -> None:
        self.config = config or DenseConfig()
        self._encoder = encoder
        self._injected = encoder is not None  # an injected encoder is not what the config names: no store
        self._index = None
        self.tool_ids: list[str] = []
        # loaded from a self-contained save: the ``model`` it was saved with (config.model is then the copy
        # inside the save, and saving again copies it again)
        self.model_origin: str | None = None

    def fit(self, catalog) -> None:
        """Zero-shot: nothing to learn (``dense-ft`` is the fine-tuned variant)."""

    @property
    def encoder(self):
        if self._encoder is None:

            self._encoder = load_sentence_transformer(self.config.model, self.config.device, self.config.max_seq_length)
        return self._encoder

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        emb = self.encoder.encode(list(texts), batch_size=self.config.batch_size, convert_to_numpy=True,
                                  normalize_embeddings=self.config.normalize, show_progress_bar=show_progress)
        return np.ascontiguousarray(emb, dtype=np.float32)

    def index_embeddings(self, tool_ids: Sequence[str], embeddings: np.ndarray) -> None:
        """Index precomputed tool vectors (used by methods that build their own tool vectors)."""
        import faiss

        self.tool_ids = list(tool_ids)
        emb = np.ascontiguousarray(embeddings, dtype=np.float32)
        if self.config.index == "hnsw":
            self._index = faiss.IndexHNSWFlat(emb.shape[1], self.config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            self._index.hnsw.efSearch = self.config.hnsw_ef_search
        else:
            self._index = faiss.IndexFlatIP(emb.shape[1])
        self._index.add(emb)

    def encode_documents(self, documents: Sequence[str]) -> np.ndarray:
        """Document embeddings, read from / added to the persistent store where the config has one."""
        store = None if self._injected else self.config.store()
        if store is None:
            return self.encode(documents, show_progress=len(documents) > 256)
        found = store.get(documents)
        missing = list(dict.fromkeys(d for d in documents if d not in found))
        if missing:
            emb = self.encode(missing, show_progress=len(missing) > 256)
            store.add(missing, emb)
            found.update(zip(missing, emb))
        if not documents:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[d] for d in documents]).astype(np.float32)

    def index(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None:
        self.index_embeddings(tool_ids, self.encode_documents(documents))

    def search_embeddings(self, query_emb: np.ndarray, k: int, query_ids: Sequence[str] | None = None) -> Ranking:
        k = min(k, len(self.tool_ids))
        scores, indices = self._index.search(np.ascontiguousarray(query_emb, dtype=np.float32), k)
        return Ranking(default_query_ids(len(query_emb), query_ids), self.tool_ids,
                       indices.astype(np.int64), scores.astype(np.float32))

    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking:
        return self.search_embeddings(self.encode(queries), k, query_ids)

    def save(self, path: str | Path) -> None:
        import faiss

        with atomic_directory(path) as tmp:
            faiss.write_index(self._index, str(tmp / "faiss.index"))
            config, embedded = self.config.to_dict(), {}
            if self.model_origin is not None:  # a self-contained save stays one
                copy_encoder(self.config.model, tmp / ENCODER_DIR)
                config["model"], embedded = self.model_origin, {"encoder_dir": ENCODER_DIR}
            write_component_meta(tmp, self.name, config=config, tool_ids=self.tool_ids, **embedded)

    @classmethod
    def embed_models(cls, path: str | Path) -> None:
        """Make the component saved at ``path`` self-contained (``Pipeline.save(self_contained=True)``): a
        local encoder (a fine-tuned model) is copied into it and loaded from there, so that retraining,
        moving or deleting the original cannot change what this save ranks (its stored vectors were made by
        the encoder as it was). A packaged encoder is left named."""
        path = Path(path)
        meta = json.loads((path / COMPONENT_FILE).read_text(encoding="utf-8"))
        if meta.get("encoder_dir") or not copy_encoder(meta["config"]["model"], path / ENCODER_DIR):
            return
        meta["encoder_dir"] = ENCODER_DIR
        (path / COMPONENT_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, encoder=None) -> DenseRetriever:
        import faiss

        path = Path(path)
        meta = json.loads((path / COMPONENT_FILE).read_text(encoding="utf-8"))
        config = DenseConfig(**meta["config"])
        if meta.get("encoder_dir"):  # self-contained: the encoder the vectors were made with, not the origin's
            config = config.replace(model=str(path / meta["encoder_dir"]))
        r = cls(config, encoder=encoder)
        if meta.get("encoder_dir"):
            r.model_origin = meta["config"]["model"]
        r.tool_ids = meta["tool_ids"]
        r._index = faiss.read_index(str(path / "faiss.index"))
        if r.config.index == "hnsw":
            r._index.hnsw.efSearch = r.config.hnsw_ef_search
        return r
