"""The three roles a method can play, as typed protocols, the :class:`Ranking` every retriever returns, and the
:class:`Corpus` they are indexed on.

=============  ==========================================  =============================================
role           what it does                                implementations
=============  ==========================================  =============================================
QueryRewriter  ``rewrite(queries) -> list[list[str]]``     Re-Invoke's intent extractor, HyDE (QTA next)
Retriever      ``index(tool_ids, docs)``; ``search(...)``  bm25, dense, dense-ft, Re-Invoke's expanded
                                                           index (COLT next)
Reranker       ``rerank(queries, Ranking, k) -> Ranking``  (ToolRerank, Rerank-m next); may add candidates
=============  ==========================================  =============================================

A component whose ``search`` / ``rerank`` only reads shared state declares ``concurrent_search = True``
(:func:`concurrent_safe`); the server then runs concurrent searches on it without a lock.

Each role has ``fit(catalog)`` (learn from the catalog's train split, select on its dev split; a no-op
for unsupervised components), ``save(path)`` and a classmethod ``load(path)`` that round-trip: a loaded
component ranks exactly as the saved one. A :class:`toolret.pipeline.Pipeline` chains
``[rewriter] -> retriever -> [reranker ...]``; components are registered in :mod:`toolret.registry`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from toolret.catalog.model import Catalog, Tool

@dataclass
class Ranking:
    """Top-k results of a batch of queries over one catalog.

    Attributes:
        query_ids: one id per query (row).
        tool_ids: the catalog's tool ids; ``indices`` point into this list.
        indices: ``[n_queries, k]`` int array of tool positions, best first (``-1`` = no result).
        scores: ``[n_queries, k]`` float array, the retriever's score for each position.
    """

    query_ids: list[str]
    tool_ids: list[str]
    indices: np.ndarray
    scores: np.ndarray

    def ranked_ids(self, row: int) -> list[str]:
        return [self.tool_ids[i] for i in self.indices[row] if i >= 0]

    def as_lists(self) -> dict[str, list[str]]:
        """``query id -> ranked tool ids`` (best first)."""
        return {q: self.ranked_ids(r) for r, q in enumerate(self.query_ids)}

    def as_run(self) -> dict[str, dict[str, float]]:
        """TREC-style run ``query id -> {tool id: score}`` for ranx / pytrec_eval."""
        run: dict[str, dict[str, float]] = {}
        for r, q in enumerate(self.query_ids):
            run[q] = {
                self.tool_ids[i]: float(s) for i, s in zip(self.indices[r], self.scores[r]) if i >= 0
            }
        return run


def default_query_ids(n: int, query_ids: Sequence[str] | None) -> list[str]:
    return list(query_ids) if query_ids is not None else [str(i) for i in range(n)]


ROLES = ("rewriter", "retriever", "reranker")


@dataclass(frozen=True)
class Corpus:
    """The tools a pipeline is indexed on: ids, one document per tool, and the tool records (with their
    category -> tool -> API hierarchy, for rerankers that use it)."""

    tool_ids: list[str]
    documents: list[str]
    tools: list[Tool]

    @classmethod
    def from_catalog(cls, catalog: Catalog, docs: str = "original") -> Corpus:
        return cls(catalog.tool_ids, catalog.docs(docs), list(catalog.tools))


def concurrent_safe(component) -> bool:
    """Whether ``component.search`` / ``rerank`` may run in several threads at once without a lock: it says
    so with ``concurrent_search = True`` (a class attribute -- BM25, dense -- or a property derived from its
    parts, as ``hybrid`` does from its sides). Anything that does not is run under its pipeline's lock
    (:mod:`toolret.serving.service`)."""
    return getattr(component, "concurrent_search", False) is True


@runtime_checkable
class Retriever(Protocol):
    """Index tool documents once, then search batches of queries (best first, ``k`` per query).

    A retriever that reads more than one document variant per tool may also define
    ``index_corpus(corpus: Corpus)``, which :func:`index_retriever` then calls instead of ``index``
    (``hybrid``: each fused side indexes its own variant)."""

    name: str

    def fit(self, catalog: Catalog) -> None: ...

    def index(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None: ...

    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking: ...

    def save(self, path: str | Path) -> None: ...

    @classmethod
    def load(cls, path: str | Path) -> Retriever: ...


@runtime_checkable
class QueryRewriter(Protocol):
    """Rewrite each user query into one or more search queries.

    ``fuse`` merges the rankings of one query's rewrites (``None``: the rewriter always returns exactly
    one query per query and no fusion is needed).

    ``toolret rewrite`` stores a rewriter's outputs for a split through
    :func:`toolret.jsonl_artifacts.write_rewrites`: a rewriter
    whose stored outputs have a format of their own (the JSONL its ``build`` reads back: Re-Invoke's intents,
    QTA's rewrites) defines ``write_artifact(catalog, split, out) -> meta``; any other gets the generic
    ``{query_id, text, rewrites}`` JSONL.
    """

    name: str

    def fit(self, catalog: Catalog) -> None: ...

    def rewrite(self, queries: Sequence[str]) -> list[list[str]]: ...

    def save(self, path: str | Path) -> None: ...

    @classmethod
    def load(cls, path: str | Path) -> QueryRewriter: ...


@runtime_checkable
class Reranker(Protocol):
    """Reorder (and possibly extend) a first-stage ranking; indexed on the same :class:`Corpus`.

    Optional: ``reads_rewrites`` (true) -- the pipeline then calls ``rerank(queries, ranking, k,
    rewrites=...)`` with its rewriter's rewrites of each query (``None`` in a pipeline without one)."""

    name: str

    def fit(self, catalog: Catalog) -> None: ...

    def index(self, corpus: Corpus) -> None: ...

    def rerank(self, queries: Sequence[str], ranking: Ranking, k: int) -> Ranking: ...

    def save(self, path: str | Path) -> None: ...

    @classmethod
    def load(cls, path: str | Path) -> Reranker: ...


def index_retriever(retriever: Retriever, corpus: Corpus) -> None:
    """Index ``corpus``: ``index_corpus(corpus)`` where the retriever defines it (it reads more than one
    document variant per tool, e.g. ``hybrid``), else ``index(tool_ids, documents)``."""
    index_corpus = getattr(retriever, "index_corpus", None)
    if index_corpus is not None:
        index_corpus(corpus)
    else:
        retriever.index(corpus.tool_ids, corpus.documents)


def role_of(component: object) -> str:
    """``"rewriter"``, ``"retriever"`` or ``"reranker"`` for an object implementing one protocol."""
    if hasattr(component, "rewrite"):
        return "rewriter"
    if hasattr(component, "rerank"):
        return "reranker"
    if hasattr(component, "search"):
        return "retriever"
    raise TypeError(f"{type(component).__name__} implements none of the roles {ROLES}")


__all__ = ["Corpus", "QueryRewriter", "ROLES", "Ranking", "Reranker", "Retriever", "default_query_ids", "index_retriever",
           "role_of"]
