"""Precision@k = |gold ∩ top-k| / k.

Rankings shorter than ``k`` are padded with non-relevant items (the denominator stays
``k``), as in trec_eval's ``P_k``.
"""

from __future__ import annotations

import numpy as np

from toolret.metrics.hits import check_k


def precision_at_k(hits: np.ndarray, k: int) -> np.ndarray:
    """Per-query Precision@k.

    Args:
        hits: ``[n_queries, depth]`` bool hit array (see :mod:`toolret.metrics.hits`).
        k: cutoff, ``1 <= k <= depth``.

    Returns:
        ``[n_queries]`` float array in [0, 1].
    """
    k = check_k(k, hits.shape[1])
    return hits[:, :k].sum(axis=1) / k
