"""ToolLens (COLT, CIKM'24): BEIR layout, 464 APIs, train/test qrels, scenes (gold tool bundles)."""

from __future__ import annotations

import re
from pathlib import Path

from toolret.catalog.loaders.beir import load_beir
from toolret.catalog.model import Catalog
from toolret.catalog.source import verify_files

FILES = ["corpus.jsonl", "queries.jsonl", "qrels/train.tsv", "qrels/test.tsv"]
_FIELD = re.compile(r"^category_name:(?P<category>.*?), tool_name:(?P<tool>.*?), api_name:(?P<api>.*?), api_description:")


def parse_hierarchy(text: str) -> tuple[str | None, str | None, str | None]:
    """Return (category, tool, api) from a ToolBench-style document string, or Nones."""
    m = _FIELD.match(text)
    if not m:
        return None, None, None
    return m["category"].strip(), m["tool"].strip(), m["api"].strip()


def load_toollens(folder: Path) -> Catalog:
    checksums = verify_files(folder, FILES)
    catalog = load_beir(folder, name="toollens")
    for tool in catalog.tools:
        category, parent, api = parse_hierarchy(tool.text)
        tool.category, tool.tool = category, parent
        tool.name = api or tool.name
    catalog.provenance = {"source": str(folder), "checksums": checksums, "loader": "toollens"}
    return catalog
