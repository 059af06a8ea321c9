"""Multi-view similarity ranking (Re-Invoke Sec. 3.3, Appendix C).

Every intent ranks all tools on its own. Candidates from all intents are ordered by the tuple
``(rank of the tool within its intent, similarity higher first)``: each intent's top tool comes before
any intent's second tool, and within the same rank the more similar (intent, tool) pair comes first.
A tool proposed by several intents keeps its first (best) position; the first ``k`` distinct tools are
the result. With a single intent this is the plain similarity ranking.

Exact similarity ties inside one intent follow the backbone's own order (``tiebreak``) or tool index; ties
on (rank, similarity) across intents are broken by intent order, so the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Candidate:
    tool: int  # tool position in the catalog
    similarity: float  # similarity between the tool and the intent that proposed it
    rank: int  # 0-based rank of the tool within that intent
    intent: int  # which intent proposed it


def multiview_rank(intent_scores: Sequence[Sequence[float]] | np.ndarray, k: int,
                   tiebreak: np.ndarray | None = None) -> list[Candidate]:
    """The multi-view top-``k`` tools of one user query.

    Args:
        intent_scores: ``[n_intents, n_tools]`` similarity of every intent to every tool
            (higher = more similar; ``-inf`` = never retrieve).
        k: how many distinct tools to return.
        tiebreak: optional ``[n_intents, n_tools]`` secondary key (lower first) for tools with EXACTLY
            equal similarity within one intent, e.g. the backbone's own result order, so that with one
            intent and no expansion the ranking is the backbone's ranking (BM25 gives many exact ties,
            e.g. all-zero scores); default: tool index.

    Returns:
        up to ``k`` :class:`Candidate` (distinct tools) in final order.

    Example:
        >>> s = [[0.9, 0.8, 0.1], [0.2, 0.3, 0.7]]   # intent 0 prefers tool 0, intent 1 tool 2
        >>> [c.tool for c in multiview_rank(s, 3)]
        [0, 2, 1]
    """
    scores = np.asarray(intent_scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"intent_scores must be [n_intents, n_tools], got shape {scores.shape}")
    n_intents, n_tools = scores.shape
    k = min(k, n_tools)
    if k <= 0 or n_intents == 0:
        return []
    depth = k  # one intent alone yields k distinct tools within its top-k, so deeper ranks never reach the top-k
    candidates: list[tuple[int, float, int, int]] = []  # (rank, -similarity, intent, tool)
    tie = np.zeros_like(scores) if tiebreak is None else np.asarray(tiebreak, dtype=np.float64)
    for i in range(n_intents):
        row = scores[i]
        order = np.lexsort((np.arange(n_tools), tie[i], -row))[:depth]  # similarity desc, tiebreak, tool index
        for r, t in enumerate(order):
            if np.isfinite(row[t]):
                candidates.append((r, -float(row[t]), i, int(t)))
    candidates.sort()
    out: list[Candidate] = []
    seen: set[int] = set()
    for r, neg_sim, i, t in candidates:
        if t in seen:
            continue
        seen.add(t)
        out.append(Candidate(tool=t, similarity=-neg_sim, rank=r, intent=i))
        if len(out) == k:
            break
    return out


def ranking_score(candidate: Candidate) -> float:
    """A score that decreases along the multi-view order (for TREC-style runs, which sort by score):
    ``-2 * rank + s / (1 + |s|)``; the second term lies in (-1, 1), so rank dominates, then similarity."""
    s = candidate.similarity
    return -2.0 * candidate.rank + s / (1.0 + abs(s))
