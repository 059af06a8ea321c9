"""Re-Invoke's components on the common method shape.

- :class:`ReInvokeIndex` (Retriever, ``reinvoke-qgen`` / ``reinvoke-qgen-bm25``): index time. ``fit``
  generates synthetic queries for every tool (Sec. 3.1; an artifact, through the cached LLM); ``index``
  expands each tool document into copies (:mod:`expansion`); the backbone (dense or BM25) indexes the
  copies and a tool's score is the mean (or max) over its copies.
- :class:`IntentRewriter` (QueryRewriter, ``reinvoke-intents``): query time. Each user query becomes its
  intents (Sec. 3.2; unparsable -> the raw query); ``fuse`` is the multi-view ranking (Sec. 3.3) over
  the per-intent rankings.
- :class:`HydeRewriter` (QueryRewriter, ``hyde-docs``): the HyDE baseline writes one hypothetical tool
  document per query, searched document-to-document by the retriever it is composed with.

With no synthetic queries the index is exactly its backbone; with one intent per query the rewriter is
the identity: the ablations of Table 3 are pipelines (``dense``, ``reinvoke-qgen``,
``reinvoke-intents+dense``, ``reinvoke-intents+reinvoke-qgen`` ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.atomic import atomic_directory
from toolret.catalog.model import Catalog
from toolret.errors import CatalogError
from toolret.jsonl_artifacts import read_jsonl, write_jsonl
from toolret.methods.reinvoke import artifacts
from toolret.methods.reinvoke.artifacts import build_synthetic_queries, check_synthetic_records, load_synthetic
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.expansion import aggregate_embeddings, aggregate_scores, build_copies
from toolret.methods.reinvoke.generation import (LazyLLM, extract_intents, generate_synthetic_queries, hyde_documents,
                                                 queries_by_tool)
from toolret.methods.reinvoke.multiview import multiview_rank, ranking_score
from toolret.methods.reinvoke.roundtrip import round_trip_consistency
from toolret.methods.reinvoke.tool_vectors import ToolVectors, copy_groups, write_vector_file
from toolret.paths import under_project
from toolret.registry import COMPONENT_FILE, write_component_meta
from toolret.roles import Ranking, default_query_ids
from toolret.retrieval.bm25 import BM25Config, BM25Retriever
from toolret.retrieval.dense import DenseConfig, DenseRetriever
from toolret.retrieval.embedding_store import EmbeddingStore, encoder_fingerprint


class MemoEncoder:
    """Text -> embedding memo in front of ``DenseRetriever.encode``, optionally backed by a persistent
    :class:`EmbeddingStore` (processes and catalogs sharing a corpus share copy embeddings)."""

    def __init__(self, dense, store: EmbeddingStore | None = None, fingerprint: str | None = None) -> None:
        self.dense = dense
        self.store = store
        # the encoder's identity (``encoder_fingerprint``): which committed tool vectors it may read; None = none
        self.fingerprint = fingerprint
        self._memo: dict[str, np.ndarray] = {}
        self.stats = {"encoded": 0, "from_store": 0}

    @classmethod
    def for_config(cls, dense_config) -> MemoEncoder:
        """A memo over the dense backbone, persisted in the dense config's embedding store
        (``dense.embedding_cache``: default ``<cache home>/embeddings``; ``"off"``: memory only)."""

        dense_config = dense_config or DenseConfig()
        store = dense_config.store()
        return cls(DenseRetriever(dense_config), store, encoder_fingerprint(dense_config))

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


# ---------------------------------------------------------------------------------------- index
class ReInvokeIndex:
    """Tool documents expanded with synthetic queries, over a dense or BM25 backbone.

    Args:
        config: :class:`ReInvokeConfig` (aggregation, expansion, n_queries, LLM budgets).
        backbone: ``"dense"`` or ``"bm25"``.
        dense_config / bm25_config: the backbone's own settings (``params.dense`` / ``params.bm25``).
        llm: a :class:`LazyLLM` for generating what the artifact lacks (``None``: artifact only).
        artifact: the synthetic-query JSONL (``fit`` writes it; ``index`` reads it).
        synthetic: synthetic-query records already in memory (instead of the artifact).
        encoder: a shared :class:`MemoEncoder`.
        round_trip: ``fit`` adds the round-trip diagnostic (paper Table 4; it encodes every synthetic query) to
            the artifact's meta -- the fit stage does; an evaluation materialising the artifact does not.
        tool_vectors: committed per-tool mean vectors (:class:`tool_vectors.ToolVectors`); default: those
            under ``config.tool_vectors`` made by the dense backbone's encoder (mean aggregation only).
    """

    name = "reinvoke-qgen"

    def __init__(self, config: ReInvokeConfig | None = None, backbone: str = "dense", *, dense_config=None,
                 bm25_config=None, llm: LazyLLM | None = None, artifact: str | Path | None = None,
                 synthetic: Sequence[dict] | None = None, encoder: MemoEncoder | None = None,
                 tool_vectors=None, round_trip: bool = True) -> None:
        if backbone not in ("dense", "bm25"):
            raise ValueError(f"backbone must be dense or bm25, got {backbone!r}")
        self.config = config or ReInvokeConfig()
        self.backbone = backbone
        self.dense_config, self.bm25_config = dense_config, bm25_config
        self.llm = llm
        self.artifact = Path(artifact) if artifact else None
        self._synthetic = list(synthetic) if synthetic is not None else None
        self._encoder = encoder
        self._tool_vectors = tool_vectors
        self.compute_round_trip = round_trip
        self._engine = None
        self.tool_ids: list[str] = []
        self.owner = np.zeros(0, dtype=np.int64)
        self.stats: dict[str, Any] = {}

    @property
    def encoder(self) -> MemoEncoder:
        if self._encoder is None:
            self._encoder = MemoEncoder.for_config(self.dense_config)
        return self._encoder

    # ------------------------------------------------------------------ fit: synthetic queries
    def fit(self, catalog: Catalog) -> None:
        """Generate the synthetic queries of every tool (original documents) into the artifact, unless
        a matching artifact exists (same generation settings, same documents)."""
        if self._load_artifact(catalog.tool_ids, catalog.docs("original")) is not None:
            return
        if self.llm is None or self.artifact is None:
            raise CatalogError("reinvoke-qgen: fitting needs an LLM and an artifact path")

        self._synthetic, meta = build_synthetic_queries(catalog, self.config, llm=self.llm)
        if self.compute_round_trip:
            meta["round_trip"] = self.round_trip(catalog)
        write_jsonl(self.artifact, self._synthetic, meta)

    def round_trip(self, catalog: Catalog) -> dict[str, Any]:
        """Round-trip consistency (paper Table 4): each synthetic query retrieving its own tool with the
        dense backbone over the plain documents."""

        dense = DenseRetriever(self.dense_config)
        dense.encode = lambda texts, show_progress=False: self.encoder.encode(texts)  # the shared memo
        dense.index(catalog.tool_ids, catalog.docs("original"))
        n = self.config.n_queries
        return {"backbone": "dense", "docs": "original", "n_queries_per_tool": n,
                **round_trip_consistency(self._synthetic, dense, (1, 5, 10), n)}

    def _load_artifact(self, tool_ids: Sequence[str], documents: Sequence[str]) -> list[dict] | None:
        if self._synthetic is None and self.artifact is not None:
            self._synthetic = load_synthetic(self.artifact, self.config)
        if self._synthetic is None:
            return None
        try:  # an artifact made from other documents or with too few samples is regenerated, not trusted
            check_synthetic_records(self._synthetic, tool_ids, documents, self.config.n_queries)
        except CatalogError:
            if self.llm is None:
                raise
            self._synthetic = None
        return self._synthetic

    def synthetic_queries(self, tool_ids: Sequence[str], documents: Sequence[str]) -> list[list[str]]:
        records = self._load_artifact(tool_ids, documents)
        if records is None:
            if self.llm is None:
                raise CatalogError("reinvoke-qgen: no synthetic-query artifact and no LLM to generate queries "
                                   "(run its fit stage: `toolret fit --component reinvoke-qgen ...`)")

            records = self._synthetic = generate_synthetic_queries(self.llm, tool_ids, documents, self.config)
        return queries_by_tool(records, tool_ids, self.config.n_queries)

    # ------------------------------------------------------------------ index
    def index(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None:
        cfg = self.config
        self.tool_ids = list(tool_ids)
        queries = self.synthetic_queries(tool_ids, documents)
        texts, owner, fallback = build_copies(documents, queries, cfg.expansion, cfg.n_queries)
        self.stats.update({"n_copies": len(texts), "tools_without_queries": fallback})
        self.owner = np.asarray(owner, dtype=np.int64)
        copy_ids = [str(i) for i in range(len(texts))]
        if self.backbone == "bm25":

            self._engine = BM25Retriever(self.bm25_config)
            self._engine.index(copy_ids, texts)
            return

        self._engine = DenseRetriever(self.dense_config)  # only its faiss index is used; encoding goes via the memo
        if cfg.aggregation == "mean":  # one vector per tool: IP with it == mean of copy cosines
            n = len(self.tool_ids)
            self._engine.index_embeddings([str(t) for t in range(n)], self.mean_vectors(texts))
        else:
            self._engine.index_embeddings(copy_ids, self.encoder.encode(texts))

    def stored_tool_vectors(self):
        """The committed tool vectors of this backbone's encoder (``None``: switched off or none there)."""
        if self._tool_vectors is None and self.config.tool_vectors != "off":

            root = under_project(self.config.tool_vectors)
            fingerprint = self.encoder.fingerprint  # an encoder of unknown identity reads none
            if fingerprint is not None and root.is_dir() and any(root.glob("*.npz")):
                self._tool_vectors = ToolVectors(root, fingerprint)
        return self._tool_vectors

    def mean_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Each tool's mean copy embedding: committed vectors where the copies match, the rest encoded."""

        n = len(self.tool_ids)
        groups = copy_groups(texts, self.owner, n)
        store = self.stored_tool_vectors()
        stored = store.get(groups) if store is not None else {}
        missing = [t for t in range(n) if t not in stored]
        if store is not None:
            self.stats["tool_vectors"] = {"stored": len(stored), "encoded_tools": len(missing)}
        if not missing:
            return np.stack([stored[t] for t in range(n)]).astype(np.float32)
        sub_owner = np.repeat(np.arange(len(missing)), [len(groups[t]) for t in missing])
        encoded = aggregate_embeddings(self.encoder.encode([c for t in missing for c in groups[t]]), sub_owner,
                                       len(missing))
        out = np.zeros((n, encoded.shape[1]), dtype=np.float32)
        out[missing] = encoded
        for t, v in stored.items():
            out[t] = v
        return out

    def write_tool_vectors(self, tool_ids: Sequence[str], documents: Sequence[str], out: str | Path,
                           meta: dict[str, Any] | None = None) -> Path:
        """Encode every tool's copies and write their mean vectors (:mod:`tool_vectors`) to ``out``."""

        if self.backbone != "dense" or self.encoder.fingerprint is None:
            raise ValueError("tool vectors are mean copy embeddings of an identified encoder: a dense backbone "
                             "whose encoder has a fingerprint")
        cfg = self.config
        texts, owner, _ = build_copies(documents, self.synthetic_queries(tool_ids, documents), cfg.expansion,
                                       cfg.n_queries)
        n = len(tool_ids)
        vectors = aggregate_embeddings(self.encoder.encode(texts), owner, n)
        self.stats["encoder"] = dict(self.encoder.stats)
        encoder = self.dense_config.model if self.dense_config is not None else None
        return write_vector_file(out, self.encoder.fingerprint, tool_ids, copy_groups(texts, owner, n), vectors,
                                 {"encoder": encoder, "n_queries": cfg.n_queries, "expansion": cfg.expansion,
                                  "llm_model": cfg.llm_model, "n_copies": len(texts), **(meta or {})})

    @property
    def n_copies(self) -> int:
        return len(self.owner)

    def tool_scores_and_order(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Similarities ``[len(texts), n_tools]`` and the backbone's result position of each tool's best
        copy (the tie-break for exactly equal similarities)."""
        n_tools = len(self.tool_ids)
        if not texts:
            return np.zeros((0, n_tools)), np.zeros((0, n_tools), dtype=np.int64)
        if self.backbone == "bm25":
            # a copy BM25 does not return shares no term with the query: it scores 0 in the mean; a tool none
            # of whose copies is returned is no result (-inf), as in the plain BM25 retriever
            scores, pos = scatter_ranking(self._engine.search(texts, k=self.n_copies), self.n_copies, 0.0)
            first = first_position(pos, self.owner, n_tools)
            agg = aggregate_scores(scores, self.owner, n_tools, self.config.aggregation)
            return np.where(first < self.n_copies, agg, -np.inf), first
        emb = self.encoder.encode(texts)
        if self.config.aggregation == "mean":
            return scatter_ranking(self._engine.search_embeddings(emb, n_tools), n_tools, -np.inf)
        scores, pos = scatter_ranking(self._engine.search_embeddings(emb, self.n_copies), self.n_copies, -np.inf)
        return aggregate_scores(scores, self.owner, n_tools, "max"), first_position(pos, self.owner, n_tools)

    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking:
        """Tools by similarity (exact ties: the backbone's order of their best copy, then tool index)."""
        qids = default_query_ids(len(queries), query_ids)
        n_tools = len(self.tool_ids)
        k = min(k, n_tools)
        scores, pos = self.tool_scores_and_order(list(queries))
        order = np.lexsort((np.broadcast_to(np.arange(n_tools), scores.shape), pos, -scores), axis=1)[:, :k]
        top = np.take_along_axis(scores, order, axis=1)
        indices = np.where(np.isfinite(top), order, -1).astype(np.int64)
        return Ranking(qids, self.tool_ids, indices, top.astype(np.float32))

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        with atomic_directory(path) as tmp:
            self._engine.save(tmp / "engine")
            np.save(tmp / "owner.npy", self.owner)
            if self._synthetic is not None:
                write_jsonl(tmp / "synthetic_queries.jsonl", self._synthetic)
            write_component_meta(tmp, self.name, backbone=self.backbone, config=self.config.to_dict(),
                                 dense=self.dense_config.to_dict() if self.dense_config else None,
                                 bm25=self.bm25_config.to_dict() if self.bm25_config else None,
                                 tool_ids=self.tool_ids, stats=self.stats)

    @classmethod
    def load(cls, path: str | Path) -> ReInvokeIndex:
        path = Path(path)
        meta = json.loads((path / COMPONENT_FILE).read_text(encoding="utf-8"))
        syn = path / "synthetic_queries.jsonl"
        r = cls(ReInvokeConfig.model_validate(meta["config"]), meta["backbone"],
                dense_config=DenseConfig.model_validate(meta["dense"]) if meta.get("dense") else None,
                bm25_config=BM25Config.model_validate(meta["bm25"]) if meta.get("bm25") else None,
                synthetic=read_jsonl(syn) if syn.is_file() else None)
        r.tool_ids, r.stats = meta["tool_ids"], meta.get("stats", {})
        r.owner = np.load(path / "owner.npy")
        r._engine = (BM25Retriever if r.backbone == "bm25" else DenseRetriever).load(path / "engine")
        if r.backbone == "dense" and r._engine.model_origin is not None:  # saved self-contained: its copy encodes
            r.dense_config = r.dense_config.replace(model=r._engine.config.model)
        return r


# ---------------------------------------------------------------------------------------- rewriters
class _CachedRewriter:
    """A rewriter whose LLM outputs come from an artifact (``query text -> output``) or the cached LLM."""

    name = "rewriter"
    kind = "rewrites"  # artifact file stem

    def __init__(self, config: ReInvokeConfig | None = None, *, llm: LazyLLM | None = None,
                 outputs: Mapping[str, Any] | None = None) -> None:
        self.config = config or ReInvokeConfig()
        self.llm = llm
        self._outputs: dict[str, Any] = dict(outputs or {})
        self.stats: dict[str, Any] = {"llm_outputs": 0, "fallback": 0}

    def fit(self, catalog: Catalog) -> None:
        """Unsupervised: nothing to learn."""

    def _generate(self, texts: list[str]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _value(self, record: dict[str, Any]) -> Any:
        raise NotImplementedError

    def outputs_for(self, texts: Sequence[str]) -> list[Any]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._outputs]
        if missing:
            if self.llm is None:
                raise CatalogError(f"{self.name}: no stored output for {len(missing)} queries and no LLM "
                                   f"(first {missing[0]!r})")
            for rec in self._generate(missing):
                self._outputs[rec["text"]] = self._value(rec)
                self.stats["llm_outputs"] += 1
                self.stats["fallback"] += int(rec["fallback"])
        return [self._outputs[t] for t in texts]

    def write_artifact(self, catalog: Catalog, split: str, out: str | Path) -> dict[str, Any]:
        """Generate the outputs of every judged query of ``split`` into ``out`` (JSONL + meta)."""

        records, meta = getattr(artifacts, f"build_{self.kind}")(catalog, self.config, out, split=split, llm=self.llm)
        self._outputs.update({r["text"]: self._value(r) for r in records})
        return meta

    def save(self, path: str | Path) -> None:
        with atomic_directory(path) as tmp:
            rows = [{"text": t, "output": v} for t, v in self._outputs.items()]
            (tmp / "outputs.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                               encoding="utf-8")
            write_component_meta(tmp, self.name, config=self.config.to_dict())

    @classmethod
    def load(cls, path: str | Path):
        path = Path(path)
        meta = json.loads((path / COMPONENT_FILE).read_text(encoding="utf-8"))

        rows = read_jsonl(path / "outputs.jsonl")
        return cls(ReInvokeConfig.model_validate(meta["config"]), outputs={r["text"]: r["output"] for r in rows})


class IntentRewriter(_CachedRewriter):
    """Re-Invoke's intent extractor; several intents per query are merged by multi-view ranking."""

    name = "reinvoke-intents"
    kind = "intents"

    def _generate(self, texts: list[str]) -> list[dict[str, Any]]:
        return extract_intents(self.llm, texts, self.config)

    def _value(self, record: dict[str, Any]) -> Any:
        return record["intents"]

    def rewrite(self, queries: Sequence[str]) -> list[list[str]]:
        """Each query's intents (``intent_ranking: query``: the query first, then its intents)."""
        out = []
        for text, intents in zip(queries, self.outputs_for(queries)):
            kept = [i for i in intents if i and i.strip()][: self.config.max_intents]
            out.append([text, *kept] if self.config.intent_ranking == "query" else kept or [text])
        return out

    def fuse(self, groups: Sequence[Sequence[str]], ranking: Ranking, k: int, query_ids: Sequence[str]) -> Ranking:
        """Multi-view ranking (Sec. 3.3) of each query's intents; ``ranking`` ranks every tool for every
        intent (rows in ``groups`` order). ``intent_ranking: query``: each group's first row, the query's."""
        n_tools = len(ranking.tool_ids)
        k = min(k, n_tools)
        if self.config.intent_ranking == "query":
            rows = np.cumsum([0] + [len(g) for g in groups[:-1]]).astype(np.int64)
            return Ranking(list(query_ids), ranking.tool_ids, ranking.indices[rows, :k], ranking.scores[rows, :k])
        scores, pos = scatter_ranking(ranking, n_tools, -np.inf)
        indices = np.full((len(groups), k), -1, dtype=np.int64)
        out = np.full((len(groups), k), -np.inf, dtype=np.float32)
        row = 0
        for q, group in enumerate(groups):
            cands = multiview_rank(scores[row: row + len(group)], k, pos[row: row + len(group)])
            row += len(group)
            for j, c in enumerate(cands):
                indices[q, j] = c.tool
                out[q, j] = ranking_score(c)
        return Ranking(list(query_ids), ranking.tool_ids, indices, out)


class HydeRewriter(_CachedRewriter):
    """HyDE: each query becomes one hypothetical tool document (greedy), searched document-to-document."""

    name = "hyde-docs"
    kind = "hyde"

    def _generate(self, texts: list[str]) -> list[dict[str, Any]]:
        return hyde_documents(self.llm, texts, self.config)

    def _value(self, record: dict[str, Any]) -> Any:
        return record["document"]

    def rewrite(self, queries: Sequence[str]) -> list[list[str]]:
        return [[doc] for doc in self.outputs_for(queries)]
