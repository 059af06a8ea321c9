"""What an agent sees of a tool: a small record per tool, written as ``tools.jsonl`` beside a saved pipeline.

A saved pipeline's components hold tool ids only; :meth:`toolret.pipeline.Pipeline.save` writes one
record per indexed tool (``tools.jsonl``, in index order) and a summary of the catalog it was fitted on
(``pipeline.json: catalog``), so a served pipeline answers with names, descriptions and input schemas
without the catalog. A record::

    {"id", "name", "tool", "category", "description", "input_schema"?}

- ``name``: the API's own name (``Tool.name``; where that is only the id, as in a BEIR corpus without
  titles, ``metadata.api_name`` or the document's ``api_name:``); ``tool`` / ``category``: its parent
  tool and category where the source has a hierarchy.
- ``description``: the tool's ``metadata`` ``description`` / ``api_description`` when the source carried
  one, else the ``api_description`` field of a ToolBench-style document (``category_name:..., tool_name:...,
  api_name:..., api_description:..., required_params: [...], optional_params: [...], return_schema: ...``:
  ToolBench, ToolLens, the ToolBench environment, the test fixture; empty where the API has none), else
  the ``original`` document; at most :data:`DESCRIPTION_MAX_CHARS` characters.
- ``input_schema`` (a JSON Schema object), only where the catalog has one: ``metadata`` ``input_schema``
  / ``inputSchema`` / an OpenAI-style ``parameters`` object; else ToolBench parameter lists (``metadata``
  ``required_parameters`` / ``optional_parameters``, or the document's ``required_params`` /
  ``optional_params``) turned into ``{"type": "object", "properties": ..., "required": [...]}``.

An index saved before ``tools.jsonl`` existed still loads: its records are :func:`id_record` (the name
from a ``tool::api`` id) unless a catalog is given to the server (``toolret serve --catalog DIR``).
This module imports nothing heavy (it is a code dep of every stage that saves a pipeline).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolret.catalog.model import Catalog, Tool

TOOLS_FILE = "tools.jsonl"
DESCRIPTION_MAX_CHARS = 1000
PROVENANCE_MAX_CHARS = 32_000  # a larger provenance keeps its small entries and counts the rest

_TYPES = {"string": "string", "str": "string", "enum": "string", "number": "number", "float": "number",
          "double": "number", "integer": "integer", "int": "integer", "boolean": "boolean", "bool": "boolean",
          "array": "array", "list": "array", "object": "object", "dict": "object"}
_NAME, _DESC, _REQ, _OPT = "api_name:", ", api_description:", ", required_params: ", ", optional_params: "


def _cap(text: str) -> str:
    text = text.strip()
    return text if len(text) <= DESCRIPTION_MAX_CHARS else text[: DESCRIPTION_MAX_CHARS - 1].rstrip() + "…"


def parse_toolbench_document(doc: str) -> tuple[str, str, list | None, list | None] | None:
    """``(api_name, api_description, required_params, optional_params)`` of a ToolBench-style document
    (the lists ``None`` where they do not parse as JSON lists); ``None`` for any other document."""
    i = doc.find(_DESC)
    j = doc.find(_REQ, i) if i >= 0 else -1
    if j < 0:
        return None
    n = doc.rfind(_NAME, 0, i)
    name = doc[n + len(_NAME): i].strip() if n >= 0 else ""
    desc = doc[i + len(_DESC): j].strip()
    dec = json.JSONDecoder()
    try:
        req, end = dec.raw_decode(doc, j + len(_REQ))
        if not doc.startswith(_OPT, end):
            return name, desc, None, None
        opt, _ = dec.raw_decode(doc, end + len(_OPT))
    except ValueError:
        return name, desc, None, None
    if not isinstance(req, list) or not isinstance(opt, list):
        return name, desc, None, None
    return name, desc, req, opt


def params_schema(required: Iterable[Any], optional: Iterable[Any]) -> dict[str, Any]:
    """A JSON Schema object from ToolBench parameter lists (``{"name", "type", "description", "default"}``
    each; entries without a name are skipped, unknown types left untyped)."""
    props: dict[str, dict[str, Any]] = {}
    names_required: list[str] = []
    for is_required, params in ((True, required), (False, optional)):
        for p in params:
            if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"].strip():
                continue
            name = p["name"].strip()
            prop: dict[str, Any] = {}
            t = _TYPES.get(str(p.get("type") or "").strip().lower())
            if t:
                prop["type"] = t
            if isinstance(p.get("description"), str) and p["description"].strip():
                prop["description"] = p["description"].strip()
            if p.get("default") not in (None, ""):
                prop["default"] = p["default"]
            props.setdefault(name, prop)
            if is_required and name not in names_required:
                names_required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if names_required:
        schema["required"] = names_required
    return schema


def _metadata_schema(md: dict[str, Any]) -> dict[str, Any] | None:
    for key in ("input_schema", "inputSchema"):
        if isinstance(md.get(key), dict):
            return md[key]
    params = md.get("parameters")
    if isinstance(params, dict) and ("properties" in params or params.get("type") == "object"):
        return params
    req, opt = md.get("required_parameters"), md.get("optional_parameters")
    if isinstance(req, list) or isinstance(opt, list):
        return params_schema(req if isinstance(req, list) else [], opt if isinstance(opt, list) else [])
    return None


def tool_record(tool: Tool) -> dict[str, Any]:
    """The served record of one catalog tool (see the module docstring)."""
    md = tool.metadata or {}
    doc = tool.docs.get("original") or next(iter(tool.docs.values()), "")
    parsed = parse_toolbench_document(doc)
    name = tool.name
    if name == tool.id:  # no title in the source: the API name its metadata or document carries
        api_name = md.get("api_name") if isinstance(md.get("api_name"), str) else (parsed[0] if parsed else "")
        name = api_name.strip() or name
    description = next((md[k] for k in ("description", "api_description")
                        if isinstance(md.get(k), str) and md[k].strip()), None)
    if description is None:
        description = parsed[1] if parsed else doc  # a ToolBench API without description keeps ""
    schema = _metadata_schema(md)
    if schema is None and parsed and parsed[2] is not None:
        schema = params_schema(parsed[2], parsed[3] or [])
    record: dict[str, Any] = {"id": tool.id, "name": name, "tool": tool.tool, "category": tool.category,
                              "description": _cap(description)}
    if schema is not None:
        record["input_schema"] = schema
    return record


def id_record(tool_id: str) -> dict[str, Any]:
    """The record of a tool known by id only (an index saved without ``tools.jsonl``): ``tool::api`` ids
    (ToolBench) give the API and tool names."""
    tool, sep, name = tool_id.partition("::")
    return {"id": tool_id, "name": name if sep else tool_id, "tool": tool if sep else None, "category": None,
            "description": ""}


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


__all__ = ["DESCRIPTION_MAX_CHARS", "TOOLS_FILE", "catalog_summary", "id_record", "params_schema",
           "parse_toolbench_document", "read_tools", "tool_record", "write_tools"]
