"""The retriever protocol every method implements, and the :class:`Ranking` it returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np


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


@runtime_checkable
class Retriever(Protocol):
    """Index a list of tool documents once, then search batches of queries.

    Implementations: :class:`toolret.retrieval.bm25.BM25Retriever`,
    :class:`toolret.retrieval.dense.DenseRetriever`, and every method's retriever.
    """

    name: str

    def index(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None: ...

    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking: ...

    def save(self, path: str | Path) -> None: ...


def default_query_ids(n: int, query_ids: Sequence[str] | None) -> list[str]:
    return list(query_ids) if query_ids is not None else [str(i) for i in range(n)]
