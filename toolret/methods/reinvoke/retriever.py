"""``ReInvokeRetriever`` (dense or BM25 backbone) and the HyDE baseline, both ``Retriever``s.

Index time: synthetic queries (from an artifact, or generated through the cached LLM) expand every
tool document into copies (:mod:`expansion`); the backbone indexes the copies and a tool's score is the
mean (or max) over its copies. Query time: each user query becomes its intents (artifact or cached LLM;
unparsable -> the raw query), every intent scores all tools, and :func:`multiview.multiview_rank`
merges them. With both components switched off the retriever is exactly its backbone (dense / bm25).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.atomic import atomic_directory
from toolret.catalog.model import CatalogError
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.expansion import aggregate_embeddings, aggregate_scores, build_copies
from toolret.methods.reinvoke.generation import (
    LazyLLM,
    extract_intents,
    generate_synthetic_queries,
    hyde_documents,
    queries_by_tool,
)
from toolret.methods.reinvoke.multiview import multiview_rank, ranking_score
from toolret.retrieval.base import Ranking, default_query_ids
from toolret.retrieval.embedding_store import EmbeddingStore


class MemoEncoder:
    """Text -> embedding memo in front of ``DenseRetriever.encode`` (ablations share copy embeddings),
    optionally backed by a persistent :class:`EmbeddingStore` (datasets sharing a corpus share copies)."""

    def __init__(self, dense, store: EmbeddingStore | None = None) -> None:
        self.dense = dense
        self.store = store
        self._memo: dict[str, np.ndarray] = {}
        self.stats = {"encoded": 0, "from_store": 0}

    @classmethod
    def for_config(cls, dense_config, cfg: ReInvokeConfig) -> MemoEncoder:
        """A memo over the dense backbone, persisted under ``cfg.embedding_cache_dir`` (default
        ``data/embed_cache``; ``"off"`` keeps it in memory only)."""
        from toolret.retrieval.dense import DenseConfig, DenseRetriever

        dense_config = dense_config or DenseConfig()
        if cfg.embedding_cache_dir == "off":
            return cls(DenseRetriever(dense_config))
        from toolret.config import data_dir
        from toolret.retrieval.embedding_store import encoder_fingerprint

        root = Path(cfg.embedding_cache_dir) if cfg.embedding_cache_dir else data_dir() / "embed_cache"
        return cls(DenseRetriever(dense_config), EmbeddingStore(root, encoder_fingerprint(dense_config)))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing and self.store is not None:
            found = self.store.get(missing)
            self._memo.update(found)
            self.stats["from_store"] += len(found)
            missing = [t for t in missing if t not in found]
        if missing:
            emb = self.dense.encode(missing, show_progress=len(missing) > 2000)
            self._memo.update(zip(missing, emb))
            self.stats["encoded"] += len(missing)
            if self.store is not None:
                self.store.add(missing, emb)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts]).astype(np.float32)


def scatter_ranking(ranking: Ranking, n_cols: int, fill: float) -> tuple[np.ndarray, np.ndarray]:
    """``[n_queries, n_cols]`` score matrix and result-position matrix from a (possibly partial) ranking
    (absent columns: ``fill`` / position ``n_cols``)."""
    out = np.full((len(ranking.query_ids), n_cols), fill, dtype=np.float64)
    pos = np.full((len(ranking.query_ids), n_cols), n_cols, dtype=np.int64)
    n_rows, depth = ranking.indices.shape
    rows = np.repeat(np.arange(n_rows), depth)
    cols = ranking.indices.reshape(-1)
    ok = cols >= 0
    out[rows[ok], cols[ok]] = ranking.scores.reshape(-1)[ok]
    pos[rows[ok], cols[ok]] = np.tile(np.arange(depth), n_rows)[ok]
    return out, pos


def first_position(copy_pos: np.ndarray, owner: np.ndarray, n_tools: int) -> np.ndarray:
    """Per tool, the best (lowest) backbone result position among its copies."""
    out = np.full((copy_pos.shape[0], n_tools), copy_pos.shape[1], dtype=np.int64)
    np.minimum.at(out.T, owner, copy_pos.T)
    return out


class _Backbone:
    """Dense (faiss via ``DenseRetriever``) or BM25 (``BM25Retriever``) over expanded copies."""

    def __init__(self, config: ReInvokeConfig, dense_config=None, bm25_config=None, encoder: MemoEncoder | None = None) -> None:
        self.config, self.kind = config, config.backbone
        self.dense_config, self.bm25_config = dense_config, bm25_config
        self._encoder = encoder
        self._engine = None

    @property
    def encoder(self) -> MemoEncoder:
        if self._encoder is None:
            self._encoder = MemoEncoder.for_config(self.dense_config, self.config)
        return self._encoder

    def index(self, texts: Sequence[str], owner: np.ndarray, n_tools: int, aggregation: str) -> None:
        self.owner, self.n_tools, self.aggregation, self.n_copies = owner, n_tools, aggregation, len(texts)
        copy_ids = [str(i) for i in range(len(texts))]
        if self.kind == "bm25":
            from toolret.retrieval.bm25 import BM25Retriever

            self._engine = BM25Retriever(self.bm25_config)
            self._engine.index(copy_ids, texts)
            return
        from toolret.retrieval.dense import DenseRetriever

        self._engine = DenseRetriever(self.dense_config)  # only its faiss index is used; encoding goes via the memo
        emb = self.encoder.encode(texts)
        if aggregation == "mean":  # one vector per tool: IP with it == mean of copy cosines
            self._engine.index_embeddings([str(t) for t in range(n_tools)], aggregate_embeddings(emb, owner, n_tools))
        else:
            self._engine.index_embeddings(copy_ids, emb)

    def tool_scores(self, texts: Sequence[str]) -> np.ndarray:
        """``[len(texts), n_tools]`` similarity of each text to each tool."""
        return self.tool_scores_and_order(texts)[0]

    def tool_scores_and_order(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Similarities ``[len(texts), n_tools]`` and the backbone's result position of each tool's best
        copy (the tie-break for exactly equal similarities)."""
        if not texts:
            return np.zeros((0, self.n_tools)), np.zeros((0, self.n_tools), dtype=np.int64)
        if self.kind == "bm25":
            scores, pos = scatter_ranking(self._engine.search(texts, k=self.n_copies), self.n_copies, 0.0)
            return (aggregate_scores(scores, self.owner, self.n_tools, self.aggregation),
                    first_position(pos, self.owner, self.n_tools))
        emb = self.encoder.encode(texts)
        if self.aggregation == "mean":
            return scatter_ranking(self._engine.search_embeddings(emb, self.n_tools), self.n_tools, -np.inf)
        scores, pos = scatter_ranking(self._engine.search_embeddings(emb, self.n_copies), self.n_copies, -np.inf)
        return aggregate_scores(scores, self.owner, self.n_tools, "max"), first_position(pos, self.owner, self.n_tools)


