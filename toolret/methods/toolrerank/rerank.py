"""One query through ToolRerank (Sec. 3.1) or Rerank-m, and the dev-split grid search (Sec. 4.1, Table 2).

The overall procedure composes the steps of :mod:`algorithms`: candidates ``C`` (first stage) ->
Adaptive Truncation ``T`` -> cross-encoder order ``R`` -> Hierarchy-Aware Reranking ``F`` (Alg. 1 with the
extended list, or Alg. 2, or nothing) -> ``F`` followed by the candidates truncation dropped.
:class:`QueryView` holds one query's candidates with their scores and pairwise similarities, so the grid
re-runs the procedure under every setting without scoring anything twice.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolret.methods.toolrerank.algorithms import (adaptive_truncation, extended_f1, multi_tool_rerank, rerank_order,
                                                   single_tool_rerank)
from toolret.metrics import per_query_metrics
from toolret.roles import Ranking
from toolret.retrieval.fusion import weighted_rrf

MODES = ("none", "single", "multi")


@dataclass(frozen=True)
class Setting:
    """The hyperparameters of one ToolRerank run."""

    m_s: int
    m_u: int
    tau_s: float
    tau_m: float
    n: int
    extend_unseen: bool = True
    extend_seen: bool = False


@dataclass
class Library:
    """The indexed tool library as ToolRerank sees it (positions = the corpus order)."""

    parents: list[str]  # parent tool of each API
    seen: np.ndarray  # what Adaptive Truncation asks of each API (api- or tool-level, see hierarchy.SeenSet)
    seen_tools: set[str]  # parent tools seen in training (extended list: seen vs unseen tools)
    by_tool: dict[str, list[int]]  # parent tool -> its APIs (library order)


@dataclass
class QueryView:
    """One query's first-stage candidates, a lazy score function and the candidates' similarities."""

    candidates: list[int]
    score_fn: Callable[[list[int]], np.ndarray]  # library positions -> cross-encoder scores
    sim_fn: Callable[[list[int]], np.ndarray] | None = None  # library positions -> pairwise similarity matrix
    _scores: dict[int, float] = field(default_factory=dict)

    def scores(self, items: Sequence[int]) -> list[float]:
        missing = [i for i in dict.fromkeys(items) if i not in self._scores]
        if missing:
            self._scores.update(zip(missing, map(float, self.score_fn(missing))))
        return [self._scores[i] for i in items]


def rerank_m(view: QueryView, m: int) -> list[int]:
    """Rerank-m (paper baseline): the top ``m`` candidates in cross-encoder order, then the rest."""
    top = view.candidates[:m]
    s = view.scores(top)
    return [top[i] for i in rerank_order(s)] + view.candidates[m:]


def toolrerank(view: QueryView, mode: str, setting: Setting, lib: Library,
               info: dict[str, Any] | None = None) -> list[int]:
    """ToolRerank for one query (Sec. 3.1); ``mode`` is the query type's algorithm (``single`` = Alg. 1,
    ``multi`` = Alg. 2, ``none`` = truncation + cross-encoder only). ``info`` (optional) receives the sizes
    of T, F1 and the extension."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    cands = view.candidates
    t = [cands[p] for p in adaptive_truncation([bool(lib.seen[c]) for c in cands], setting.m_s, setting.m_u)]
    s = view.scores(t)
    order = rerank_order(s)
    r, rs = [t[i] for i in order], [s[i] for i in order]
    tools = [lib.parents[c] for c in r]
    extended = 0
    if mode == "single":
        f1_pos, f2_pos, x = single_tool_rerank(tools, rs, setting.tau_s)
        f1 = [r[i] for i in f1_pos]
        x_ordered = [tl for tl in dict.fromkeys(tools) if tl in x]
        extend = [tl for tl in x_ordered
                  if (setting.extend_seen if tl in lib.seen_tools else setting.extend_unseen)]
        if extend:
            extra = [a for tl in extend for a in lib.by_tool.get(tl, []) if a not in set(f1)]
            if extra:
                items = f1 + [a for a in dict.fromkeys(extra)]
                extended = len(items) - len(f1)
                f1 = extended_f1(f1, extra, dict(zip(items, view.scores(items))))
        in_f1 = set(f1)
        f = f1 + [r[i] for i in f2_pos if r[i] not in in_f1]
        f1_len = len(f1)
    elif mode == "multi":
        if view.sim_fn is None:
            raise ValueError("Alg. 2 needs the similarity of the results (no sim_fn)")
        f1_pos, f2_pos = multi_tool_rerank(tools, rs, view.sim_fn(r), setting.tau_m, setting.n)
        f = [r[i] for i in f1_pos] + [r[i] for i in f2_pos]
        f1_len = len(f1_pos)
    else:
        f, f1_len = r, len(r)
    if info is not None:
        info.update({"t": len(t), "extended": extended, "f1": f1_len})
    kept = set(f)
    return f + [c for c in cands if c not in kept]


