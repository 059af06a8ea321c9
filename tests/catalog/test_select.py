"""``toolret catalog select``: a catalog whose test split is a slice of another's judged queries."""

from __future__ import annotations

import json

import pytest

from toolret.catalog.io import load_catalog
from toolret.catalog.model import Catalog, Query, Tool
from toolret.errors import CatalogError
from toolret.cli import main


def _catalog() -> Catalog:
    tools = [Tool(f"t{i}", f"api {i}", {"original": f"document {i}"}, tool=f"tool{i // 2}", category="c")
             for i in range(4)]
    qs = [Query("d1", "one api", "dev"), Query("d2", "two apis", "dev"), Query("d3", "three apis", "dev"),
          Query("r1", "train two", "train"), Query("x1", "test two", "test")]
    qrels = {"d1": {"t0": 1}, "d2": {"t0": 1, "t1": 1}, "d3": {"t1": 1, "t2": 1, "t3": 1},
             "r1": {"t2": 1, "t3": 1}, "x1": {"t0": 1, "t3": 1}}
    return Catalog("src", tools, qs, qrels, {"purpose": "training"})


def test_select_keeps_the_corpus_and_only_the_chosen_split_s_multi_gold_queries(tmp_path):
    from toolret.catalog.io import save_catalog

    save_catalog(_catalog(), tmp_path / "src")
    assert main(["catalog", "select", "--catalog", str(tmp_path / "src"), "--split", "dev", "--min-gold", "2",
                 "--name", "src-dev-multi", "--out", str(tmp_path / "out")]) in (0, None)
    out = load_catalog(tmp_path / "out")
    assert [q.id for q in out.split("test")] == ["d2", "d3"]  # never the train / test queries, never d1
    assert out.tool_ids == ["t0", "t1", "t2", "t3"] and out.tools[3].tool == "tool1"  # hierarchy kept
    assert out.qrels["d3"] == {"t1": 1, "t2": 1, "t3": 1}
    meta = json.loads((tmp_path / "out" / "catalog.json").read_text())
    assert meta["provenance"]["selection"] == {"split": "dev", "min_gold": 2, "n_queries": 2}
    assert meta["provenance"]["source"] == "src"


def test_an_empty_selection_is_a_clear_error_and_writes_nothing(tmp_path):
    from toolret.catalog.select import select_queries

    with pytest.raises(CatalogError, match="no judged 'dev' queries with >= 4 gold"):
        select_queries(_catalog(), "dev", min_gold=4, name="x")


def test_a_sample_is_seeded_in_source_order_and_recorded_only_when_drawn():
    from toolret.catalog.select import select_queries

    tools = [Tool(f"t{i}", f"api {i}", {"original": f"document {i}"}) for i in range(3)]
    qs = [Query(f"d{i:02d}", f"request {i}", "dev") for i in range(40)]
    catalog = Catalog("src", tools, qs, {q.id: {"t0": 1, "t1": 1} for q in qs})
    a = select_queries(catalog, "dev", min_gold=2, name="x", sample=10, seed=1)
    ids = [q.id for q in a.split("test")]
    assert len(ids) == 10 and ids == sorted(ids)  # the source's order
    assert ids == [q.id for q in select_queries(catalog, "dev", min_gold=2, name="x", sample=10, seed=1).split("test")]
    assert any([q.id for q in select_queries(catalog, "dev", min_gold=2, name="x", sample=10, seed=s).split("test")]
               != ids for s in range(2, 6))
    assert a.provenance["selection"] == {"split": "dev", "min_gold": 2, "sample": 10, "seed": 1, "n_queries": 10}
    everything = select_queries(catalog, "dev", min_gold=2, name="x", sample=40)
    assert len(everything.split("test")) == 40 and "sample" not in everything.provenance["selection"]
