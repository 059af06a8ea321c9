"""A tool's typed fields, and the one renderer and the one parser of ToolBench-style documents.

Sources ship a tool either as a record (ToolBench's ``api_list``, the ToolBench environment's JSON) or as a
rendered string only (ToolLens' BEIR corpus). The ToolBench-style ``original`` document::

    category_name:<c>, tool_name:<t>, api_name:<a>, api_description:<d>, required_params: [...],
    optional_params: [...], return_schema: {...}

is written by :func:`render_toolbench_document` (the ToolBench loaders) and read back by
:func:`parse_toolbench_document` (its inverse: ``tests/catalog/test_tool_fields.py``), the only code that
reads a document string. :func:`tool_fields` gives every :class:`~toolret.catalog.model.Tool` its
:class:`ToolFields` (``Tool.fields``): parsed from such a document, else from ToolBench keys of the tool's
metadata, else its plain text (``"<name>: <description>"`` as the BEIR and MTRB loaders write it) with the
metadata's parameters and input schema. Cleanup renders the ``cleaned`` document from these fields
(:mod:`toolret.catalog.cleanup`) and serving reads them (:mod:`toolret.catalog.tool_records`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol


class ToolLike(Protocol):
    """What :func:`tool_fields` reads of a :class:`~toolret.catalog.model.Tool` (which imports this module)."""

    id: str
    name: str
    docs: dict[str, str]
    tool: str | None
    category: str | None
    metadata: dict[str, Any] | None

_TYPES = {"string": "string", "str": "string", "enum": "string", "number": "number", "float": "number",
          "double": "number", "integer": "integer", "int": "integer", "boolean": "boolean", "bool": "boolean",
          "array": "array", "list": "array", "object": "object", "dict": "object"}


@dataclass
class ToolFields:
    """What a tool is, field by field.

    Attributes:
        api_name: the API's own name ("" where the source gives none but an id).
        description: what the API does, as its source states it.
        tool_name / category: the parent tool and category where the source has a hierarchy.
        required / optional: parameters, ``{"name", "type"?, "description"?, "default"?}`` each.
        returns: the return schema or template where the source has one.
        method: the HTTP method where the source has one.
        source: where they came from: ``"document"`` (a ToolBench-style document), ``"metadata"`` (ToolBench
            keys of the tool's metadata) or ``"text"`` (a plain document).
        input_schema: a JSON Schema object of the input where the source has parameters.
    """

    api_name: str
    description: str
    tool_name: str | None = None
    category: str | None = None
    required: list[dict[str, Any]] = field(default_factory=list)
    optional: list[dict[str, Any]] = field(default_factory=list)
    returns: Any = None
    method: str | None = None
    source: str = "text"
    input_schema: dict[str, Any] | None = None

    @property
    def structured(self) -> bool:
        """Parsed from a record (a ToolBench-style document or metadata), not plain text."""
        return self.source != "text"


# -- the ToolBench-style document --------------------------------------------------------------------------


def render_toolbench_document(category: str, tool_name: str, api_name: str, description: str,
                              required: Any, optional: Any, returns: Any) -> str:
    """The ToolBench-style ``original`` document (the form ToolLens ships and COLT / ToolRet index)."""
    return (f"category_name:{category}, tool_name:{tool_name}, api_name:{api_name}, api_description:{description}, "
            f"required_params: {json.dumps(required, ensure_ascii=False)}, "
            f"optional_params: {json.dumps(optional, ensure_ascii=False)}, "
            f"return_schema: {json.dumps(returns, ensure_ascii=False)}")


_TOOLBENCH = re.compile(
    r"category_name:(?P<category>.*?), tool_name:(?P<tool>.*?), api_name:(?P<api>.*?), "
    r"api_description:(?P<desc>.*), required_params:\s*(?P<req>\[.*?\]), optional_params:\s*(?P<opt>\[.*?\]), "
    r"return_schema:\s*(?P<ret>.*)$", re.S)


def _json_or_raw(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text.strip()


def param_list(value: Any) -> list[dict[str, Any]]:
    """Parameters as ``{"name", ...}`` dicts from a list (of dicts or names), a JSON string of one, or a
    ``{name: spec}`` / JSON Schema ``properties`` mapping; entries without a name are dropped."""
    if isinstance(value, str):
        value = _json_or_raw(value)
    if isinstance(value, dict):  # {"name": {...}} or a JSON-schema "properties" dict
        value = [{"name": k, **(v if isinstance(v, dict) else {"description": str(v)})}
                 for k, v in (value.get("properties", value)).items()]
    if not isinstance(value, list):
        return []
    params = []
    for p in value:
        if isinstance(p, dict) and str(p.get("name") or "").strip():
            params.append(p)
        elif isinstance(p, str) and p.strip():
            params.append({"name": p})
    return params


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


def _lists_schema(required: Any, optional: Any) -> dict[str, Any] | None:
    """The input schema of two decoded parameter lists; ``None`` unless both are lists."""
    if not isinstance(required, list) or not isinstance(optional, list):
        return None
    return params_schema(required, optional)


def parse_toolbench_document(text: str) -> ToolFields | None:
    """The fields of a ToolBench-style document (the inverse of :func:`render_toolbench_document`), or
    ``None`` for any other text. A prefix before ``category_name:`` (a BEIR ``title: ``) is ignored."""
    start = text.find("category_name:")
    if start < 0:
        return None
    m = _TOOLBENCH.search(text, start)
    if not m:
        return None
    required, optional = _json_or_raw(m["req"]), _json_or_raw(m["opt"])
    return ToolFields(api_name=m["api"].strip(), description=m["desc"], tool_name=m["tool"].strip(),
                      category=m["category"].strip(), required=param_list(required), optional=param_list(optional),
                      returns=_json_or_raw(m["ret"]), source="document",
                      input_schema=_lists_schema(required, optional))


# -- a Tool's fields ----------------------------------------------------------------------------------------


def metadata_schema(md: dict[str, Any]) -> dict[str, Any] | None:
    """The input schema a tool's metadata carries: ``input_schema`` / ``inputSchema`` (MCP), an
    OpenAI-style ``parameters`` object, or ToolBench parameter lists; ``None`` where it has none."""
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


def tool_fields(tool: ToolLike) -> ToolFields:
    """The fields of ``tool`` (``Tool.fields``): its ToolBench-style document, else ToolBench keys of its
    metadata, else its plain text; parent and category from the tool where the document has none."""
    text = tool.docs["original"]
    md = tool.metadata or {}
    parsed = parse_toolbench_document(text)
    if parsed is not None:
        parsed.api_name = parsed.api_name or tool.name
        parsed.tool_name = parsed.tool_name or tool.tool
        parsed.category = parsed.category or tool.category
        parsed.method = md.get("method")
        schema = metadata_schema(md)
        parsed.input_schema = schema if schema is not None else parsed.input_schema
        return parsed
    if "api_description" in md or "required_parameters" in md:
        return ToolFields(api_name=str(md.get("api_name") or tool.name), description=str(md.get("api_description") or ""),
                          tool_name=md.get("tool_name") or tool.tool, category=md.get("category_name") or tool.category,
                          required=param_list(md.get("required_parameters") or []),
                          optional=param_list(md.get("optional_parameters") or []),
                          returns=md.get("template_response") or md.get("return_schema"),
                          method=md.get("method"), source="metadata", input_schema=metadata_schema(md))
    name = tool.name if tool.name != tool.id else ""
    description = text
    for prefix in {name, tool.tool or ""} - {""}:  # the BEIR and MTRB loaders write "title: text"
        if description.startswith(prefix + ":"):
            description = description[len(prefix) + 1:]
            break
    return ToolFields(api_name=name, description=description, tool_name=tool.tool, category=tool.category,
                      required=param_list(md.get("parameters") or md.get("required_parameters") or []),
                      returns=md.get("return_schema") or md.get("template_response"), method=md.get("method"),
                      input_schema=metadata_schema(md))


__all__ = ["ToolFields", "metadata_schema", "param_list", "params_schema", "parse_toolbench_document",
           "render_toolbench_document", "tool_fields"]
