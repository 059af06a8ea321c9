"""k-fold splits of a catalog's test queries: the low-resource protocol for datasets without a train split.

MTRB ships 90 test queries per subset and never released its 10 training queries. A fold turns one
seeded, disjoint slice of the test queries into the training split and leaves the rest as the test
split; over ``folds`` folds every query is a training query exactly once (MTRB: 9 folds of 10
training / 80 test queries). The fold is data-level: the folded catalog is a dataset of its own,
named ``<dataset>-fold<f>of<k>``, so every artifact learned on it (``data/models/<name>/...``) and every
result (``data/runs/<name>/...``) is per fold, and any pipeline -- a baseline included -- evaluated on
it sees the same 80 test queries (paired tests are valid).

Example:
    >>> from toolret.catalog.model import Catalog, Query, Tool
    >>> c = Catalog("d", [Tool("t", "t", {"original": "x"})], [Query(str(i), "q", "test") for i in range(6)],
    ...             {str(i): {"t": 1} for i in range(6)})
    >>> f = kfold_split(c, folds=3, fold=0, seed=13)
    >>> f.name, len(f.split("train")), len(f.split("test"))
    ('d-fold0of3', 2, 4)
"""

from __future__ import annotations

import dataclasses
import random

from toolret.catalog.model import Catalog
from toolret.errors import CatalogError


def fold_members(query_ids: list[str], folds: int, seed: int) -> list[list[str]]:
    """The ids split into ``folds`` disjoint, near-equal slices after a seeded shuffle of the sorted ids."""
    ids = sorted(query_ids)
    random.Random(seed).shuffle(ids)
    n = len(ids)
    bounds = [round(i * n / folds) for i in range(folds + 1)]
    return [ids[bounds[i]: bounds[i + 1]] for i in range(folds)]


def kfold_split(catalog: Catalog, folds: int, fold: int, seed: int, split: str = "test") -> Catalog:
    """A copy of ``catalog`` whose fold ``fold`` of the judged ``split`` queries is the ``train`` split.

    The other queries keep their split. Folding an already folded catalog with the same settings
    returns it unchanged; with other settings it is an error.

    Raises:
        CatalogError: ``folds < 2``, ``fold`` outside ``[0, folds)``, fewer judged queries than folds,
            or a catalog folded differently.
    """
    done = catalog.provenance.get("kfold")
    wanted = {"folds": folds, "fold": fold, "seed": seed, "split": split}
    if done:
        if {k: done.get(k) for k in wanted} == wanted:
            return catalog
        raise CatalogError(f"catalog {catalog.name!r} is already fold {done.get('fold')} of {done.get('folds')}; "
                           f"cannot fold it again as fold {fold} of {folds}")
    if folds < 2:
        raise CatalogError(f"catalog.folds must be >= 2 to fold a catalog, got {folds}")
    if not 0 <= fold < folds:
        raise CatalogError(f"catalog.fold must be in [0, {folds}), got {fold}")
    judged = [q.id for q in catalog.split(split)]
    if len(judged) < folds:
        raise CatalogError(f"catalog {catalog.name!r}: {len(judged)} judged {split!r} queries, "
                           f"fewer than {folds} folds")
    train = set(fold_members(judged, folds, seed)[fold])
    queries = [dataclasses.replace(q, split="train") if q.id in train else dataclasses.replace(q)
               for q in catalog.queries]
    provenance = {**catalog.provenance, "kfold": {**wanted, "dataset": catalog.name, "n_train": len(train),
                                                  "n_test": len(judged) - len(train)}}
    return Catalog(fold_name(catalog.name, folds, fold), list(catalog.tools), queries,
                   {q: dict(r) for q, r in catalog.qrels.items()}, provenance)


def fold_name(dataset: str, folds: int, fold: int) -> str:
    """``("mtrb-restbench", 9, 0)`` -> ``"mtrb-restbench-fold0of9"``."""
    return f"{dataset}-fold{fold}of{folds}"


def base_dataset(catalog: Catalog) -> str:
    """The dataset a (possibly folded) catalog was made from."""
    return (catalog.provenance.get("kfold") or {}).get("dataset", catalog.name)


__all__ = ["base_dataset", "fold_members", "fold_name", "kfold_split"]
