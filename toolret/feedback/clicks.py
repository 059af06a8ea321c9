"""Receipts -> clicks: a tool called after a search of the same session that showed it.

A ``call`` receipt is credited to the latest earlier ``search`` receipt of its session whose ``shown`` list
holds the called tool (receipts ordered by ``ts``, then by their place in the logs). That search's query is
labelled with the tool, at the rank it was shown (its ``rank``, else its place in ``shown``) and with the
propensity of that: the receipt's own where exploration wrote one (:mod:`toolret.gateway.explore`), else
:func:`~toolret.feedback.position_bias.examination_propensity` of the shown rank. Several tools called after
one search are several clicks of it; a tool called twice after it is one. The tools shown above a clicked
tool that were not clicked after that search are its ``skipped``. A call of a tool no earlier search of the
session showed is counted, not credited. A call the tool answered with an error still is the agent's choice
and counts; a call the gateway refused (``error``: an unknown tool, a down server) does not.

An interleaved search (``interleave`` in its receipt) gives its clicks the ``team`` of the shown entry
(:mod:`toolret.feedback.interleaving`).

Receipts written before ranks and propensities were (``shown``: ``[{"id", "score"}]``) are read as ranked
in their order and weighed by the default model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolret.errors import CatalogError
from toolret.feedback.position_bias import DEFAULT_ETA, examination_propensity
from toolret.gateway.receipts import iter_receipts, log_files


@dataclass
class Click:
    """One tool called after one search: the search's ``query``, ``ts`` and ``session``, the ``tool``, the
    ``rank`` it was shown at, its ``propensity`` and where that came from (``receipt`` or ``model``), and
    the tools shown above it and not clicked (``skipped``)."""

    query: str
    ts: str
    session: str
    search: int  # the search's place among all searches read (one search, several clicks)
    tool: str
    rank: int
    propensity: float
    source: str
    skipped: list[str] = field(default_factory=list)
    team: str | None = None  # interleaved search: the team that showed the tool (toolret.feedback.interleaving)
    interleave: dict[str, Any] | None = None  # interleaved search: the receipt's ``interleave`` (the two models)


@dataclass
class _Search:
    where: str
    rec: dict[str, Any]
    ids: list[str]
    clicked: list[str] = field(default_factory=list)


def _shown(where: str, rec: dict[str, Any]) -> list[dict[str, Any]]:
    shown = rec.get("shown")
    if not isinstance(shown, list) or not all(isinstance(h, dict) and isinstance(h.get("id"), str) for h in shown):
        raise CatalogError(f"{where}: search receipt: 'shown' must be a list of {{\"id\": ...}} entries")
    if not isinstance(rec.get("query"), str) or not rec["query"].strip():
        raise CatalogError(f"{where}: search receipt: 'query' must be a non-empty string")
    for h in shown:
        p = h.get("propensity")
        if p is not None and (not isinstance(p, (int, float)) or not 0 < p <= 1):
            raise CatalogError(f"{where}: search receipt: propensity {p!r} of {h['id']!r} is not in (0, 1]")
    return shown


def read_clicks(logs: list[str | Path], eta: float = DEFAULT_ETA) -> tuple[list[Click], dict[str, int]]:
    """The clicks of the receipt logs ``logs`` (each with its rotated backups) and counts of what was read.

    Raises:
        CatalogError: a log that does not exist, or a receipt without what a click needs (naming FILE:LINE).
    """
    events = []
    for i, log in enumerate(logs):
        if not log_files(log):
            raise CatalogError(f"--receipts {log}: no receipts file (nor rotated backups)")
        for j, (where, rec) in enumerate(iter_receipts(log)):
            if rec.get("event") in ("search", "call"):
                if not isinstance(rec.get("ts"), str):
                    raise CatalogError(f"{where}: {rec.get('event')} receipt without a 'ts' time")
                events.append((rec["ts"], i, j, where, rec))
    events.sort(key=lambda e: e[:3])
    searches: list[_Search] = []
    latest: dict[str, list[int]] = {}  # session -> its searches, oldest first
    counts = {"searches": 0, "calls": 0, "calls_credited": 0, "calls_not_shown": 0, "calls_refused": 0,
              "repeat_calls": 0}
    for _, _, _, where, rec in events:
        session = str(rec.get("session"))
        if rec["event"] == "search":
            shown = _shown(where, rec)
            latest.setdefault(session, []).append(len(searches))
            searches.append(_Search(where, rec, [h["id"] for h in shown]))
            counts["searches"] += 1
            continue
        counts["calls"] += 1
        tool = rec.get("tool")
        if not isinstance(tool, str):
            raise CatalogError(f"{where}: call receipt: 'tool' must be the called tool's id")
        if rec.get("error"):
            counts["calls_refused"] += 1
            continue
        hit = next((s for s in reversed(latest.get(session, [])) if tool in searches[s].ids), None)
        if hit is None:
            counts["calls_not_shown"] += 1
        elif tool in searches[hit].clicked:
            counts["repeat_calls"] += 1
        else:
            searches[hit].clicked.append(tool)
            counts["calls_credited"] += 1
    clicks = []
    for n, s in enumerate(searches):
        shown = s.rec["shown"]
        for tool in s.clicked:
            place = s.ids.index(tool)
            entry = shown[place]
            rank = entry.get("rank") if isinstance(entry.get("rank"), int) else place + 1
            from_receipt = entry.get("propensity") is not None
            clicks.append(Click(query=s.rec["query"], ts=s.rec["ts"], session=str(s.rec.get("session")), search=n,
                                tool=tool, rank=rank,
                                propensity=float(entry["propensity"]) if from_receipt
                                else examination_propensity(rank, eta),
                                source="receipt" if from_receipt else "model",
                                skipped=[t for t in s.ids[:place] if t not in s.clicked],
                                team=entry.get("team") if isinstance(s.rec.get("interleave"), dict) else None,
                                interleave=s.rec["interleave"] if isinstance(s.rec.get("interleave"), dict)
                                else None))
    return clicks, counts


__all__ = ["Click", "read_clicks"]
