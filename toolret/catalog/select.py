"""A catalog whose test split is a chosen slice of another catalog's judged queries.

For evaluating on a dev split like on a benchmark without touching its test queries: e.g. the multi-API
requests of a synthetic training catalog's dev split (``--split dev --min-gold 2``), the queries that
look like a target benchmark's multi-request instructions. The corpus (with its hierarchy) is kept as is;
only the selected queries remain, all in the ``test`` split. Provenance records the source and the rule.

Example:
    >>> from toolret.catalog.model import Catalog, Query, Tool
    >>> tools = [Tool(t, t, {"original": t}) for t in "abc"]
    >>> qs = [Query("1", "one", "dev"), Query("2", "two", "dev"), Query("3", "three", "train")]
    >>> c = Catalog("d", tools, qs, {"1": {"a": 1}, "2": {"a": 1, "b": 1}, "3": {"a": 1, "c": 1}})
    >>> s = select_queries(c, "dev", min_gold=2, name="d-dev-multi")
    >>> [q.id for q in s.split("test")], len(s.tools)
    (['2'], 3)
"""

from __future__ import annotations

import random

from toolret.catalog.model import Catalog, Query
from toolret.errors import CatalogError


def sample_queries(items: list, n: int, seed: int) -> list:
    """A seeded sample of ``n`` items in their original order (all of them when ``n`` is 0 or too large)."""
    if n <= 0 or n >= len(items):
        return list(items)
    keep = set(random.Random(seed).sample(range(len(items)), n))
    return [x for i, x in enumerate(items) if i in keep]


def select_queries(catalog: Catalog, split: str, *, min_gold: int = 1, name: str, sample: int = 0,
                   seed: int = 13) -> Catalog:
    """``catalog`` with only the judged ``split`` queries that have at least ``min_gold`` gold tools, as the
    test split of a catalog named ``name``; ``sample`` > 0: a seeded sample of that many of them, in their
    order (all of them when there are no more)."""
    if min_gold < 1 or sample < 0:
        raise CatalogError(f"select: min_gold must be >= 1 and sample >= 0 (got {min_gold}, {sample})")
    chosen = [q for q in catalog.split(split) if len(catalog.qrels.get(q.id, {})) >= min_gold]
    if not chosen:
        raise CatalogError(f"select: catalog {catalog.name!r} has no judged {split!r} queries with >= {min_gold} "
                           f"gold tools (its splits: {catalog.stats().get('n_queries')})")
    rule = {"split": split, "min_gold": min_gold}
    if 0 < sample < len(chosen):
        chosen = sample_queries(chosen, sample, seed)
        rule.update(sample=sample, seed=seed)  # no sample: the provenance of selections made before it existed
    queries = [Query(q.id, q.text, "test") for q in chosen]
    provenance = {"source": catalog.name, "source_provenance": catalog.provenance,
                  "selection": {**rule, "n_queries": len(queries)}}
    return Catalog(name, list(catalog.tools), queries, {q.id: dict(catalog.qrels[q.id]) for q in chosen}, provenance)


__all__ = ["sample_queries", "select_queries"]
