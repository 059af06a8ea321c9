"""Rank fusion of several first-stage rankings over the same corpus (one formula per function).

Both take :class:`Ranking` s whose ``tool_ids`` lists are identical (the same corpus, the same order) and
one weight per ranking; a tool absent from a ranking contributes nothing from it, and a ranking of
weight 0 contributes no candidates. ``tests/test_fusion.py``
checks both against ``ranx.fuse`` (the field's reference implementation).

- :func:`weighted_rrf` -- reciprocal-rank fusion (Cormack et al., SIGIR 2009), weighted:
  ``score(d) = sum_i w_i / (rrf_k + rank_i(d))``, ranks from 1.
- :func:`weighted_minmax` -- normalised-score fusion: each ranking's scores min-max normalised per query
  (``(s - min) / max(max - min, 1e-9)``, as ranx), then ``score(d) = sum_i w_i * norm_i(d)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolret.roles import Ranking


def check_weight_grid(weights: list[float], name: str) -> list[float]:
    """A grid of fusion weights to select from: non-empty, each in [0, 1] (``name`` in the error)."""
    if not weights or any(not 0 <= w <= 1 for w in weights):
        raise ValueError(f"{name} must be a non-empty list of weights in [0, 1], got {weights}")
    return weights


def _check(rankings: Sequence[Ranking], weights: Sequence[float]) -> None:
    if not rankings or len(rankings) != len(weights):
        raise ValueError(f"fusion needs one weight per ranking, got {len(rankings)} rankings and {len(weights)} weights")
    first = rankings[0]
    for r in rankings[1:]:
        if r.tool_ids != first.tool_ids or r.query_ids != first.query_ids:
            raise ValueError("fusion: rankings must share their query ids and their corpus (tool_ids, in order)")


def _top_k(contrib_rows: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, scores)`` of the k best tools of each row's summed contributions (``-1`` pads);
    ties are broken by the smaller tool position (deterministic)."""
    n = len(contrib_rows)
    indices = np.full((n, k), -1, dtype=np.int64)
    scores = np.full((n, k), -np.inf, dtype=np.float32)
    for row, (idx, val) in enumerate(contrib_rows):
        if idx.size == 0:
            continue
        tools, inverse = np.unique(idx, return_inverse=True)
        summed = np.zeros(tools.size, dtype=np.float64)
        np.add.at(summed, inverse, val)
        order = np.lexsort((tools, -summed))[:k]  # score descending, then tool position ascending
        indices[row, :order.size] = tools[order]
        scores[row, :order.size] = summed[order]
    return indices, scores


def _rows(rankings: Sequence[Ranking], weights: Sequence[float], per_ranking) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query: every ranking's (tool positions, weighted contributions), concatenated; a ranking of
    weight 0 contributes no candidates (weights (1, 0) give exactly the first ranking)."""
    out = []
    for row in range(len(rankings[0].query_ids)):
        idx_parts, val_parts = [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
        for i, r in enumerate(rankings):
            if weights[i] == 0:
                continue
            valid = r.indices[row] >= 0
            idx_parts.append(r.indices[row][valid])
            val_parts.append(per_ranking(i, r.scores[row][valid]))
        out.append((np.concatenate(idx_parts), np.concatenate(val_parts)))
    return out


def weighted_rrf(rankings: Sequence[Ranking], weights: Sequence[float], k: int, rrf_k: float = 60.0) -> Ranking:
    """Weighted reciprocal-rank fusion: ``sum_i w_i / (rrf_k + rank_i(d))`` (rank 1 = best)."""
    _check(rankings, weights)

    def contribution(i: int, scores: np.ndarray) -> np.ndarray:
        ranks = np.arange(1, scores.size + 1, dtype=np.float64)
        return weights[i] / (rrf_k + ranks)

    indices, scores = _top_k(_rows(rankings, weights, contribution), k)
    return Ranking(list(rankings[0].query_ids), rankings[0].tool_ids, indices, scores)


def weighted_minmax(rankings: Sequence[Ranking], weights: Sequence[float], k: int) -> Ranking:
    """Weighted sum of per-query min-max normalised scores."""
    _check(rankings, weights)

    def contribution(i: int, scores: np.ndarray) -> np.ndarray:
        if scores.size == 0:
            return scores.astype(np.float64)
        s = scores.astype(np.float64)
        lo, hi = s.min(), s.max()
        return weights[i] * (s - lo) / max(hi - lo, 1e-9)

    indices, scores = _top_k(_rows(rankings, weights, contribution), k)
    return Ranking(list(rankings[0].query_ids), rankings[0].tool_ids, indices, scores)


FUSIONS = {"rrf": weighted_rrf, "minmax": weighted_minmax}

__all__ = ["FUSIONS", "weighted_minmax", "weighted_rrf"]