# ------------------------------------------------------------------------------------ grid search
def _closeness(values: dict[str, Any], grid: dict[str, list], preferred: dict[str, Any]) -> int:
    """Distance (in grid steps) of a setting to the preferred one (the paper's best): the tie-break."""
    out = 0
    for k, v in values.items():
        options = list(grid[k])
        p = preferred.get(k)
        if p in options and v in options:
            out += abs(options.index(v) - options.index(p))
    return out


def grid_search(views: Sequence[QueryView], modes: Sequence[str], gold: Sequence[set[int]], lib: Library,
                grid: dict[str, list], metric: str, preferred: dict[str, Any], *,
                extend_unseen: bool = True, extend_seen: bool = False) -> dict[str, Any]:
    """The best (m_s, m_u, tau_s, tau_m, n) on the dev queries by mean ``metric`` (e.g. ``recall@5``).

    Exact and cheap: a query's result depends on ``tau_s`` only if it is routed to Alg. 1 and on
    (``tau_m``, ``n``) only if routed to Alg. 2, so for every (m_s, m_u) the two are chosen independently
    on their queries and the mean is the sum of both parts. Ties go to the setting closest to
    ``preferred`` (per parameter, in grid steps).
    """

    k = int(metric.split("@")[1]) if "@" in metric else 5
    qid = [str(i) for i in range(len(views))]
    gold_map = {q: {str(t) for t in g} for q, g in zip(qid, gold)}

    def total(rows: list[int], make: Callable[[int], list[int]]) -> float:
        if not rows:
            return 0.0
        ranked = {qid[i]: [str(t) for t in make(i)] for i in rows}
        _, pq = per_query_metrics(ranked, {qid[i]: gold_map[qid[i]] for i in rows}, [k])
        return float(pq[metric].sum())

    by_mode = {m: [i for i, mm in enumerate(modes) if mm == m] for m in MODES}
    base = Setting(0, 0, 0.0, 0.0, 0, extend_unseen, extend_seen)
    table = []
    best: tuple | None = None
    for m_s, m_u in itertools.product(grid["m_s"], grid["m_u"]):
        s0 = Setting(m_s, m_u, base.tau_s, base.tau_m, base.n, extend_unseen, extend_seen)
        part_none = total(by_mode["none"], lambda i: toolrerank(views[i], "none", s0, lib))
        singles = []
        for tau_s in grid["tau_s"]:
            s = Setting(m_s, m_u, tau_s, 0.0, 0, extend_unseen, extend_seen)
            score = total(by_mode["single"], lambda i: toolrerank(views[i], "single", s, lib))
            singles.append((score, -_closeness({"tau_s": tau_s}, grid, preferred), tau_s))
        multis = []
        for tau_m, n in itertools.product(grid["tau_m"], grid["n"]):
            s = Setting(m_s, m_u, 0.0, tau_m, n, extend_unseen, extend_seen)
            score = total(by_mode["multi"], lambda i: toolrerank(views[i], "multi", s, lib))
            multis.append((score, -_closeness({"tau_m": tau_m, "n": n}, grid, preferred), tau_m, n))
        bs, bm = max(singles), max(multis)
        mean = (part_none + bs[0] + bm[0]) / max(1, len(views))
        row = {"m_s": m_s, "m_u": m_u, "tau_s": bs[2], "tau_m": bm[2], "n": bm[3], metric: mean}
        table.append(row)
        key = (round(mean, 12), -_closeness({"m_s": m_s, "m_u": m_u, "tau_s": bs[2], "tau_m": bm[2], "n": bm[3]},
                                            grid, preferred))
        if best is None or key > best[0]:
            best = (key, row)
    assert best is not None
    chosen = dict(best[1])
    return {"selected": {k2: chosen[k2] for k2 in ("m_s", "m_u", "tau_s", "tau_m", "n")}, "dev_" + metric: chosen[metric],
            "n_queries": len(views), "modes": {m: len(v) for m, v in by_mode.items()}, "by_truncation": table}


