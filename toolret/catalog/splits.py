"""Group-disjoint splits: move whole *gold sets* (a query's set of relevant tools, COLT's "scene") from
one split to another, so no gold set of the target split occurs in the source split.

Used by catalog variants that measure generalisation to unseen tool bundles (``toollens-scene-disjoint``)
and, for such variants, by the dev carve (:func:`toolret.catalog.datasets.carve_dev_split`), so that model
selection sees the same kind of queries as the test split.

Procedure (seeded, deterministic): the source split's judged queries are grouped by their gold set; the
groups are ordered by their sorted tool ids and shuffled with ``random.Random(seed)``; groups are moved in
that order until at least ``fraction`` of the source queries have moved. With ``keep_tools_seen`` a group
is skipped when moving it would leave one of its tools in no remaining source group, so every tool of
the target split is still seen in the source split (only the *combination* is new).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

from toolret.catalog.model import Catalog
from toolret.errors import CatalogError


def gold_set_split(catalog: Catalog, source: str, target: str, fraction: float, seed: int,
                   keep_tools_seen: bool = True) -> dict[str, Any]:
    """Move whole gold sets of ``source`` queries to ``target`` (in place); returns the split's statistics.

    Raises:
        CatalogError: ``fraction`` outside (0, 1), or no judged query in ``source``.
    """
    if not 0 < fraction < 1:
        raise CatalogError(f"catalog {catalog.name!r}: gold-set split fraction must be in (0, 1), got {fraction}")
    groups: dict[tuple[str, ...], list] = defaultdict(list)
    for q in catalog.queries:
        if q.split == source:
            gold = tuple(sorted(catalog.gold(q.id)))
            if gold:
                groups[gold].append(q)
    if not groups:
        raise CatalogError(f"catalog {catalog.name!r}: no judged queries in split {source!r} to split by gold set")
    n_source = sum(len(v) for v in groups.values())
    wanted = max(1, round(n_source * fraction))
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    groups_of_tool = Counter(t for g in order for t in g)
    moved_groups, moved, skipped = [], 0, 0
    for g in order:
        if moved >= wanted:
            break
        if keep_tools_seen and any(groups_of_tool[t] <= 1 for t in g):
            skipped += 1
            continue
        for q in groups[g]:
            q.split = target
        moved += len(groups[g])
        moved_groups.append(g)
        groups_of_tool.subtract(g)
    return {"source": source, "target": target, "fraction": fraction, "seed": seed,
            "keep_tools_seen": keep_tools_seen, "by": "gold_set", "n_groups": len(groups),
            "n_groups_moved": len(moved_groups), "n_queries_moved": moved, "n_groups_skipped": skipped,
            "reached_fraction": moved >= wanted}


__all__ = ["gold_set_split"]
