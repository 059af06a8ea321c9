"""Round-trip consistency of synthetic queries (Re-Invoke Sec. 6.2, after Alberti et al. 2019).

A synthetic query is consistent if, searched against the PLAIN tool documents (no expansion, else the
query would find its own copy), it retrieves the tool it was generated from within the top-k. The
metric is recall@k with that tool as the only gold item, averaged over all parsed synthetic queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolret.evaluate_api import Qrels, Run, evaluate
from toolret.roles import Retriever


def round_trip_consistency(records: Sequence[dict[str, Any]], retriever: Retriever, ks: Sequence[int] = (1, 5, 10),
                           n: int | None = None) -> dict[str, Any]:
    """Recall@k of each synthetic query retrieving its own tool.

    Args:
        records: synthetic-query records (``tool_id``, ``sample_index``, ``query``).
        retriever: a backbone already indexed on the plain tool documents.
        ks: cutoffs.
        n: only the first ``n`` samples per tool (default: all).

    Returns:
        ``{"n_queries", "recall@k": ..., "ci95": {...}}``.
    """

    use = [r for r in records if r.get("query") and (n is None or r["sample_index"] < n)]
    if not use:
        return {"n_queries": 0}
    qids = [f"{r['tool_id']}#{r['sample_index']}" for r in use]
    ranking = retriever.search([r["query"] for r in use], max(ks), qids)
    qrels = Qrels.from_gold({q: [r["tool_id"]] for q, r in zip(qids, use)})
    res = evaluate(Run.from_ranking(ranking), qrels, ks=list(ks), metrics=["recall"], bootstrap_samples=1000, seed=13)
    return {"n_queries": len(use), **{m: float(v) for m, v in res.means.items()},
            "ci95": {m: [float(x) for x in ci] for m, ci in res.ci.items()}}
