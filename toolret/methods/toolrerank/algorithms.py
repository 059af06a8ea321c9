"""ToolRerank's list operations (Zheng et al., LREC-COLING 2024), one paper step per function.

All functions work on positions in a list and plain Python / numpy values, so they are testable on
hand-built candidate lists:

- :func:`adaptive_truncation` -- Sec. 3.2: keep candidate ``i`` (1-based) if (seen and ``i <= m_s``) or
  (unseen and ``i <= m_u``);
- :func:`rerank_order` -- Sec. 2.3: the truncated list ordered by cross-encoder score (Rerank-m is this
  over the top ``m``);
- :func:`single_tool_set` / :func:`single_tool_rerank` -- Alg. 1 (the tool set X, then F1 + F2);
- :func:`extended_f1` -- Sec. 3.3: F1 extended with every API of the unseen tools in X, reranked;
- :func:`multi_tool_selection` / :func:`multi_tool_rerank` -- Alg. 2 (graph over the results, at most
  ``n`` best-scored results per connected component first).

Ties (which the paper leaves open) keep the earlier position: a stable sort everywhere.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np


def adaptive_truncation(seen: Sequence[bool], m_s: int, m_u: int) -> list[int]:
    """Sec. 3.2, Adaptive Truncation: the 0-based positions of the candidates ``C = [c_1..c_m]`` kept in ``T``.

    Candidate ``c_i`` (1-based ``i``) is kept if ``seen[i]`` and ``i <= m_s``, or not ``seen[i]`` and
    ``i <= m_u``. Order is preserved.
    """
    return [p for p, s in enumerate(seen) if (p + 1 <= m_s if s else p + 1 <= m_u)]


def rerank_order(scores: Sequence[float]) -> list[int]:
    """Sec. 2.3: positions ordered by cross-encoder score, highest first (stable: ties keep their order)."""
    return [int(i) for i in np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")]


def single_tool_set(tools: Sequence[Hashable], scores: Sequence[float], tau_s: float) -> set:
    """Alg. 1, lines 1-4: ``X = {tool(r_1)} ∪ {tool(r_i) : score(q, r_i) > tau_s}`` over the reranked
    results ``R`` (``tools`` and ``scores`` in R's order)."""
    if not tools:
        return set()
    x = {tools[0]}
    x.update(t for t, s in zip(tools[1:], scores[1:]) if s > tau_s)
    return x


def single_tool_rerank(tools: Sequence[Hashable], scores: Sequence[float], tau_s: float) -> tuple[list[int], list[int], set]:
    """Alg. 1: ``(F1, F2, X)`` -- positions in R whose tool is in X (R's order), then the others."""
    x = single_tool_set(tools, scores, tau_s)
    f1 = [i for i, t in enumerate(tools) if t in x]
    f2 = [i for i, t in enumerate(tools) if t not in x]
    return f1, f2, x


def extended_f1(f1: Sequence[Hashable], extra: Sequence[Hashable], score: Mapping[Hashable, float]) -> list:
    """Sec. 3.3, the extended API list: ``F1`` plus ``extra`` (APIs of the unseen tools in X taken from the
    whole library, those already in F1 skipped), reranked by ``score`` (highest first; ties: F1's order,
    then ``extra``'s)."""
    have = set(f1)
    items = list(f1) + [e for e in dict.fromkeys(extra) if e not in have]
    return [items[i] for i in rerank_order([score[e] for e in items])]


def connected_components(n: int, edges: Sequence[tuple[int, int]]) -> list[int]:
    """Component label of each of ``n`` nodes (union-find; labels are the smallest node of each component)."""
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(a) for a in range(n)]


def multi_tool_selection(tools: Sequence[Hashable], scores: Sequence[float], sim: np.ndarray, tau_m: float,
                         n: int) -> set[int]:
    """Alg. 2, lines 1-9: the set S of positions in R kept first.

    Graph over the results, edge ``<r_i, r_j>`` if ``tool(r_i) == tool(r_j)`` or ``sim[i, j] > tau_m``;
    from each connected component the (at most) ``n`` results with the best ``scores`` (ties: earlier
    position).
    """
    size = len(tools)
    sim = np.asarray(sim, dtype=np.float64)
    edges = [(i, j) for i in range(size - 1) for j in range(i + 1, size)
             if tools[i] == tools[j] or sim[i, j] > tau_m]
    labels = connected_components(size, edges)
    members: dict[int, list[int]] = {}
    for i, c in enumerate(labels):
        members.setdefault(c, []).append(i)
    keep: set[int] = set()
    for group in members.values():
        ranked = sorted(group, key=lambda i: (-float(scores[i]), i))
        keep.update(ranked[:n])
    return keep


def multi_tool_rerank(tools: Sequence[Hashable], scores: Sequence[float], sim: np.ndarray, tau_m: float,
                      n: int) -> tuple[list[int], list[int]]:
    """Alg. 2: ``(F1, F2)`` -- the positions in S (R's order), then the others (R's order)."""
    s = multi_tool_selection(tools, scores, sim, tau_m, n)
    return [i for i in range(len(tools)) if i in s], [i for i in range(len(tools)) if i not in s]


__all__ = ["adaptive_truncation", "connected_components", "extended_f1", "multi_tool_rerank",
           "multi_tool_selection", "rerank_order", "single_tool_rerank", "single_tool_set"]
