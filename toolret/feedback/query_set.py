"""Clicks -> a labelled query set on disk, time-split (read back by :mod:`toolret.feedback.labelled_set`).

``build_feedback(logs, out)`` writes ``out`` atomically, in the catalog layout (:mod:`toolret.catalog.io`,
BEIR's; no ``corpus.jsonl``: the tools are the catalog's):

- ``queries.jsonl``: ``{"_id", "text", "metadata": {"split": "train" | "test"}}`` -- ``test`` is the held-out
  share, never trained on;
- ``qrels/train.tsv``, ``qrels/test.tsv``: ``query-id  corpus-id  score`` (1: the tool was called);
- ``propensities.jsonl``: per (query, tool): ``count`` (clicks merged), ``ranks``, ``propensities``,
  ``sources`` (``receipt`` / ``model``), ``weight`` (the sum of the clicks' clipped inverse-propensity
  weights), ``skipped`` (tools shown above it and not called), ``first_ts`` / ``last_ts``;
- ``feedback.json``: the counts (also printed).

The split is by time: the searches with a click, oldest first; the newest ``holdout`` share of them (at least
one where there are two) is held out (``test``). Clicks of the same query text (whitespace collapsed) and
tool are then merged within each side; a training pair whose query text is also held out is dropped, so no
held-out query is trained on. The queries are the agents' users' words: write them under ``data/feedback/``
(ignored by git, as all of ``data/``), never into git.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from toolret.atomic import atomic_directory
from toolret.errors import CatalogError
from toolret.feedback.clicks import Click, read_clicks
from toolret.feedback.labelled_set import HELD_OUT, PROPENSITIES
from toolret.feedback.position_bias import DEFAULT_CLIP, DEFAULT_ETA, ips_weight

REPORT = "feedback.json"


def normalise(text: str) -> str:
    return " ".join(text.split())


def query_id(text: str) -> str:
    return "fb-" + hashlib.sha1(normalise(text).encode("utf-8")).hexdigest()[:12]


def time_split(clicks: list[Click], holdout: float) -> tuple[list[Click], list[Click], str | None]:
    """``(train, held out, the first held-out search's ts)``: the newest ``holdout`` share of the searches
    with a click held out (at least one where there are two or more), a search's clicks on one side."""
    if not 0 <= holdout < 1:
        raise CatalogError(f"--holdout {holdout!r}: a share in [0, 1)")
    order = sorted({(c.ts, c.search) for c in clicks})
    n_held = math.ceil(holdout * len(order)) if len(order) >= 2 else 0
    n_held = min(n_held, len(order) - 1) if order else 0
    held = set(order[len(order) - n_held:]) if n_held else set()
    return ([c for c in clicks if (c.ts, c.search) not in held], [c for c in clicks if (c.ts, c.search) in held],
            min(held)[0] if held else None)


def merge(clicks: list[Click], split: str, clip: float) -> dict[tuple[str, str], dict[str, Any]]:
    """Clicks of the same query text and tool as one pair (see the module docstring)."""
    pairs: dict[tuple[str, str], dict[str, Any]] = {}
    for c in sorted(clicks, key=lambda c: (c.ts, c.search)):
        key = (normalise(c.query), c.tool)
        p = pairs.setdefault(key, {"query_id": query_id(c.query), "text": key[0], "tool": c.tool, "split": split,
                                   "count": 0, "ranks": [], "propensities": [], "sources": [], "weight": 0.0,
                                   "skipped": [], "first_ts": c.ts, "last_ts": c.ts})
        p["count"] += 1
        p["ranks"].append(c.rank)
        p["propensities"].append(round(c.propensity, 6))
        p["sources"].append(c.source)
        p["weight"] = round(p["weight"] + ips_weight(c.propensity, clip), 6)
        p["skipped"] = sorted(set(p["skipped"]) | set(c.skipped))
        p["last_ts"] = c.ts
    return pairs


def build_feedback(logs: list[str | Path], out: str | Path, *, holdout: float = 0.2, eta: float = DEFAULT_ETA,
                   clip: float = DEFAULT_CLIP) -> dict[str, Any]:
    """Write the labelled query set of the receipt ``logs`` to ``out`` (see the module docstring); the report.

    Raises:
        CatalogError: a missing log, a malformed receipt (naming FILE:LINE), a bad ``holdout``, or no click.
    """
    clicks, counts = read_clicks(logs, eta)
    if not clicks:
        raise CatalogError(f"{', '.join(map(str, logs))}: no call of a tool a search of its session showed: "
                           f"nothing to learn from ({counts})")
    train, held, boundary = time_split(clicks, holdout)
    held_pairs = merge(held, HELD_OUT, clip)
    train_pairs = merge(train, "train", clip)
    held_texts = {text for text, _ in held_pairs}
    leaked = [k for k in train_pairs if k[0] in held_texts]
    for k in leaked:
        del train_pairs[k]
    pairs = [*train_pairs.values(), *held_pairs.values()]
    queries = {(p["query_id"], p["split"]): p["text"] for p in pairs}
    report = {
        "receipts": [str(log) for log in logs], **counts, "clicks": len(clicks),
        "propensity_from_receipts": sum(c.source == "receipt" for c in clicks),
        "holdout": holdout, "held_out_from": boundary, "eta": eta, "clip": clip,
        "train": {"queries": len({p["query_id"] for p in train_pairs.values()}), "pairs": len(train_pairs),
                  "clicks": len(train)},
        "test": {"queries": len({p["query_id"] for p in held_pairs.values()}), "pairs": len(held_pairs),
                 "clicks": len(held)},
        "duplicates_merged": len(clicks) - len(train_pairs) - len(held_pairs) - sum(
            1 for c in train if (normalise(c.query), c.tool) in leaked),
        "train_pairs_dropped_as_held_out": len(leaked),
    }
    with atomic_directory(out) as tmp:
        with open(tmp / "queries.jsonl", "w", encoding="utf-8") as f:
            for (qid, split), text in queries.items():
                f.write(json.dumps({"_id": qid, "text": text, "metadata": {"split": split}}, ensure_ascii=False)
                        + "\n")
        (tmp / "qrels").mkdir()
        for split in ("train", HELD_OUT):
            rows = [p for p in pairs if p["split"] == split]
            if rows:
                (tmp / "qrels" / f"{split}.tsv").write_text(
                    "query-id\tcorpus-id\tscore\n" + "".join(f"{p['query_id']}\t{p['tool']}\t1\n" for p in rows),
                    encoding="utf-8")
        with open(tmp / PROPENSITIES, "w", encoding="utf-8") as f:
            for p in pairs:
                f.write(json.dumps({k: v for k, v in p.items() if k != "text"}, ensure_ascii=False) + "\n")
        (tmp / REPORT).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def format_report(r: dict[str, Any]) -> str:
    return (f"feedback: {r['searches']} searches, {r['calls']} calls: {r['clicks']} clicks credited to a search that "
            f"showed the tool ({r['calls_not_shown']} calls of tools not shown, {r['calls_refused']} refused, "
            f"{r['repeat_calls']} repeats); propensity from the receipt for {r['propensity_from_receipts']}, "
            f"else the position-bias model (eta {r['eta']}); weights clipped at {r['clip']}\n"
            f"  train: {r['train']['queries']} queries, {r['train']['pairs']} (query, tool) pairs\n"
            f"  held out (newest {r['holdout']:.0%}, from {r['held_out_from']}): {r['test']['queries']} queries, "
            f"{r['test']['pairs']} pairs\n"
            f"  duplicates merged: {r['duplicates_merged']}; training pairs dropped as held out: "
            f"{r['train_pairs_dropped_as_held_out']}")


__all__ = ["build_feedback", "format_report", "merge", "query_id", "time_split"]
