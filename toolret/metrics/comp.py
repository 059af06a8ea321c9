"""COMP@k (Sufficiency@k in the QTA paper): 1 if every gold tool is in the top k, else 0.

A query with ``|gold| > k`` always scores 0. ``comp@k <= recall@k`` and
``comp@k == 1`` exactly when ``recall@k == 1``.
"""

from __future__ import annotations

import numpy as np

from toolret.metrics.hits import check_k


def comp_at_k(hits: np.ndarray, n_gold: np.ndarray, k: int) -> np.ndarray:
    """Per-query completeness at k.

    Args:
        hits: ``[n_queries, depth]`` bool hit array (see :mod:`toolret.metrics.hits`);
            hits must be duplicate-free (as built by
            :func:`~toolret.metrics.hits.build_hit_table`).
        n_gold: ``[n_queries]`` gold-set sizes, all >= 1.
        k: cutoff, ``1 <= k <= depth``.

    Returns:
        ``[n_queries]`` float array of 0.0 / 1.0.
    """
    k = check_k(k, hits.shape[1])
    return (hits[:, :k].sum(axis=1) >= n_gold).astype(np.float64)
