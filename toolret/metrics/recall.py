"""Recall@k = |gold ∩ top-k| / |gold|.

The denominator is the full gold-set size, not ``min(k, |gold|)``: a query with more gold
tools than ``k`` can never reach 1 (this matches trec_eval's ``recall_k`` and ranx).
"""

from __future__ import annotations

import numpy as np

from toolret.metrics.hits import check_k


def recall_at_k(hits: np.ndarray, n_gold: np.ndarray, k: int) -> np.ndarray:
    """Per-query Recall@k.

    Args:
        hits: ``[n_queries, depth]`` bool hit array (see :mod:`toolret.metrics.hits`).
        n_gold: ``[n_queries]`` gold-set sizes, all >= 1.
        k: cutoff, ``1 <= k <= depth``.

    Returns:
        ``[n_queries]`` float array in [0, 1].
    """
    k = check_k(k, hits.shape[1])
    return hits[:, :k].sum(axis=1) / n_gold
