"""Interleaving in the gateway: a share of searches shows the adapt champion's and challenger's rankings
team-draft interleaved (:func:`toolret.feedback.interleaving.team_draft`), and the receipt says which model
contributed each shown tool (``team``) and which two models were interleaved (``interleave``).

With ``interleave: 0.1`` in the gateway config each search draws (one ``random.Random(interleave_seed)``)
whether it interleaves; the same generator tosses team draft's coins. ``toolret promote --receipts`` credits
the calls to the teams (:func:`toolret.feedback.interleaving.interleaving_credit`).
"""

from __future__ import annotations

import random
import threading
from typing import Any

from toolret.feedback.team_draft import CHALLENGER, CHAMPION, team_draft


class Interleaver:
    """Draws, per search, whether to interleave; interleaves two hit lists (see the module docstring)."""

    def __init__(self, share: float, seed: int = 0) -> None:
        self.share, self.seed = share, seed
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def draw(self) -> bool:
        if self.share <= 0:
            return False
        with self._lock:
            return self._rng.random() < self.share

    def show(self, champion: list[dict[str, Any]], challenger: list[dict[str, Any]], k: int,
             pair: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """``(hits shown, the receipt's fields)``: ``shown`` entries with ``id``, ``score`` (the contributing
        model's), ``rank`` and ``team``; ``interleave``: ``pair`` (``champion`` / ``challenger`` names),
        ``share``, ``seed``."""
        by_team = {"a": {h["tool_id"]: h for h in champion}, "b": {h["tool_id"]: h for h in challenger}}
        with self._lock:
            ids, teams = team_draft([h["tool_id"] for h in champion], [h["tool_id"] for h in challenger], k,
                                    self._rng)
        hits = [by_team[t][i] for i, t in zip(ids, teams)]
        entries = [{"id": h["tool_id"], "score": h["score"], "rank": r + 1,
                    "team": CHAMPION if t == "a" else CHALLENGER} for r, (h, t) in enumerate(zip(hits, teams))]
        return hits, {"shown": entries, "interleave": {**pair, "share": self.share, "seed": self.seed}}


__all__ = ["Interleaver"]
