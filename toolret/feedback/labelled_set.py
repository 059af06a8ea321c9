"""A ``toolret feedback`` folder read back for ``toolret adapt --feedback`` (see
:mod:`toolret.feedback.query_set` for its layout): the training queries added to the synthetic train split,
the held-out ones as an evaluation catalog. Reads no receipts (the gateway is not imported)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from toolret.catalog.model import Catalog, Query
from toolret.errors import CatalogError
from toolret.feedback.position_bias import DEFAULT_CLIP

PROPENSITIES = "propensities.jsonl"
HELD_OUT = "test"


@dataclass
class FeedbackSet:
    """A feedback folder as read: ``train`` / ``held_out`` queries with their tools (``tool -> weight``);
    pairs of tools the catalog no longer has dropped (``dropped``)."""

    folder: str
    queries: dict[str, Query]
    weights: dict[str, dict[str, float]]
    dropped: int

    def split(self, name: str) -> list[Query]:
        return [q for q in self.queries.values() if q.split == name and self.weights.get(q.id)]


def load_feedback(folder: str | Path, tool_ids: list[str]) -> FeedbackSet:
    """Read a ``toolret feedback`` folder for a catalog of ``tool_ids`` (pairs of other tools are dropped).

    Raises:
        CatalogError: a missing file or a malformed record, naming the file and line.
    """
    folder = Path(folder)
    known = set(tool_ids)
    queries: dict[str, Query] = {}
    for name in ("queries.jsonl", PROPENSITIES):
        if not (folder / name).is_file():
            raise CatalogError(f"--feedback {folder}: no {name} (write one with toolret feedback)")
    for n, line in enumerate((folder / "queries.jsonl").read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            queries[rec["_id"]] = Query(id=rec["_id"], text=rec["text"], split=rec["metadata"]["split"])
        except (ValueError, KeyError, TypeError) as e:
            raise CatalogError(f"{folder / 'queries.jsonl'}:{n}: not a query record ({type(e).__name__}: {e})") from None
        if queries[rec["_id"]].split not in ("train", HELD_OUT):
            raise CatalogError(f"{folder / 'queries.jsonl'}:{n}: split must be train or {HELD_OUT}")
    weights: dict[str, dict[str, float]] = {}
    dropped = 0
    for n, line in enumerate((folder / PROPENSITIES).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{folder / PROPENSITIES}:{n}"
        try:
            rec = json.loads(line)
            qid, tool, weight = rec["query_id"], rec["tool"], float(rec["weight"])
        except (ValueError, KeyError, TypeError) as e:
            raise CatalogError(f"{where}: not a propensity record ({type(e).__name__}: {e})") from None
        if qid not in queries:
            raise CatalogError(f"{where}: query {qid!r} is not in queries.jsonl")
        if not weight >= 1:
            raise CatalogError(f"{where}: weight {weight!r} must be at least 1 (clipped inverse propensities)")
        if tool not in known:
            dropped += 1
            continue
        weights.setdefault(qid, {})[tool] = weight
    return FeedbackSet(str(folder), queries, weights, dropped)


def with_feedback(synthetic: Catalog, feedback: FeedbackSet, *, weighted: bool, clip: float = DEFAULT_CLIP) -> Catalog:
    """``synthetic`` with the feedback's training queries added to its train split (never its held-out ones).
    ``weighted``: each (query, tool) pair ``round(weight)`` times, at most ``clip`` (the trainer's loss has no
    sample weights: importance by replication); else once."""
    queries, qrels = list(synthetic.queries), dict(synthetic.qrels)
    for q in feedback.split("train"):
        for tool, weight in sorted(feedback.weights[q.id].items()):
            copies = min(max(1, round(weight)), int(clip)) if weighted else 1
            for c in range(copies):
                qid = f"{q.id}-{tool}-{c}"
                queries.append(Query(id=qid, text=q.text, split="train"))
                qrels[qid] = {tool: 1}
    return Catalog(synthetic.name, synthetic.tools, queries, qrels,
                   {**synthetic.provenance, "feedback": {"folder": feedback.folder, "weighted": weighted}})


def held_out_catalog(tools: Catalog, feedback: FeedbackSet) -> Catalog:
    """The held-out feedback queries over ``tools`` as an evaluation catalog (split ``test``)."""
    held = feedback.split(HELD_OUT)
    return Catalog(f"{tools.name}-feedback", list(tools.tools), held,
                   {q.id: {t: 1 for t in feedback.weights[q.id]} for q in held}, {"purpose": "evaluation"})


__all__ = ["HELD_OUT", "PROPENSITIES", "FeedbackSet", "held_out_catalog", "load_feedback", "with_feedback"]
