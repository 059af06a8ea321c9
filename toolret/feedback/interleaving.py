"""Team-draft interleaving of the champion and the challenger, and the verdict of the agents' calls.

:func:`~toolret.feedback.team_draft.team_draft` is the algorithm of Radlinski, Kurup & Joachims (2008, "How does clickthrough data reflect
retrieval quality?", section 4.2, Algorithm 2): two teams pick in turn, the team with fewer picks first and a
coin toss when both have as many; a team picks its highest-ranked tool not yet shown. Each shown tool is
credited to the team that picked it.

A search the gateway interleaved (``toolret.gateway``, ``interleave`` in its config) writes a receipt whose
``shown`` entries carry ``team`` (``champion`` / ``challenger``) and whose ``interleave`` names the two
models. :func:`interleaving_credit` reads the clicks of those receipts (:func:`toolret.feedback.clicks.read_clicks`:
a call credited to the latest search of its session that showed the tool) and counts per search the clicks
on each team's tools; :func:`interleaving_verdict` is the binomial sign test over the searches whose credit
is not tied (Chapelle, Joachims, Radlinski & Yue 2012, "Large-scale validation and analysis of interleaved
search evaluation", section 3: a search is won by the team with more clicks; ties carry no preference).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolret.errors import ToolretError
from toolret.feedback.clicks import read_clicks
from toolret.feedback.team_draft import CHALLENGER, CHAMPION, team_draft
ALPHA = 0.05


@dataclass(frozen=True)
class Credit:
    """One interleaved search that got a click: its place among the searches read, the two models it
    interleaved (``pair``: the receipt's ``interleave`` champion and challenger) and the clicks on each
    team's tools."""

    search: int
    pair: tuple[str, str]
    champion: int
    challenger: int


def interleaving_credit(logs: list[str | Path],
                        pair: tuple[str, str] | None = None) -> tuple[list[Credit], dict[str, int]]:
    """The credit of every interleaved search with a click in the receipt ``logs`` (of the models ``pair``
    only, ``(champion, challenger)`` as the receipts name them, where given) and the counts read.

    Raises:
        CatalogError: a missing log or a malformed receipt (naming FILE:LINE);
        ToolretError: an interleaved receipt whose clicked tool has no ``team`` of the two.
    """
    clicks, counts = read_clicks(logs)
    per: dict[int, dict[str, Any]] = {}
    for c in clicks:
        if c.interleave is None:
            continue
        names = (str(c.interleave.get(CHAMPION)), str(c.interleave.get(CHALLENGER)))
        if pair is not None and names != tuple(pair):
            continue
        if c.team not in (CHAMPION, CHALLENGER):
            raise ToolretError(f"search at {c.ts} ({c.query!r}): interleaved, but the clicked tool {c.tool!r} has "
                               f"team {c.team!r}, not {CHAMPION} or {CHALLENGER}")
        entry = per.setdefault(c.search, {"pair": names, CHAMPION: 0, CHALLENGER: 0})
        entry[c.team] += 1
    credits = [Credit(s, e["pair"], e[CHAMPION], e[CHALLENGER]) for s, e in sorted(per.items())]
    return credits, {**counts, "interleaved_searches_with_clicks": len(credits)}


def interleaving_verdict(credits: list[Credit], alpha: float = ALPHA) -> dict[str, Any]:
    """The challenger's wins and losses over the searches with a non-tied credit and the two-sided binomial
    sign test of ``wins`` out of ``n`` against 1/2 (:func:`scipy.stats.binomtest`); ``challenger_wins``:
    more wins than losses with ``p < alpha``."""
    from scipy.stats import binomtest

    wins = sum(c.challenger > c.champion for c in credits)
    losses = sum(c.challenger < c.champion for c in credits)
    n = wins + losses
    p = float(binomtest(wins, n, 0.5).pvalue) if n else 1.0
    return {"test": "binomial sign test (two-sided) over interleaved searches with a non-tied credit",
            "searches_with_clicks": len(credits), "n": n, "wins": wins, "losses": losses,
            "ties": len(credits) - n, "p": round(p, 6), "alpha": alpha,
            "challenger_wins": wins > losses and p < alpha}


__all__ = ["ALPHA", "CHALLENGER", "CHAMPION", "Credit", "interleaving_credit", "interleaving_verdict", "team_draft"]
