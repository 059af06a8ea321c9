"""Loaders on the real datasets: counts from SOURCE.md, the 0-based id gotcha, manifest verification."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from toolret.errors import CatalogError
from toolret.catalog.datasets import DATASETS, load_dataset
from toolret.catalog.source import source_root

SHARED = source_root()
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/datasets not present")


def test_toollens_counts_and_splits():
    c = load_dataset("toollens", dev_fraction=0.05, seed=13)
    assert len(c.tools) == 464
    n = {s: len(c.split(s)) for s in ("train", "dev", "test")}
    assert n["test"] == 1877
    assert n["train"] + n["dev"] == 16893
    assert n["dev"] == round(16893 * 0.05)
    assert not ({q.id for q in c.split("dev")} & {q.id for q in c.split("test")})
    sizes = [len(c.gold(q.id)) for q in c.split("test")]
    assert min(sizes) == 1 and max(sizes) == 3
    assert sum(sizes) == 4987  # 5,010 qrels rows, 23 of them exact duplicates (counted once)
    t = c.tools[0]
    assert (t.category, t.tool, t.name) == ("Food", "Worldwide Recipes", "Suggestions")


def test_dev_split_is_seeded():
    a = {q.id for q in load_dataset("toollens", seed=1).split("dev")}
    b = {q.id for q in load_dataset("toollens", seed=1).split("dev")}
    c = {q.id for q in load_dataset("toollens", seed=2).split("dev")}
    assert a == b and a != c


def test_mtrb_ids_are_zero_based_positions():
    rb = load_dataset("mtrb-restbench")
    assert len(rb.tools) == 54 and len(rb.split("test")) == 90
    # first query: "relevant Tools": ['GET /search/movie', 'GET /movie/{movie_id}'], "relevant IDs": [11, 23]
    q0 = rb.split("test")[0]
    assert {rb.tools[rb.tool_position(t)].name for t in rb.gold(q0.id)} == {"GET /search/movie", "GET /movie/{movie_id}"}
    assert rb.doc_variants() == ["original", "human"]
    mt = load_dataset("mtrb-metatool")
    assert len(mt.tools) == 199 and all(len(mt.gold(q.id)) == 1 for q in mt.split("test"))
    q0 = mt.split("test")[0]
    assert mt.tools[mt.tool_position(next(iter(mt.gold(q0.id))))].name == "PDF&URLTool"


def test_toolbench_corpus_is_union_of_api_lists():
    sizes = {}
    for name in [d for d in DATASETS if d.startswith("toolbench-") and not d.startswith("toolbench-env-")]:
        c = load_dataset(name)
        sizes[name] = len(c.split("test"))
        assert len(c.tools) == 2479
        assert len({t.tool for t in c.tools}) == 811
    assert sizes == {"toolbench-g1-instruction": 163, "toolbench-g1-category": 153, "toolbench-g1-tool": 158,
                     "toolbench-g2-instruction": 106, "toolbench-g2-category": 124, "toolbench-g3-instruction": 61}


def test_mtrb_toolbench_says_corpus_unavailable():
    with pytest.raises(CatalogError, match="never released"):
        load_dataset("mtrb-toolbench")


def test_modified_source_file_fails_checksum(tmp_path: Path):
    shutil.copytree(SHARED / "mtrb", tmp_path / "mtrb")
    target = tmp_path / "mtrb" / "metatool" / "mtr_metatool_test.json"
    target.write_bytes(target.read_bytes().replace(b"URLs", b"URIs", 1))
    with pytest.raises(CatalogError, match=r"mtr_metatool_test\.json.*does not match MANIFEST"):
        load_dataset("mtrb-metatool", root=tmp_path)


def test_toolbench_ids_survive_a_save_load_round_trip(tmp_path: Path):
    from toolret.catalog.io import load_catalog, save_catalog

    c = load_dataset("toolbench-g1-instruction")
    assert all(t.id == t.id.strip() for t in c.tools)  # the source has tool names with a leading space
    again = load_catalog(save_catalog(c, tmp_path / "tb"))
    assert again.tool_ids == c.tool_ids and again.qrels == c.qrels
