"""The :class:`Ranking` every retriever returns (the role protocols live in :mod:`toolret.roles`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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


def default_query_ids(n: int, query_ids: Sequence[str] | None) -> list[str]:
    return list(query_ids) if query_ids is not None else [str(i) for i in range(n)]
