"""MTRB (QTA, SIGIR-AP'24): RestBench (54 TMDB endpoints) and MetaTool (199 tools), 90 test queries each.

Gotcha: ``relevant IDs`` are 0-based positions (RestBench: ``ID - 1``; MetaTool: dict order); we use
those positions as tool ids and cross-check them against ``relevant Tools``.
MTRB-ToolBench's 2,391-tool corpus was never released: asking for it raises a clear error.
"""

from __future__ import annotations

from pathlib import Path

from toolret.catalog.loaders._read import read_json, require_text
from toolret.catalog.model import Catalog, Query, Tool
from toolret.errors import CatalogError
from toolret.catalog.source import verify_files


def _queries(path: Path, catalog_names: list[str]) -> tuple[list[Query], dict[str, dict[str, int]]]:
    data = read_json(path)
    if not isinstance(data, list):
        raise CatalogError(f"{path}: expected a JSON list of queries")
    queries, qrels = [], {}
    for i, row in enumerate(data):
        where = f"{path}[{i}]"
        text = require_text(row, "query", where)
        ids = row.get("relevant IDs")
        names = row.get("relevant Tools")
        if not isinstance(ids, list) or not ids:
            raise CatalogError(f"{where}: 'relevant IDs' must be a non-empty list")
        for pos, name in zip(ids, names or [None] * len(ids)):
            if not isinstance(pos, int) or not 0 <= pos < len(catalog_names):
                raise CatalogError(f"{where}: relevant ID {pos!r} is outside the corpus (0..{len(catalog_names)-1})")
            if name is not None and name != catalog_names[pos]:
                raise CatalogError(f"{where}: relevant ID {pos} is {catalog_names[pos]!r}, but the query names {name!r}")
        qid = f"q{i}"
        queries.append(Query(id=qid, text=text, split="test"))
        qrels[qid] = {str(p): 1 for p in ids}
    return queries, qrels


def load_restbench(folder: Path) -> Catalog:
    files = ["restbench/tmdb_tool_rewrite.json", "restbench/mtr_restbench_test.json"]
    checksums = verify_files(folder, files)
    path = folder / files[0]
    rows = read_json(path)
    tools = []
    for i, row in enumerate(rows):
        where = f"{path}[{i}]"
        if row.get("ID") != i + 1:
            raise CatalogError(f"{where}: expected ID {i + 1}, found {row.get('ID')!r} (IDs must be 1-based and ordered)")
        usage = require_text(row, "tool_usage", where)
        desc = require_text(row, "tool_description", where)
        human = require_text(row, "rewrite_description", where)
        tools.append(Tool(id=str(i), name=usage, docs={"original": f"{usage}: {desc}", "human": f"{usage}: {human}"},
                          tool="tmdb", category="movies",
                          metadata={"tool_name": row.get("tool_name"), "example": row.get("Example")}))
    queries, qrels = _queries(folder / files[1], [t.name for t in tools])
    return Catalog(name="mtrb-restbench", tools=tools, queries=queries, qrels=qrels,
                   provenance={"source": folder.name, "checksums": checksums, "loader": "mtrb-restbench"})


def load_metatool(folder: Path) -> Catalog:
    files = ["metatool/ts_metatool_api_list_rewrite.json", "metatool/mtr_metatool_test.json"]
    checksums = verify_files(folder, files)
    path = folder / files[0]
    data = read_json(path)
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a JSON object tool_name -> description")
    tools = []
    for i, (name, desc) in enumerate(data.items()):
        desc = require_text({"description": desc}, "description", f"{path}[{name!r}]")
        tools.append(Tool(id=str(i), name=name, docs={"original": f"{name}: {desc}"}, tool=name))
    queries, qrels = _queries(folder / files[1], [t.name for t in tools])
    return Catalog(name="mtrb-metatool", tools=tools, queries=queries, qrels=qrels,
                   provenance={"source": folder.name, "checksums": checksums, "loader": "mtrb-metatool",
                               "note": "MTRB ships only the rewritten MetaTool descriptions"})


def load_mtrb_toolbench(folder: Path) -> Catalog:
    raise CatalogError(
        "mtrb-toolbench: its 2,391-tool corpus (toolbench/toolbench_tool_instruction_rewrite_revised.json) was "
        f"never released and is not in {folder}; only the 90 test queries exist, so it cannot be evaluated"
    )
