"""QTA's reward (paper eq. 4): how well a query ranks its gold tools under the frozen retriever.

For a gold tool at 1-based rank ``idx`` in the retriever's ranking of the WHOLE catalog::

    score(idx) = 1 / log2(idx + 1.1)              if idx <= n
               = -(idx - n) / log2(idx / n + 1)   if idx > n

and a query's reward is the sum over its gold tools. Example (n = 10): ranks {1, 12} ->
1/log2(2.1) - 2/log2(2.2) = 0.9343 - 1.7582 = -0.8239.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np


def rank_score(idx: int, n: int = 10) -> float:
    """Eq. 4 for one gold tool at 1-based rank ``idx`` with cutoff ``n``."""
    if idx < 1:
        raise ValueError(f"ranks are 1-based, got {idx}")
    if idx <= n:
        return 1.0 / math.log2(idx + 1.1)
    return -(idx - n) / math.log2(idx / n + 1)


def query_reward(gold_ranks: Iterable[int], n: int = 10) -> float:
    """Eq. 4 summed over a query's gold tools."""
    return float(sum(rank_score(int(r), n) for r in gold_ranks))


def gold_ranks(ranked: Sequence[int], gold: Sequence[int]) -> list[int]:
    """1-based ranks of the ``gold`` tool positions in ``ranked`` (tool positions, best first, every tool).

    Raises:
        ValueError: a gold tool missing from the ranking (the reward needs the whole catalog ranked).
    """
    where = {int(t): i + 1 for i, t in enumerate(np.asarray(ranked).tolist()) if t >= 0}
    missing = [g for g in gold if int(g) not in where]
    if missing:
        raise ValueError(f"gold tool positions {missing} are not in the ranking ({len(where)} tools ranked)")
    return [where[int(g)] for g in gold]


__all__ = ["gold_ranks", "query_reward", "rank_score"]
