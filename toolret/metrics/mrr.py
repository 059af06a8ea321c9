"""Reciprocal rank (MRR when averaged): 1 / rank of the first gold tool, 0 if none.

Without a cutoff the whole ranking counts (ranx ``mrr``, trec_eval ``recip_rank``);
``MRR@k`` scores 0 when the first gold tool is below rank ``k``.
"""

from __future__ import annotations

import numpy as np


def reciprocal_rank(first_hit: np.ndarray, k: int | None = None) -> np.ndarray:
    """Per-query reciprocal rank.

    Args:
        first_hit: ``[n_queries]`` 1-based rank of the first gold tool, 0 when none
            (see :mod:`toolret.metrics.hits`).
        k: optional cutoff (positive int); ranks beyond it score 0.

    Returns:
        ``[n_queries]`` float array in [0, 1].

    Raises:
        ValueError: on a non-positive or non-int ``k``.
    """
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
        raise ValueError(f"cutoff k must be a positive int, got {k!r}")
    first = np.asarray(first_hit, dtype=np.int64)
    found = first > 0
    if k is not None:
        found &= first <= k
    out = np.zeros(first.shape, dtype=np.float64)
    out[found] = 1.0 / first[found]
    return out