def rank_rows(rows: list[list[int]], query_ids: list[str], tool_ids: list[str], k: int):
    """Ranked tool positions per query as a :class:`~toolret.roles.Ranking` of width
    ``min(k, longest row)`` with rank-derived scores ``1 / (1 + rank0)``."""

    width = min(k, max((len(r) for r in rows), default=0))
    indices = np.full((len(rows), width), -1, dtype=np.int64)
    scores = np.full((len(rows), width), -np.inf, dtype=np.float32)
    for r, items in enumerate(rows):
        items = items[:width]
        indices[r, : len(items)] = items
        scores[r, : len(items)] = 1.0 / (1.0 + np.arange(len(items)))
    return Ranking(query_ids, tool_ids, indices, scores)


def fuse_with_first_stage(reranked, first, ce_weight: float, k: int):
    """The reranked order fused with the first stage's by weighted reciprocal rank (reranker ``ce_weight``,
    first stage ``1 - ce_weight``); ``ce_weight`` 1 is the reranked order itself (the paper)."""
    if ce_weight >= 1.0:
        return reranked

    return weighted_rrf([reranked, first], [ce_weight, 1.0 - ce_weight], k)


def select_ce_weight(reranked: Sequence[list[int]], first: Sequence[list[int]], gold: Sequence[set[int]],
                     weights: Sequence[float], metric: str) -> dict[str, Any]:
    """The ``ce_weight`` of :func:`fuse_with_first_stage` with the best mean ``metric`` on the dev queries
    (``reranked`` / ``first``: each query's reranked and first-stage candidate positions); ties go to the
    larger weight (the closer to the paper's reranked order alone)."""

    k = int(metric.split("@")[1]) if "@" in metric else 5
    qid = [str(i) for i in range(len(reranked))]
    gold_map = {q: {str(t) for t in g} for q, g in zip(qid, gold)}
    tool_ids = [str(t) for t in range(1 + max((max(r, default=-1) for r in [*reranked, *first]), default=0))]
    width = max((len(r) for r in [*reranked, *first]), default=1)
    a, b = rank_rows(list(reranked), qid, tool_ids, width), rank_rows(list(first), qid, tool_ids, width)
    table = []
    for w in weights:
        fused = fuse_with_first_stage(a, b, w, width)
        ranked = {qid[i]: [str(t) for t in fused.indices[i] if t >= 0] for i in range(len(qid))}
        table.append({"ce_weight": w, metric: float(per_query_metrics(ranked, gold_map, [k])[1][metric].mean())})
    best = max(table, key=lambda row: (round(row[metric], 12), row["ce_weight"]))
    return {"selected": best["ce_weight"], "dev_" + metric: best[metric], "by_weight": table}


__all__ = ["Library", "MODES", "QueryView", "Setting", "fuse_with_first_stage", "grid_search", "rank_rows",
           "rerank_m", "select_ce_weight", "toolrerank"]
