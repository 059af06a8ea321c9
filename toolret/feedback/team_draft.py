"""Team-draft interleaving (Radlinski, Kurup & Joachims 2008, "How does clickthrough data reflect retrieval
quality?", section 4.2, Algorithm 2): two teams pick in turn, the team with fewer picks first and a coin toss
when both have as many; a team picks its highest-ranked tool not yet shown. Imports nothing of the gateway
(which uses it: :mod:`toolret.gateway.interleave`); the credit of calls is :mod:`toolret.feedback.interleaving`'s.
"""

from __future__ import annotations

import random

from toolret.errors import ToolretError

CHAMPION, CHALLENGER = "champion", "challenger"


def team_draft(a: list[str], b: list[str], k: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """``(shown, teams)``: team-draft interleaving (Radlinski et al. 2008, Algorithm 2) of the rankings ``a``
    (team ``"a"``) and ``b`` (team ``"b"``), at most ``k`` tools; ``teams[i]`` is the team that picked
    ``shown[i]``. Picking goes on while both rankings hold a tool not yet shown; ``rng.random() < 0.5``
    is the coin (team ``a`` first) when both teams have as many picks."""
    if len(set(a)) != len(a) or len(set(b)) != len(b):
        raise ToolretError("team_draft: a ranking lists a tool twice")
    shown: list[str] = []
    teams: list[str] = []
    seen: set[str] = set()
    picks = {"a": 0, "b": 0}
    while len(shown) < k and any(t not in seen for t in a) and any(t not in seen for t in b):
        if picks["a"] < picks["b"] or (picks["a"] == picks["b"] and rng.random() < 0.5):
            team, ranking = "a", a
        else:
            team, ranking = "b", b
        tool = next(t for t in ranking if t not in seen)
        shown.append(tool)
        teams.append(team)
        seen.add(tool)
        picks[team] += 1
    return shown, teams


__all__ = ["CHALLENGER", "CHAMPION", "team_draft"]
