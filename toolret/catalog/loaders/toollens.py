"""ToolLens (COLT, CIKM'24): BEIR layout, 464 APIs, train/test qrels, scenes (gold tool bundles).

``toollens-scene-disjoint`` is a variant of the same files: ToolLens is transductive (every test scene, i.e.
gold tool set, also occurs in train), so this variant pools train and test and moves whole scenes to test
(:func:`toolret.catalog.splits.gold_set_split`, seed :data:`SCENE_DISJOINT_SEED`, 10% of the queries as in
the original split, every test tool still seen in train): no test query's gold set occurs in train. Its dev
split is carved from its train the same way (scene-disjoint from the rest of train), with the project's
``catalog.dev_fraction`` / ``catalog.seed``.
"""

from __future__ import annotations

from pathlib import Path

from toolret.catalog.loaders.beir import load_beir
from toolret.catalog.model import Catalog
from toolret.catalog.source import verify_files
from toolret.catalog.splits import gold_set_split
from toolret.catalog.tool_fields import parse_toolbench_document

FILES = ["corpus.jsonl", "queries.jsonl", "qrels/train.tsv", "qrels/test.tsv"]


def load_toollens(folder: Path) -> Catalog:
    checksums = verify_files(folder, FILES)
    catalog = load_beir(folder, name="toollens")
    for tool in catalog.tools:
        fields = parse_toolbench_document(tool.text)  # category -> tool -> API, from the document's fields
        tool.category, tool.tool = (fields.category, fields.tool_name) if fields else (None, None)
        tool.name = (fields.api_name if fields else "") or tool.name
    catalog.provenance = {"source": folder.name, "checksums": checksums, "loader": "toollens"}
    return catalog


SCENE_DISJOINT_SEED = 13  # the variant's definition: changing it makes another dataset
SCENE_DISJOINT_TEST_FRACTION = 0.1  # = ToolLens' own test share (1,877 of 18,770 queries)


def load_toollens_scene_disjoint(folder: Path) -> Catalog:
    """ToolLens with a scene-disjoint test split (see the module docstring)."""
    catalog = load_toollens(folder)
    catalog.name = "toollens-scene-disjoint"
    for q in catalog.queries:
        q.split = "train"
    stats = gold_set_split(catalog, "train", "test", SCENE_DISJOINT_TEST_FRACTION, SCENE_DISJOINT_SEED)
    catalog.provenance = {**catalog.provenance, "loader": "toollens-scene-disjoint", "test_split": stats,
                          "dev_split_by": "gold_set"}
    return catalog