class ReInvokeRetriever:
    """Re-Invoke over a dense or BM25 backbone.

    Args:
        config: :class:`ReInvokeConfig` (components, aggregation, expansion, LLM budgets).
        dense_config / bm25_config: the backbone's own settings (``params.dense`` / ``params.bm25``).
        llm: a :class:`LazyLLM` used for whatever the artifacts below do not provide.
        synthetic: synthetic-query records (``artifacts.build_synthetic_queries``) for the indexed tools.
        intents: ``query text -> intents`` (from the intents artifact).
        encoder: a shared :class:`MemoEncoder` (so ablations re-use copy embeddings).
    """

    def __init__(self, config: ReInvokeConfig | None = None, *, dense_config=None, bm25_config=None,
                 llm: LazyLLM | None = None, synthetic: Sequence[dict] | None = None,
                 intents: Mapping[str, Sequence[str]] | None = None, encoder: MemoEncoder | None = None,
                 name: str | None = None) -> None:
        self.config = config or ReInvokeConfig()
        self.name = name or ("reinvoke" if self.config.backbone == "dense" else "reinvoke-bm25")
        self.llm = llm
        self._synthetic = list(synthetic) if synthetic is not None else None
        self._intents = dict(intents) if intents is not None else {}
        self._backbone = _Backbone(self.config, dense_config, bm25_config, encoder)
        self.tool_ids: list[str] = []
        self.stats: dict[str, Any] = {"intent_fallback": 0, "intent_llm_outputs": 0}
        self.last_intents: list[list[str]] = []

    # ------------------------------------------------------------------ index
    def synthetic_queries(self, tool_ids: Sequence[str], documents: Sequence[str]) -> list[list[str]]:
        cfg = self.config
        if self._synthetic is not None:
            from toolret.methods.reinvoke.artifacts import check_synthetic_records

            try:  # with an LLM at hand, an artifact made from other documents is regenerated, not trusted
                check_synthetic_records(self._synthetic, tool_ids, documents if self.llm is not None else None,
                                        cfg.n_queries)
            except CatalogError:
                if self.llm is None:
                    raise
                self._synthetic = None
        if self._synthetic is not None:
            records = self._synthetic
        else:
            if self.llm is None:
                raise CatalogError("Re-Invoke: no synthetic-query artifact and no LLM to generate queries")
            records = generate_synthetic_queries(self.llm, tool_ids, documents, cfg)
            self._synthetic = records
        return queries_by_tool(records, tool_ids, cfg.n_queries)

    def index(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None:
        cfg = self.config
        self.tool_ids = list(tool_ids)
        queries = self.synthetic_queries(tool_ids, documents) if cfg.query_generator else None
        texts, owner, fallback = build_copies(documents, queries, cfg.expansion, cfg.n_queries)
        self.stats.update({"n_copies": len(texts), "tools_without_queries": fallback})
        self._backbone.index(texts, owner, len(self.tool_ids), cfg.aggregation)

    # ------------------------------------------------------------------ search
    def intents_for(self, texts: Sequence[str]) -> list[list[str]]:
        if not self.config.intent_extractor:
            return [[t] for t in texts]
        missing = [t for t in dict.fromkeys(texts) if t not in self._intents]
        if missing:
            if self.llm is None:
                raise CatalogError(f"Re-Invoke: no intents for {len(missing)} queries and no LLM to extract them")
            for rec in extract_intents(self.llm, missing, self.config):
                self._intents[rec["text"]] = rec["intents"]
                self.stats["intent_llm_outputs"] += 1
                self.stats["intent_fallback"] += int(rec["fallback"])
        out = []
        for t in texts:
            intents = [i for i in self._intents[t] if i and i.strip()][: self.config.max_intents]
            out.append(intents or [t])
        return out

    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking:
        qids = default_query_ids(len(queries), query_ids)
        k = min(k, len(self.tool_ids))
        intents = self.intents_for(queries)
        self.last_intents = intents
        flat = [i for group in intents for i in group]
        scores, order = self._backbone.tool_scores_and_order(flat)
        indices = np.full((len(queries), k), -1, dtype=np.int64)
        out_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        row = 0
        for q, group in enumerate(intents):
            cands = multiview_rank(scores[row: row + len(group)], k, order[row: row + len(group)])
            row += len(group)
            for j, c in enumerate(cands):
                indices[q, j] = c.tool
                out_scores[q, j] = ranking_score(c)
        return Ranking(qids, self.tool_ids, indices, out_scores)

    def save(self, path: str | Path) -> None:
        with atomic_directory(path) as tmp:
            (tmp / "index.json").write_text(json.dumps(
                {"retriever": self.name, "config": self.config.to_dict(), "tool_ids": self.tool_ids,
                 "stats": self.stats}), encoding="utf-8")
            if self._synthetic is not None:
                (tmp / "synthetic_queries.jsonl").write_text(
                    "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self._synthetic), encoding="utf-8")


class HydeRetriever:
    """HyDE baseline: the LLM writes a hypothetical tool document per query; search document-to-document
    with the backbone (dense by default) over the plain tool documents."""

    def __init__(self, config: ReInvokeConfig | None = None, *, dense_config=None, bm25_config=None,
                 llm: LazyLLM | None = None, documents: Mapping[str, str] | None = None,
                 encoder: MemoEncoder | None = None, name: str | None = None) -> None:
        self.config = config or ReInvokeConfig()
        self.name = name or ("hyde" if self.config.backbone == "dense" else "hyde-bm25")
        self.llm = llm
        self._docs = dict(documents) if documents is not None else {}
        self._backbone = _Backbone(self.config, dense_config, bm25_config, encoder)
        self.tool_ids: list[str] = []
        self.stats: dict[str, Any] = {"hyde_fallback": 0}

    def index(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None:
        self.tool_ids = list(tool_ids)
        self._backbone.index(list(documents), np.arange(len(documents)), len(documents), "mean")

    def hypothetical(self, texts: Sequence[str]) -> list[str]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._docs]
        if missing:
            if self.llm is None:
                raise CatalogError(f"HyDE: no hypothetical documents for {len(missing)} queries and no LLM")
            for rec in hyde_documents(self.llm, missing, self.config):
                self._docs[rec["text"]] = rec["document"]
                self.stats["hyde_fallback"] += int(rec["fallback"])
        return [self._docs[t] for t in texts]

    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking:
        qids = default_query_ids(len(queries), query_ids)
        k = min(k, len(self.tool_ids))
        scores, pos = self._backbone.tool_scores_and_order(self.hypothetical(queries))
        order = np.lexsort((pos, -scores), axis=1)[:, :k]
        return Ranking(qids, self.tool_ids, order.astype(np.int64),
                       np.take_along_axis(scores, order, axis=1).astype(np.float32))

    def save(self, path: str | Path) -> None:
        with atomic_directory(path) as tmp:
            (tmp / "index.json").write_text(json.dumps(
                {"retriever": self.name, "config": self.config.to_dict(), "tool_ids": self.tool_ids}), encoding="utf-8")
