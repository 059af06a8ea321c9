"""Exploration: a share of searches shows the ranking with one random adjacent pair swapped, and every search
receipt then carries each shown tool's propensity.

With ``explore: 0.1`` in the gateway config, each search draws (from one ``random.Random(explore_seed)``, so
a gateway answering the same searches in the same order shows the same orders) whether it explores: with
probability ``explore`` it swaps the shown tools at ranks ``j`` and ``j + 1``, ``j`` uniform in
``1 .. n - 1`` (``n`` tools shown; fewer than 2: nothing to swap). This is the RandPair intervention of
Joachims et al. (2017): a small, local randomisation whose clicks tell apart relevance and position.

A shown tool's ``propensity`` is its expected examination under this policy -- the policy-aware propensity of
Oosterhuis & de Rijke (2020, "Policy-aware unbiased learning to rank for top-k rankings"): the mean, over the
orders the gateway could have shown, of the examination probability of the rank it would be shown at
(:func:`toolret.feedback.position_bias.examination_propensity`), given its rank in the retriever's ranking
(:func:`exposure`). ``toolret feedback`` weighs a click by it. With ``explore: 0`` (the default) orders and
receipts are unchanged.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from toolret.feedback.position_bias import DEFAULT_ETA, examination_propensity


def exposure(ranked: int, n: int, share: float, eta: float = DEFAULT_ETA) -> float:
    """The expected examination of the tool the retriever ranked ``ranked`` (1-based) of ``n`` shown, when a
    ``share`` of searches swap one uniformly drawn adjacent pair (see the module docstring)."""
    stay = examination_propensity(ranked, eta)
    if n < 2 or share <= 0:
        return stay
    moves = [examination_propensity(r, eta) for r in (ranked - 1, ranked + 1) if 1 <= r <= n]
    explored = (sum(moves) + stay * (n - 1 - len(moves))) / (n - 1)
    return (1 - share) * stay + share * explored


class Explorer:
    """Draws, per search, whether and which adjacent pair to swap (see the module docstring)."""

    def __init__(self, share: float, seed: int = 0, eta: float = DEFAULT_ETA) -> None:
        self.share, self.seed, self.eta = share, seed, eta
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def show(self, hits: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """``(hits in the shown order, the receipt's fields)``: ``hits`` as ranked and ``None`` when the share
        is 0; else ``shown`` (``id``, ``score``, ``rank`` shown, ``ranked`` by the retriever, ``propensity``)
        and ``explore`` (``share``, ``seed``, ``eta``, ``swap``: the two shown ranks swapped, or ``None``)."""
        if self.share <= 0:
            return hits, None
        n = len(hits)
        with self._lock:
            explored = self._rng.random() < self.share
            j = self._rng.randrange(n - 1) if explored and n >= 2 else None
        order = list(range(n))
        if j is not None:
            order[j], order[j + 1] = order[j + 1], order[j]
        shown = [hits[i] for i in order]
        entries = [{"id": hits[i]["tool_id"], "score": hits[i]["score"], "rank": r + 1, "ranked": i + 1,
                    "propensity": round(exposure(i + 1, n, self.share, self.eta), 6)} for r, i in enumerate(order)]
        return shown, {"shown": entries, "explore": {"share": self.share, "seed": self.seed, "eta": self.eta,
                                                     "swap": [j + 1, j + 2] if j is not None else None}}


__all__ = ["Explorer", "exposure"]
