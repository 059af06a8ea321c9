"""Relevance hit tables: the one pass over rankings that every metric is computed from.

Every ranking metric in this package is a vectorised function of three arrays built here
once per evaluation:

* ``hits``: ``[n_queries, depth]`` bool, ``hits[i, r]`` is True when the tool at rank
  ``r + 1`` of query ``i`` is gold;
* ``n_gold``: ``[n_queries]`` int, the number of gold tools of each query;
* ``first_hit``: ``[n_queries]`` int, the 1-based rank of the first gold tool anywhere in
  the ranking (not only within ``depth``), ``0`` when there is none.

Duplicate tool ids in a ranking: only the first occurrence can be a hit; later occurrences
keep their position but count as non-relevant (a method that repeats a tool wastes a slot,
and no query can score recall above 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HitTable:
    """Per-query relevance of the top ``depth`` ranks.

    Attributes:
        query_ids: one id per row.
        hits: ``[n_queries, depth]`` bool array; True where the ranked tool is gold.
        n_gold: ``[n_queries]`` int array; size of each query's gold set (always >= 1).
        first_hit: ``[n_queries]`` int array; 1-based rank of the first gold tool in the
            whole ranking, 0 when no gold tool is ranked.
    """

    query_ids: list[str]
    hits: np.ndarray
    n_gold: np.ndarray
    first_hit: np.ndarray

    @property
    def depth(self) -> int:
        """Number of ranks recorded in :attr:`hits`."""
        return int(self.hits.shape[1])


def _scan(ranking: Sequence[str], gold: set[str], depth: int) -> tuple[list[int], int]:
    """Positions (0-based, < depth) of hits and 1-based rank of the first hit.

    Stops early once past ``depth`` with the first hit found, or once every gold tool
    has been seen.
    """
    seen: set[str] = set()
    positions: list[int] = []
    first = 0
    remaining = len(gold)
    for pos, tool in enumerate(ranking):
        if pos >= depth and first:
            break
        if remaining == 0:
            break
        if tool in seen:
            continue
        seen.add(tool)
        if tool in gold:
            remaining -= 1
            if not first:
                first = pos + 1
            if pos < depth:
                positions.append(pos)
    return positions, first


def build_hit_table(
    ranked: Mapping[str, Sequence[str]],
    gold: Mapping[str, Iterable[str]],
    depth: int,
    *,
    empty_gold: str = "skip",
) -> HitTable:
    """Match every query's ranking against its gold set.

    Args:
        ranked: query id -> ranked tool ids, best first. Queries absent here are scored as
            an empty ranking; queries present here but absent from ``gold`` are ignored.
        gold: query id -> gold tool ids. Its key order fixes the row order.
        depth: number of ranks to record (the largest cutoff needed), >= 0.
        empty_gold: ``"skip"`` (default) drops queries whose gold set is empty;
            ``"raise"`` raises :class:`ValueError` on the first such query.

    Returns:
        The :class:`HitTable`, rows in ``gold`` key order (empty-gold queries removed).

    Raises:
        ValueError: on a negative ``depth``, an unknown ``empty_gold`` mode, or an empty
            gold set with ``empty_gold="raise"``.
    """
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 0:
        raise ValueError(f"depth must be a non-negative int, got {depth!r}")
    if empty_gold not in ("skip", "raise"):
        raise ValueError(f"empty_gold must be 'skip' or 'raise', got {empty_gold!r}")
    depth = int(depth)

    query_ids: list[str] = []
    n_gold: list[int] = []
    first_hit: list[int] = []
    rows: list[int] = []
    cols: list[int] = []
    for qid, g in gold.items():
        gset = g if isinstance(g, (set, frozenset)) else set(g)
        if not gset:
            if empty_gold == "raise":
                raise ValueError(
                    f"query {qid!r} has an empty gold set; metrics are undefined for it "
                    "(drop it, or use empty_gold='skip')"
                )
            continue
        positions, first = _scan(ranked.get(qid, ()), gset, depth)
        row = len(query_ids)
        query_ids.append(qid)
        n_gold.append(len(gset))
        first_hit.append(first)
        rows.extend([row] * len(positions))
        cols.extend(positions)

    hits = np.zeros((len(query_ids), depth), dtype=bool)
    if rows:
        hits[np.asarray(rows), np.asarray(cols)] = True
    return HitTable(
        query_ids=query_ids,
        hits=hits,
        n_gold=np.asarray(n_gold, dtype=np.int64),
        first_hit=np.asarray(first_hit, dtype=np.int64),
    )


def check_k(k: int, depth: int) -> int:
    """Validate a cutoff against a hit table's depth.

    Args:
        k: the cutoff, a positive int.
        depth: columns available in the hit array.

    Returns:
        ``k`` as a plain int.

    Raises:
        ValueError: if ``k`` is not a positive int or exceeds ``depth``.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"cutoff k must be a positive int, got {k!r}")
    if k > depth:
        raise ValueError(f"cutoff k={k} exceeds the hit table depth {depth}")
    return int(k)
