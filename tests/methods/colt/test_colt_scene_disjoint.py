"""The scene-disjoint split (whole gold sets moved between splits) and the ``toollens-scene-disjoint``
catalog variant built with it."""

from __future__ import annotations

import copy

import pytest

from toolret.errors import CatalogError
from toolret.catalog.datasets import carve_dev_split, load_dataset
from toolret.catalog.source import source_root
from toolret.catalog.splits import gold_set_split


def _sets(catalog, split):
    return {frozenset(catalog.gold(q.id)) for q in catalog.split(split)}


@pytest.fixture
def pooled(fixture_catalog_dir):
    """The fixture catalog with every judged query in train (as the variant pools ToolLens)."""
    catalog = load_dataset(str(fixture_catalog_dir), dev_fraction=0)
    for q in catalog.queries:
        q.split = "train"
    return catalog


def test_gold_set_split_moves_whole_sets_and_keeps_tools_seen(pooled):
    stats = gold_set_split(pooled, "train", "test", 0.25, seed=3)
    train, test = _sets(pooled, "train"), _sets(pooled, "test")
    assert test and not train & test  # no test gold set occurs in train
    seen = set().union(*train)
    assert all(t in seen for s in test for t in s)  # ... but every test tool does
    n_all = len(pooled.split("train")) + len(pooled.split("test"))
    assert stats["n_queries_moved"] == len(pooled.split("test")) >= round(0.25 * n_all)
    assert stats["n_groups_moved"] == len(test)


def test_gold_set_split_is_seeded(pooled):
    a, b, c = copy.deepcopy(pooled), copy.deepcopy(pooled), copy.deepcopy(pooled)
    for cat, seed in ((a, 1), (b, 1), (c, 2)):
        gold_set_split(cat, "train", "test", 0.25, seed)
    ids = [{q.id for q in cat.split("test")} for cat in (a, b, c)]
    assert ids[0] == ids[1] and ids[0] != ids[2]


def test_gold_set_split_bad_input(pooled):
    with pytest.raises(CatalogError, match=r"fraction must be in \(0, 1\)"):
        gold_set_split(pooled, "train", "test", 1.0, 0)
    with pytest.raises(CatalogError, match="no judged queries in split 'dev'"):
        gold_set_split(pooled, "dev", "test", 0.1, 0)


def test_dev_carve_follows_the_catalogs_grouping(pooled):
    by_set = copy.deepcopy(pooled)
    by_set.provenance["dev_split_by"] = "gold_set"
    carve_dev_split(by_set, 0.2, 13)
    assert by_set.split("dev") and not _sets(by_set, "train") & _sets(by_set, "dev")
    assert by_set.provenance["dev_split"]["by"] == "gold_set"
    plain = carve_dev_split(copy.deepcopy(pooled), 0.2, 13)  # default: random queries, sets may be shared
    assert len(plain.split("dev")) == round(0.2 * len(pooled.split("train")))


needs_toollens = pytest.mark.skipif(not (source_root() / "toollens").is_dir(), reason="ToolLens source not present")


@needs_toollens
def test_toollens_scene_disjoint_variant():
    from toolret.catalog.validation import validate_catalog

    original = load_dataset("toollens")
    assert _sets(original, "test") <= _sets(original, "train")  # why the variant exists: transductive test
    c = load_dataset("toollens-scene-disjoint", dev_fraction=0.05, seed=13)
    assert c.name == "toollens-scene-disjoint"
    train, dev, test = _sets(c, "train"), _sets(c, "dev"), _sets(c, "test")
    assert not train & test and not train & dev and not dev & test
    seen = set().union(*train)
    assert all(t in seen for s in test | dev for t in s)
    n = sum(len(c.split(s)) for s in ("train", "dev", "test"))
    assert n == sum(len(original.split(s)) for s in ("train", "dev", "test"))
    assert 0.10 <= len(c.split("test")) / n < 0.12
    assert 0.05 <= len(c.split("dev")) / (n - len(c.split("test"))) < 0.06
    assert c.provenance["test_split"]["seed"] == 13 and c.provenance["dev_split"]["by"] == "gold_set"
    report = validate_catalog(c)
    assert report.success, report.summary()
