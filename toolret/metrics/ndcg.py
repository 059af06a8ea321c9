"""NDCG@k with binary gains.

``DCG@k = sum_{r=1..k} rel_r / log2(r + 1)`` with ``rel_r`` in {0, 1}; the ideal DCG puts
``min(|gold|, k)`` relevant items at the top ranks. Identical to trec_eval's
``ndcg_cut_k`` and ranx's ``ndcg@k`` when every gold tool has relevance 1.
"""

from __future__ import annotations

import numpy as np

from toolret.metrics.hits import check_k


def discounts(k: int) -> np.ndarray:
    """``[k]`` array of ``1 / log2(r + 1)`` for ranks ``r = 1..k``."""
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def ndcg_at_k(hits: np.ndarray, n_gold: np.ndarray, k: int) -> np.ndarray:
    """Per-query binary NDCG@k.

    Args:
        hits: ``[n_queries, depth]`` bool hit array (see :mod:`toolret.metrics.hits`).
        n_gold: ``[n_queries]`` gold-set sizes, all >= 1.
        k: cutoff, ``1 <= k <= depth``.

    Returns:
        ``[n_queries]`` float array in [0, 1].
    """
    k = check_k(k, hits.shape[1])
    disc = discounts(k)
    dcg = hits[:, :k].astype(np.float64) @ disc
    ideal_cum = np.cumsum(disc)
    n_ideal = np.minimum(np.asarray(n_gold, dtype=np.int64), k)
    if np.any(n_ideal < 1):
        raise ValueError("NDCG is undefined for a query with an empty gold set")
    return dcg / ideal_cum[n_ideal - 1]
