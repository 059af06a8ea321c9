"""What an agent sees of a tool: a small record per tool, written as ``tools.jsonl`` beside a saved pipeline.

A saved pipeline's components hold tool ids only; :meth:`toolret.pipeline.Pipeline.save` writes one
record per indexed tool (``tools.jsonl``, in index order) and a summary of the catalog it was fitted on
(``pipeline.json: catalog``), so a served pipeline answers with names, descriptions and input schemas
without the catalog. A record, read from the tool's fields (``Tool.fields``, :mod:`toolret.catalog.tool_fields`)::

    {"id", "name", "tool", "category", "description", "input_schema"?}

- ``name``: the API's own name (``Tool.name``; where that is only the id, as in a BEIR corpus without
  titles, ``metadata.api_name`` or the document's ``api_name:``); ``tool`` / ``category``: its parent
  tool and category where the source has a hierarchy.
- ``description``: the tool's ``metadata`` ``description`` / ``api_description`` when the source carried
  one, else the ``api_description`` field of a ToolBench-style document (``category_name:..., tool_name:...,
  api_name:..., api_description:..., required_params: [...], optional_params: [...], return_schema: ...``:
  ToolBench, ToolLens, the ToolBench environment, the test fixture; empty where the API has none), else
  the ``original`` document; at most :data:`DESCRIPTION_MAX_CHARS` characters.
- ``input_schema`` (a JSON Schema object), only where the catalog has one (``ToolFields.input_schema``):
  ``metadata`` ``input_schema`` / ``inputSchema`` / an OpenAI-style ``parameters`` object; else ToolBench
  parameter lists (``metadata`` ``required_parameters`` / ``optional_parameters``, or the document's
  ``required_params`` / ``optional_params``) turned into ``{"type": "object", "properties": ..., "required": [...]}``.

An index saved before ``tools.jsonl`` existed still loads: its records are :func:`id_record` (the name
from a ``tool::api`` id) unless a catalog is given to the server (``toolret serve --catalog DIR``).
This module imports nothing heavy (it is a code dep of every stage that saves a pipeline).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolret.catalog.model import Catalog, Tool

TOOLS_FILE = "tools.jsonl"
DESCRIPTION_MAX_CHARS = 1000
PROVENANCE_MAX_CHARS = 32_000  # a larger provenance keeps its small entries and counts the rest


def _cap(text: str) -> str:
    text = text.strip()
    return text if len(text) <= DESCRIPTION_MAX_CHARS else text[: DESCRIPTION_MAX_CHARS - 1].rstrip() + "…"


def tool_record(tool: Tool) -> dict[str, Any]:
    """The served record of one catalog tool, read from its fields (see the module docstring)."""
    fields, md = tool.fields, tool.metadata or {}
    name = tool.name
    if name == tool.id:  # no title in the source: the API name its metadata or document carries
        api_name = md.get("api_name") if isinstance(md.get("api_name"), str) else fields.api_name
        name = api_name.strip() or name
    description = next((md[k] for k in ("description", "api_description")
                        if isinstance(md.get(k), str) and md[k].strip()), None)
    if description is None:  # a ToolBench API without description keeps ""; a plain document is its own
        description = fields.description if fields.source == "document" else tool.docs["original"]
    record: dict[str, Any] = {"id": tool.id, "name": name, "tool": tool.tool, "category": tool.category,
                              "description": _cap(description)}
    if fields.input_schema is not None:
        record["input_schema"] = fields.input_schema
    return record


def id_record(tool_id: str) -> dict[str, Any]:
    """The record of a tool known by id only (an index saved without ``tools.jsonl``): ``tool::api`` ids
    (ToolBench) give the API and tool names."""
    tool, sep, name = tool_id.partition("::")
    return {"id": tool_id, "name": name if sep else tool_id, "tool": tool if sep else None, "category": None,
            "description": ""}


@dataclass(frozen=True)
class ToolHit:
    """One retrieved tool: what an agent needs to call it, and the retrieval score. The one hit shape of the
    API (:class:`toolret.ToolSearcher`), ``toolret serve`` (REST and MCP) and the gateway (which adds the
    ``server`` offering the tool); on the wire it is :meth:`to_dict` (``server`` and ``input_schema`` only where
    there is one), and :meth:`from_dict` reads a served one back (e.g. for :mod:`toolret.agent_adapters`)."""

    tool_id: str
    name: str
    score: float | None
    description: str = ""
    tool: str | None = None  # the parent tool (ToolBench's tool_name) where the catalog has one
    category: str | None = None
    input_schema: Mapping[str, Any] | None = field(default=None, compare=False)
    server: str | None = None  # the gateway: the MCP server offering the tool

    @classmethod
    def from_record(cls, record: Mapping[str, Any], score: float | None, tool_id: str | None = None,
                    server: str | None = None) -> ToolHit:
        """The hit of a served tool record (:func:`tool_record`); a score that is not finite (a tool a
        reranker added below every scored one) is ``None``."""
        score = float(score) if score is not None and math.isfinite(score) else None
        return cls(tool_id if tool_id is not None else record["id"], record.get("name") or record["id"], score,
                   record.get("description", ""), record.get("tool"), record.get("category"),
                   record.get("input_schema"), server)

    @classmethod
    def from_dict(cls, hit: Mapping[str, Any]) -> ToolHit:
        return cls(hit["tool_id"], hit["name"], hit.get("score"), hit.get("description", ""), hit.get("tool"),
                   hit.get("category"), hit.get("input_schema"), hit.get("server"))

    def to_dict(self, include_schema: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"tool_id": self.tool_id, "name": self.name}
        if self.server is not None:
            out["server"] = self.server
        out.update(tool=self.tool, category=self.category, description=self.description, score=self.score)
        if include_schema and self.input_schema is not None:
            out["input_schema"] = self.input_schema
        return out


def _compact(value: Any) -> Any:
    """``value`` when its JSON is small; else its small top-level entries and a note for each large one."""
    if len(json.dumps(value, ensure_ascii=False, default=str)) <= PROVENANCE_MAX_CHARS or not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        if len(json.dumps(v, ensure_ascii=False, default=str)) <= PROVENANCE_MAX_CHARS // 8:
            out[k] = v
        else:
            out[k] = f"<{type(v).__name__} of {len(v) if hasattr(v, '__len__') else '?'} entries, omitted>"
    return out


def catalog_summary(catalog: Catalog) -> dict[str, Any]:
    """Size and provenance of a catalog (``pipeline.json: catalog``; MCP ``toolret://catalog``)."""
    return {**catalog.stats(), "provenance": _compact(catalog.provenance)}


def write_tools(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    """``tools.jsonl`` (one record per line, in index order; deterministic bytes)."""
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")


def read_tools(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


__all__ = ["DESCRIPTION_MAX_CHARS", "TOOLS_FILE", "ToolHit", "catalog_summary", "id_record", "read_tools",
           "tool_record", "write_tools"]
