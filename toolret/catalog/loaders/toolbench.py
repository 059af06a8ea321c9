"""ToolBench test groups (StableToolBench 'solvable' queries): G1 instruction/category/tool, G2, G3.

No corpus ships with them: the corpus is the union of every group's ``api_list`` (2,479 APIs / 811
tools / 47 categories), APIs keyed by (tool_name, api_name). All six groups share that one corpus so
their numbers are comparable to each other (not 1:1 to papers that searched ~16k APIs). The
``toolbench-env-*`` catalogs (:mod:`toolret.catalog.loaders.toolbench_env`) reuse these queries, gold
and ids over the 46,802-API tool environment.
"""

from __future__ import annotations

from collections.abc import Container
from pathlib import Path
from typing import Any

from toolret.catalog.loaders._read import read_json, require_text
from toolret.catalog.model import Catalog, Query, Tool
from toolret.catalog.tool_fields import render_toolbench_document
from toolret.errors import CatalogError
from toolret.catalog.source import verify_files

GROUPS = ["G1_instruction", "G1_category", "G1_tool", "G2_instruction", "G2_category", "G3_instruction"]


def _group_file(group: str) -> str:
    return f"solvable_queries/test_instruction/{group}.json"


def group_dataset_name(group: str, prefix: str = "toolbench-") -> str:
    """``"G1_tool"`` -> ``"toolbench-g1-tool"`` (``prefix`` ``"toolbench-env-"``: the env catalog)."""
    return prefix + group.lower().replace("_", "-")


def api_document(api: dict) -> str:
    """A ToolBench ``api_list`` entry as its ToolBench-style document (the form COLT/ToolRet retrievers index)."""
    return render_toolbench_document(api.get("category_name", ""), api.get("tool_name", ""), api.get("api_name", ""),
                                     api.get("api_description") or "", api.get("required_parameters") or [],
                                     api.get("optional_parameters") or [], api.get("template_response") or {})


def tool_key(tool_name: str, api_name: str) -> str:
    """Stable API id; names are stripped (ToolBench has e.g. ``" Forward & Reverse Geocoding ..."``)."""
    return f"{tool_name.strip()}::{api_name.strip()}"


def read_groups(folder: Path) -> tuple[dict[str, str], dict[str, tuple[Path, list[dict[str, Any]]]]]:
    """Verify and read the six group files: ``(checksums, {group: (path, rows)})``."""
    checksums = verify_files(folder, [_group_file(g) for g in GROUPS])
    groups = {}
    for g in GROUPS:
        path = folder / _group_file(g)
        rows = read_json(path)
        if not isinstance(rows, list):
            raise CatalogError(f"{path}: expected a JSON list of queries")
        groups[g] = (path, rows)
    return checksums, groups


def api_list_union(groups: dict[str, tuple[Path, list[dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """``{tool_key: api_list entry}`` over every group's ``api_list`` (first occurrence kept, in group,
    query and list order)."""
    apis: dict[str, dict[str, Any]] = {}
    for g in GROUPS:
        path, rows = groups[g]
        for i, row in enumerate(rows):
            for j, api in enumerate(row.get("api_list") or []):
                where = f"{path}[{i}].api_list[{j}]"
                key = tool_key(require_text(api, "tool_name", where), require_text(api, "api_name", where))
                apis.setdefault(key, api)
    return apis


def group_queries(path: Path, rows: list[dict[str, Any]],
                  known: Container[str]) -> tuple[list[Query], dict[str, dict[str, int]]]:
    """A group's test queries and gold (``tool_key`` ids, each of which must be in ``known``)."""
    queries, qrels = [], {}
    for i, row in enumerate(rows):
        where = f"{path}[{i}]"
        text = require_text(row, "query", where)
        qid = str(row.get("query_id", i))
        gold = {}
        for pair in row.get("relevant APIs") or []:
            key = tool_key(*pair)
            if key not in known:
                raise CatalogError(f"{where}: relevant API {pair!r} is not in any api_list")
            gold[key] = 1
        queries.append(Query(id=qid, text=text, split="test"))
        qrels[qid] = gold
    return queries, qrels


def load_toolbench_group(folder: Path, group: str) -> Catalog:
    if group not in GROUPS:
        raise CatalogError(f"unknown ToolBench group {group!r}; choose one of {GROUPS}")
    checksums, groups = read_groups(folder)
    tools = {key: Tool(id=key, name=api["api_name"].strip(), docs={"original": api_document(api)},
                       tool=api["tool_name"].strip(), category=api.get("category_name"),
                       metadata={"method": api.get("method")})
             for key, api in api_list_union(groups).items()}
    queries, qrels = group_queries(*groups[group], tools)
    ordered = sorted(tools.values(), key=lambda t: (t.category or "", t.tool or "", t.name))
    return Catalog(name=group_dataset_name(group), tools=ordered, queries=queries, qrels=qrels,
                   provenance={"source": folder.name, "checksums": checksums, "loader": "toolbench",
                               "corpus": "union of api_list over the 6 StableToolBench solvable groups"})
