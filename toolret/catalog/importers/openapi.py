"""OpenAPI 3 file (JSON or YAML) -> catalog: one tool per operation (``toolret import-openapi``).

Per operation (``paths.<path>.<method>``):

- ``id`` / ``name``: its ``operationId``, else ``"METHOD /path"`` (e.g. ``"GET /opening-hours"``);
- ``tool``: the API's ``info.title``; ``category``: the operation's first tag, else the title;
- ``docs["original"]``: a readable document: name and summary, method and path, description, every
  parameter (location, type, required or not, description) and the request body (media type, schema
  summary, its top-level properties);
- ``metadata``: ``method``, ``path``, ``operation_id``, ``tags``, ``description`` (summary + description,
  what a served hit shows), ``parameter_locations`` (name -> path / query / header / cookie), ``server``
  (the first ``servers`` URL) and ``input_schema``: a self-contained JSON Schema object with one property
  per parameter (path-level parameters merged, the operation's win) and ``body`` (the request body's
  schema, ``application/json`` preferred), ``required`` listing the required ones.

Local references (``#/components/...``, any ``#/`` JSON pointer) are resolved and inlined; a schema that
refers to itself is cut where it recurs (``{"type": ..., "$comment": "recursive reference to <ref> ..."}``).
Errors (:class:`CatalogError`) name the file and the operation: not OpenAPI 3, a ``$ref`` that does not
resolve or is not local, a ``$ref`` cycle, duplicate ``operationId`` s (both operations named), malformed
parameters. An operation without ``responses`` is accepted.
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from toolret.catalog.importers.queries import imported_catalog
from toolret.catalog.importers.text import name_words, schema_summary, slug
from toolret.catalog.loaders._read import read_text
from toolret.catalog.model import Catalog, Tool
from toolret.catalog.validation import MAX_DOC_CHARS
from toolret.errors import CatalogError
from toolret.provenance import sha256_file

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
BODY = "body"  # the input-schema property holding the request body ("request_body" if a parameter has that name)


def load_spec(path: str | Path) -> dict[str, Any]:
    """The parsed document (JSON, or YAML); YAML dates stay strings."""
    import json

    import yaml

    path = Path(path)
    text = read_text(path)
    try:
        # JSON first where it looks like JSON (PyYAML rejects the tab indentation JSON may have)
        doc = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise CatalogError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise CatalogError(f"{path}{line}: not valid JSON or YAML ({getattr(e, 'problem', None) or e})") from None
    if not isinstance(doc, dict):
        raise CatalogError(f"{path}: not an OpenAPI 3 document (top level is {type(doc).__name__}, not an object)")
    version = doc.get("openapi")
    if not isinstance(version, str) or not version.startswith("3."):
        found = (f"openapi: {version!r}" if "openapi" in doc else
                 f"swagger: {doc['swagger']!r}; convert it to OpenAPI 3 first" if "swagger" in doc else
                 "no 'openapi' field")
        raise CatalogError(f"{path}: not an OpenAPI 3 document ({found})")
    return _jsonable(doc)


def _jsonable(value: Any) -> Any:
    """YAML timestamps -> ISO strings, non-string keys (``200:``) -> strings."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    return value


class _Refs:
    """Local ``$ref`` resolution over one document; ``where`` prefixes every error (file: operation)."""

    def __init__(self, doc: dict[str, Any], where: str) -> None:
        self.doc, self.where = doc, where

    def target(self, ref: Any) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise CatalogError(f"{self.where}: $ref {ref!r} is not a local reference ('#/components/...'); "
                               "external references are not supported")
        node: Any = self.doc
        seen = "#"
        for raw in ref[2:].split("/"):
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise CatalogError(f"{self.where}: $ref {ref!r} does not resolve (no {part!r} under {seen!r})")
            seen += "/" + raw
        return node

    def deref(self, node: Any) -> Any:
        """``node`` with its ``$ref`` chain followed (sibling keys kept over the target's)."""
        chain: list[str] = []
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in chain:
                raise CatalogError(f"{self.where}: $ref cycle {' -> '.join(chain + [ref])}")
            chain.append(ref)
            target = self.target(ref)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **siblings} if isinstance(target, dict) else target
        return node

    def inline(self, schema: Any, stack: tuple[str, ...] = ()) -> Any:
        """A self-contained copy of ``schema``: references inlined, a recurring one cut."""
        if isinstance(schema, list):
            return [self.inline(v, stack) for v in schema]
        if not isinstance(schema, dict):
            return schema
        if "$ref" in schema:
            ref = schema["$ref"]
            if ref in stack:
                target = self.target(ref)
                kind = target.get("type", "object") if isinstance(target, dict) else "object"
                return {"type": kind, "$comment": f"recursive reference to {ref}, not expanded"}
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            target = self.target(ref)
            merged = {**target, **siblings} if isinstance(target, dict) else target
            return self.inline(merged, stack + (ref,))
        return {k: self.inline(v, stack) for k, v in schema.items()}


