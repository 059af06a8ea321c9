"""The queries file of an imported catalog, and the catalog an importer returns.

A queries file is JSON Lines, one judged query per line, every query in the test split::

    {"_id": "q1", "text": "renew my loan for two more weeks", "gold": ["renewLoan"]}

``_id``: unique; ``text``: the user's request; ``gold``: the ids of the tools that answer it (at least one;
each must be a tool of the imported catalog: an operationId / ``METHOD /path`` for OpenAPI, the tool
name for MCP). Blank lines are skipped; any error names the file and line.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolret.catalog.loaders._read import iter_records, require_text
from toolret.catalog.model import Catalog, Query, Tool
from toolret.catalog.validation import validate_catalog
from toolret.errors import CatalogError
from toolret.provenance import sha256_file

QUERY_FIELDS = {"_id", "text", "gold"}


def read_queries(path: str | Path, tool_ids: Iterable[str]) -> tuple[list[Query], dict[str, dict[str, int]]]:
    """``(test queries, qrels)`` of a queries file (see the module docstring) over these tool ids."""
    path = Path(path)
    known = set(tool_ids)
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    for _, qid, where, obj in iter_records(path, "query"):
        unknown_fields = sorted(set(obj) - QUERY_FIELDS)
        if unknown_fields:
            raise CatalogError(f"{where}: unknown field(s) {unknown_fields} (a query has {sorted(QUERY_FIELDS)})")
        text = require_text(obj, "text", where)
        gold = obj.get("gold")
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) and g for g in gold):
            raise CatalogError(f"{where}: field 'gold' must be a non-empty list of tool ids")
        missing = [g for g in gold if g not in known]
        if missing:
            raise CatalogError(f"{where}: gold tool id(s) {missing} are not in the imported catalog")
        queries.append(Query(id=qid, text=text, split="test"))
        qrels[qid] = {g: 1 for g in gold}
    if not queries:
        raise CatalogError(f"{path}: no queries")
    return queries, qrels


def imported_catalog(name: str, tools: list[Tool], provenance: dict[str, Any],
                     queries: str | Path | None = None) -> Catalog:
    """The validated catalog of imported ``tools``: with ``queries`` (a queries file) they are its test
    split and its purpose is ``evaluation``; without, its purpose is ``serving`` (no split required).
    Raises :class:`CatalogError` naming every failed check (GX validation, as ``toolret catalog build``)."""

    seen: dict[str, Tool] = {}
    for t in tools:
        if t.id in seen:
            raise CatalogError(f"catalog {name!r}: two tools have the id {t.id!r}")
        seen[t.id] = t
    query_list: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    provenance = dict(provenance)
    if queries is not None:
        query_list, qrels = read_queries(queries, seen)
        provenance["purpose"] = "evaluation"
        provenance["queries"] = {"path": str(queries), "sha256": sha256_file(queries), "n": len(query_list)}
    else:
        provenance["purpose"] = "serving"
    catalog = Catalog(name=name, tools=tools, queries=query_list, qrels=qrels, provenance=provenance)
    report = validate_catalog(catalog)
    if not report.success:
        raise CatalogError(f"imported catalog {name!r} failed validation; nothing written:\n{report.summary()}")
    return catalog


__all__ = ["QUERY_FIELDS", "imported_catalog", "read_queries"]