def _text(value: Any) -> str:
    return re.sub(r"[ \t]+", " ", value).strip() if isinstance(value, str) else ""


def _parameters(refs: _Refs, path_item: dict[str, Any], op: dict[str, Any]) -> list[dict[str, Any]]:
    """Path-level then operation parameters, dereferenced; the operation's win on (name, in)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for level, params in (("path item", path_item.get("parameters")), ("operation", op.get("parameters"))):
        if params is None:
            continue
        if not isinstance(params, list):
            raise CatalogError(f"{refs.where}: {level} 'parameters' must be a list")
        for i, raw in enumerate(params):
            p = refs.deref(raw)
            if not isinstance(p, dict) or not _text(p.get("name")) or p.get("in") not in ("path", "query", "header",
                                                                                         "cookie"):
                raise CatalogError(f"{refs.where}: {level} parameter {i} needs a 'name' and 'in' "
                                   "(path, query, header or cookie)")
            merged[(p["name"].strip(), p["in"])] = p
    return list(merged.values())


def _media_schema(refs: _Refs, content: Any) -> tuple[str | None, dict[str, Any]]:
    """``(media type, inlined schema)`` of a ``content`` map, ``application/json`` preferred."""
    if not isinstance(content, dict) or not content:
        return None, {}
    media = "application/json" if "application/json" in content else next(iter(content))
    entry = refs.deref(content[media])
    schema = refs.inline(entry.get("schema", {})) if isinstance(entry, dict) else {}
    return media, schema if isinstance(schema, dict) else {}


def _operation_tool(refs: _Refs, title: str, server: str | None, route: str, method: str,
                    path_item: dict[str, Any], op: dict[str, Any]) -> Tool:
    label = f"{method.upper()} {route}"
    oid = op.get("operationId")
    if oid is not None and (not isinstance(oid, str) or not oid.strip() or re.search(r"[\t\r\n]", oid)):
        raise CatalogError(f"{refs.where}: operationId {oid!r} must be a non-empty string without tabs or newlines")
    tool_id = oid.strip() if oid else label
    tags = [t for t in op.get("tags") or [] if isinstance(t, str) and t.strip()]
    summary, description = _text(op.get("summary")), _text(op.get("description"))

    properties: dict[str, Any] = {}
    required: list[str] = []
    locations: dict[str, str] = {}
    head = f"{tool_id} ({name_words(tool_id)})" if oid and name_words(tool_id) else tool_id
    lines = [f"{head}: {summary}" if summary else head, f"{label} ({title}{' / ' + tags[0] if tags else ''})"]
    lines += [description] if description else []
    params = _parameters(refs, path_item, op)
    if params:
        lines.append("Parameters:")
    for p in params:
        name, where = p["name"].strip(), p["in"]
        schema = refs.inline(p["schema"]) if isinstance(p.get("schema"), dict) else _media_schema(refs, p.get("content"))[1]
        prop = dict(schema)
        if _text(p.get("description")):
            prop["description"] = _text(p.get("description"))
        is_required = bool(p.get("required")) or where == "path"
        properties.setdefault(name, prop)
        locations.setdefault(name, where)
        if is_required and name not in required:
            required.append(name)
        lines.append(f"- {name} ({where}, {schema_summary(schema)}, {'required' if is_required else 'optional'})"
                     + (f": {prop['description']}" if "description" in prop else ""))

    body = refs.deref(op.get("requestBody")) if op.get("requestBody") is not None else None
    media = None
    if isinstance(body, dict):
        media, schema = _media_schema(refs, body.get("content"))
        prop = dict(schema)
        if _text(body.get("description")):
            prop["description"] = _text(body.get("description"))
        body_key = BODY if BODY not in properties else "request_body"  # a parameter is already called "body"
        properties[body_key] = prop
        if body.get("required"):
            required.append(body_key)
        lines.append(f"Request body ({media or 'no media type'}, {'required' if body.get('required') else 'optional'})"
                     + (f": {prop['description']}" if "description" in prop else "") + f": {schema_summary(schema)}")
        body_required = set(schema.get("required") or [])
        for key, sub in (schema.get("properties") or {}).items():
            if isinstance(sub, dict) and _text(sub.get("description")):
                lines.append(f"  - {key} ({schema_summary(sub, 2)}, "
                             f"{'required' if key in body_required else 'optional'}): {_text(sub['description'])}")

    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    metadata: dict[str, Any] = {"method": method.upper(), "path": route, "operation_id": oid.strip() if oid else None,
                                "tags": tags, "input_schema": input_schema, "parameter_locations": locations}
    if summary or description:
        metadata["description"] = ". ".join(x.rstrip(".") for x in (summary, description) if x) + "."
    if media:
        metadata["request_body_media_type"] = media
    if server:
        metadata["server"] = server
    if op.get("deprecated") is True:
        metadata["deprecated"] = True
    return Tool(id=tool_id, name=tool_id, docs={"original": _cap("\n".join(lines))}, tool=title,
                category=tags[0] if tags else title, metadata=metadata)


def _cap(doc: str) -> str:
    return doc if len(doc) <= MAX_DOC_CHARS else doc[: MAX_DOC_CHARS - 1].rstrip() + "…"


def operation_tools(doc: dict[str, Any], source: str) -> list[Tool]:
    """One tool per operation of a parsed OpenAPI 3 document, in document order (``source``: the file,
    for errors)."""
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    title = _text(info.get("title")) or Path(source).stem
    servers = doc.get("servers")
    server = servers[0].get("url") if isinstance(servers, list) and servers and isinstance(servers[0], dict) else None
    paths = doc.get("paths")
    if not isinstance(paths, dict) or not paths:
        raise CatalogError(f"{source}: no 'paths' (an OpenAPI file with operations is needed)")
    tools: list[Tool] = []
    first: dict[str, str] = {}
    for route, raw_item in paths.items():
        if not isinstance(route, str) or not route.startswith("/") or route != route.strip() \
                or re.search(r"[\t\r\n]", route):
            raise CatalogError(f"{source}: path {route!r} must begin with '/' (no surrounding whitespace, tabs or "
                               "newlines): an OpenAPI path")
        item = _Refs(doc, f"{source}: path {route!r}").deref(raw_item)
        if not isinstance(item, dict):
            raise CatalogError(f"{source}: path {route!r} must be an object")
        for method, op in item.items():
            if method not in HTTP_METHODS:
                continue
            label = f"{method.upper()} {route}"
            where = f"{source}: operation {label}" + (f" ({op['operationId']})" if isinstance(op, dict)
                                                      and isinstance(op.get("operationId"), str) else "")
            if not isinstance(op, dict):
                raise CatalogError(f"{where}: must be an object")
            tool = _operation_tool(_Refs(doc, where), title, server, route, method, item, op)
            if tool.id in first:
                kind = "operationId" if op.get("operationId") else "tool id"
                raise CatalogError(f"{source}: duplicate {kind} {tool.id!r}: {first[tool.id]} and {label}")
            first[tool.id] = label
            tools.append(tool)
    if not tools:
        raise CatalogError(f"{source}: no operations under 'paths'")
    return tools


def import_openapi(spec: str | Path, *, name: str | None = None, queries: str | Path | None = None) -> Catalog:
    """The validated catalog of an OpenAPI 3 file (``name``: default the slug of ``info.title``;
    ``queries``: a queries file, see :mod:`toolret.catalog.importers.queries`)."""

    spec = Path(spec)
    doc = load_spec(spec)
    tools = operation_tools(doc, str(spec))
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    title = tools[0].tool or spec.stem
    provenance = {"source": "openapi", "spec": spec.name, "sha256": sha256_file(spec), "openapi": doc["openapi"],
                  "title": title, "api_version": info.get("version"), "n_operations": len(tools)}
    return imported_catalog(name or slug(title) or spec.stem, tools, provenance, queries)


__all__ = ["import_openapi", "load_spec", "operation_tools"]
