"""ToolBench test groups over the ToolBench / StableToolBench tool environment (``toolbench-env-*``).

Queries, query ids and gold are those of :mod:`toolret.catalog.loaders.toolbench` (same ``tool_key``
ids, so results compare one to one); the corpus is the tool environment ``toolbench-toolenv``
(``tools/<...>/<category>/<tool>.json``, 12,301 tools, 46,803 API entries, 49 categories) united with the
groups' ``api_list`` entries and deduplicated, so every gold API occurs exactly once.

Matching (each of the 2,479 distinct group APIs, in first-occurrence order, against the environment):

1. *Exact*: the group API's ``(tool_name, api_name)``, stripped, equals ``(T, A)`` of an environment
   API where ``T`` is any of its tool file's ``tool_name``, ``title``, ``name`` or file stem and ``A``
   its ``name``, all stripped. Several candidates: the one whose category folder equals the group
   API's ``category_name`` first, then the first in file path and list order.
2. *Normalised*: both names compared after :func:`normalise_name` (NFKC, case folding, every
   character that is not a letter or digit removed: ``"Search trips"`` == ``"search-trips"``), and the
   candidate must be in the group API's category. ToolBench's ``_v2``-style suffixes are kept: they
   tell apart distinct RapidAPI tools that share a title, so stripping them matches another tool's
   API (``Twitter_v4`` would match ``twitter_v2``).
3. Otherwise the API is *added from api_list*: its document is the group's entry (``api_document``),
   as in ``toolbench-*``.

An environment API matches at most one group API. A matched API takes the group's id, ``name`` and
``tool`` (so gold and ToolRerank's hierarchy keys stay those of ``toolbench-*``), the category of its
tool file, and the environment's document: every environment API, matched or not, is rendered from
the environment by one rule, so gold documents are not told apart from the others by their form.

Documents (``original``): :func:`toolret.catalog.loaders.toolbench.api_document` of category (the
folder), tool name (``tool_name``; else ``name``, ``title``, the file stem), API name, ``description``,
required / optional parameters and a return template derived from the API's JSON ``schema``
(:func:`schema_template`: properties -> type names, the form of ``template_response``; ``{}`` when the
API has none). ``code`` / ``convert_code`` / ``url`` are not included. A document longer than the
validation limit (``MAX_DOC_CHARS``) is rendered without its return template, and cut to the limit if
still longer (counted: ``oversized_documents``).

Hierarchy: ``Tool.category`` = the category folder, ``Tool.tool`` = the tool name, ``Tool.name`` = the
API name. The rest of the environment is added with id ``tool_key(tool name, API name)``.

Bad input:

* a tool file that is not valid UTF-8 JSON, not an object, whose ``api_list`` is not a list, or with an
  API entry that is not an object: :class:`CatalogError` naming the file (nothing is dropped quietly);
  ``api_list`` missing, null or empty: a tool without APIs (counted, ``tools_without_apis``);
* an API without a name (missing, not a string, blank): skipped, counted (``apis_without_name``) with
  its ``file[index]`` listed (``apis_without_name_at``);
* U+FFFD (text already undecodable upstream; the catalog readers reject it as corruption) is removed
  from names and documents, the APIs counted (``replacement_characters_removed``, listed);
* two APIs with the same id: the first wins; group APIs come first, then the environment in file
  path and list order. A later one with the same document is merged (``identical_duplicates``), one
  with a different document is dropped (``duplicate_conflicts``, ``file[index]`` listed);
* files: every ``*.json`` under ``tools/`` and every one ``MANIFEST.tsv`` lists must be both on disk
  and listed, each file's sha256 equal to the manifest's (the same :func:`verify_files` as the other
  loaders: hashing the 153 MB takes ~0.5 s, about a sixth of the parsing); provenance records the
  manifest's sha256 and the number of verified files instead of 12,301 checksums.

On the real data (``provenance["matching"]``): 1,858 of the 2,479 group APIs match exactly (SOURCE.md
says 1,857, comparing unstripped names: the environment's ``"SEO Keyword Research "`` has a trailing
space), 11 after normalisation, 610 are added from api_list; see ``tests/catalog/test_toolbench_env.py``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolret.catalog.loaders._read import read_json
from toolret.catalog.loaders.toolbench import (GROUPS, api_document, api_list_union, group_dataset_name, group_queries,
                                                read_groups, tool_key)
from toolret.catalog.model import Catalog, Tool
from toolret.errors import CatalogError
from toolret.catalog.source import read_manifest, verify_files

TOOLS_DIR = "tools"
# = toolret.catalog.validation.MAX_DOC_CHARS (the docs.length check; a test keeps them equal). Not
# imported: the loader is a code dep of every stage that loads a named dataset, validation is not.
MAX_DOC_CHARS = 20_000
MAX_SCHEMA_DEPTH = 8  # nesting levels of a return template; deeper objects / arrays become "dict" / "list"
MAX_LISTED = 200  # file[index] locations listed per count in the provenance

REPLACEMENT_CHAR = "\ufffd"  # U+FFFD: text already undecodable upstream; catalog readers reject it

_JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "NoneType",
               "object": "dict", "array": "list"}


def normalise_name(text: str) -> str:
    """Names compared at the normalised tier: NFKC, case folded, only letters and digits kept."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).casefold())


def schema_template(schema: Any) -> Any:
    """A JSON schema as a ToolBench ``template_response``: ``{"properties": {"id": {"type": "integer"}}}``
    -> ``{"id": "int"}``, arrays -> ``[item template]``; ``{}`` for no schema (``None``, ``""``, ``{}``)."""
    if not isinstance(schema, dict) or not schema:
        return {}
    return _template(schema, 0)


def _template(node: Any, depth: int) -> Any:
    if not isinstance(node, dict):
        return "any"
    kind = node.get("type")
    if isinstance(kind, list):  # ["string", "null"]
        kind = next((k for k in kind if k != "null"), "null")
    props = node.get("properties")
    if isinstance(props, dict) and kind in (None, "object"):
        if depth >= MAX_SCHEMA_DEPTH:
            return "dict"
        return {str(k): _template(v, depth + 1) for k, v in props.items()}
    if kind == "array" or (kind is None and "items" in node):
        items = node.get("items")
        if isinstance(items, list):
            items = items[0] if items else None
        if depth >= MAX_SCHEMA_DEPTH:
            return "list"
        return [_template(items, depth + 1)] if isinstance(items, dict) and items else []
    return _JSON_TYPES.get(kind, kind) if isinstance(kind, str) else "any"


@dataclass
class EnvAPI:
    """One API of the tool environment."""

    file: str             # "<category>/<tool>.json" (the path below tools/<...>/)
    index: int            # position in the file's api_list
    category: str         # the category folder
    tool: str             # the tool's name
    tool_names: tuple[str, ...]  # every name the tool answers to at the exact tier (stripped, distinct)
    name: str             # the API's name, stripped
    method: str | None
    document: str


@dataclass
class ToolEnv:
    apis: list[EnvAPI]
    counts: dict[str, Any]
    manifest_sha256: str


def _tool_name(data: dict[str, Any], stem: str) -> tuple[str, tuple[str, ...]]:
    """``(the tool's name, every name it answers to)``: ``tool_name``, else ``name``, ``title``, the stem."""
    def clean(value: Any) -> str:
        return value.replace(REPLACEMENT_CHAR, "").strip() if isinstance(value, str) else ""

    names = [clean(v) for v in (data.get("tool_name"), data.get("title"), data.get("name"), stem) if clean(v)]
    preferred = [clean(v) for v in (data.get("tool_name"), data.get("name"), data.get("title")) if clean(v)]
    return (preferred or [stem])[0], tuple(dict.fromkeys(names))


def env_document(category: str, tool: str, api: dict[str, Any], where: str) -> tuple[str, str | None]:
    """The ``original`` document of an environment API and, when it was too long, what was done."""
    if api.get("description") is not None and not isinstance(api["description"], str):
        raise CatalogError(f"{where}: field 'description' must be a string, got {type(api['description']).__name__}")
    for key in ("required_parameters", "optional_parameters"):
        if api.get(key) is not None and not isinstance(api[key], list):
            raise CatalogError(f"{where}: field {key!r} must be a list, got {type(api[key]).__name__}")
    fields = {"category_name": category, "tool_name": tool, "api_name": api["name"].strip(),
              "api_description": api.get("description") or "",
              "required_parameters": api.get("required_parameters") or [],
              "optional_parameters": api.get("optional_parameters") or [],
              "template_response": schema_template(api.get("schema"))}
    doc = api_document(fields)
    if len(doc) <= MAX_DOC_CHARS:
        return doc, None
    doc = api_document({**fields, "template_response": {}})
    if len(doc) <= MAX_DOC_CHARS:
        return doc, "return_template_dropped"
    return doc[:MAX_DOC_CHARS], "cut"


def read_toolenv(folder: Path) -> ToolEnv:
    """Verify every tool file against ``MANIFEST.tsv`` and read the environment's APIs (file path order)."""
    manifest = read_manifest(folder)
    on_disk = {p.relative_to(folder).as_posix() for p in (folder / TOOLS_DIR).rglob("*.json")} \
        if (folder / TOOLS_DIR).is_dir() else set()
    listed = {rel for rel in manifest if rel.startswith(TOOLS_DIR + "/") and rel.endswith(".json")}
    files = sorted(on_disk | listed)
    if not files:
        raise CatalogError(f"{folder / TOOLS_DIR}: no tool files (*.json) found or listed in MANIFEST.tsv")
    verify_files(folder, files)  # raises naming a missing, unlisted or modified file
    manifest_sha = hashlib.sha256((folder / "MANIFEST.tsv").read_bytes()).hexdigest()
    apis: list[EnvAPI] = []
    without_name: list[str] = []
    replaced: list[str] = []
    no_apis = 0
    oversized: dict[str, list[str]] = {}
    categories: set[str] = set()
    for rel in files:
        path = folder / rel
        parts = Path(rel).parts
        if len(parts) < 3:
            raise CatalogError(f"{path}: a tool file must lie in a category folder (tools/.../<category>/<tool>.json)")
        category, short = parts[-2], f"{parts[-2]}/{parts[-1]}"
        data = read_json(path)
        if not isinstance(data, dict):
            raise CatalogError(f"{path}: expected a JSON object (one tool), got {type(data).__name__}")
        api_list = data.get("api_list")
        if api_list is not None and not isinstance(api_list, list):
            raise CatalogError(f"{path}: field 'api_list' must be a list, got {type(api_list).__name__}")
        if not api_list:
            no_apis += 1
            continue
        categories.add(category)
        tool, names = _tool_name(data, path.stem)
        tool_replaced = any(isinstance(v, str) and REPLACEMENT_CHAR in v
                            for v in (data.get("tool_name"), data.get("title"), data.get("name")))
        for j, api in enumerate(api_list):
            where = f"{path}: api_list[{j}]"
            if not isinstance(api, dict):
                raise CatalogError(f"{where}: expected a JSON object, got {type(api).__name__}")
            raw_name = api.get("name")
            name = raw_name.replace(REPLACEMENT_CHAR, "").strip() if isinstance(raw_name, str) else ""
            if not name:
                without_name.append(f"{short}[{j}]")
                continue
            doc, how = env_document(category, tool, {**api, "name": name}, where)
            if how:
                oversized.setdefault(how, []).append(f"{short}[{j}]")
            if tool_replaced or REPLACEMENT_CHAR in raw_name or REPLACEMENT_CHAR in doc:
                replaced.append(f"{short}[{j}]")
                doc = doc.replace(REPLACEMENT_CHAR, "")
            method = api.get("method")
            apis.append(EnvAPI(file=short, index=j, category=category, tool=tool, tool_names=names, name=name,
                               method=method if isinstance(method, str) else None, document=doc))
    counts = {"tool_files": len(files), "categories": len(categories), "tools_without_apis": no_apis,
              "apis": len(apis) + len(without_name), "apis_without_name": len(without_name),
              "apis_without_name_at": without_name[:MAX_LISTED],
              "replacement_characters_removed": len(replaced),
              "replacement_characters_removed_at": replaced[:MAX_LISTED],
              "oversized_documents": {k: len(v) for k, v in sorted(oversized.items())},
              "oversized_documents_at": {k: v[:MAX_LISTED] for k, v in sorted(oversized.items())}}
    return ToolEnv(apis=apis, counts=counts, manifest_sha256=manifest_sha)


def match_group_apis(group_apis: dict[str, dict[str, Any]], env: list[EnvAPI]) -> dict[str, tuple[int, str]]:
    """``{group id: (position in env, "exact" | "normalised")}`` for the group APIs found in ``env``."""
    exact: dict[tuple[str, str], list[int]] = {}
    normal: dict[tuple[str, str], list[int]] = {}
    for i, e in enumerate(env):
        for t in e.tool_names:
            exact.setdefault((t, e.name), []).append(i)
        n_api = normalise_name(e.name)
        for t in dict.fromkeys(normalise_name(t) for t in e.tool_names):
            if t and n_api:
                normal.setdefault((t, n_api), []).append(i)
    claimed: set[int] = set()
    out: dict[str, tuple[int, str]] = {}
    for key, api in group_apis.items():
        tool, name = api["tool_name"].strip(), api["api_name"].strip()
        category = str(api.get("category_name") or "").strip()
        cands = [i for i in exact.get((tool, name), []) if i not in claimed]
        pick = next((i for i in cands if env[i].category == category), cands[0] if cands else None)
        kind = "exact"
        if pick is None:
            cands = [i for i in normal.get((normalise_name(tool), normalise_name(name)), [])
                     if i not in claimed and env[i].category == category]
            pick, kind = (cands[0] if cands else None), "normalised"
        if pick is not None:
            claimed.add(pick)
            out[key] = (pick, kind)
    return out


def load_toolbench_env_group(groups_folder: Path, toolenv_folder: Path, group: str) -> Catalog:
    """One ToolBench test group over the tool environment (see the module docstring for every rule)."""
    if group not in GROUPS:
        raise CatalogError(f"unknown ToolBench group {group!r}; choose one of {GROUPS}")
    checksums, groups = read_groups(groups_folder)
    group_apis = api_list_union(groups)
    env = read_toolenv(toolenv_folder)
    matched = match_group_apis(group_apis, env.apis)

    tools: dict[str, Tool] = {}
    for key, api in group_apis.items():
        name, tool = api["api_name"].strip(), api["tool_name"].strip()
        if key in matched:
            i, kind = matched[key]
            e = env.apis[i]
            tools[key] = Tool(id=key, name=name, tool=tool, category=e.category, docs={"original": e.document},
                              metadata={"method": e.method, "origin": f"toolenv-{kind}", "source_file": e.file})
        else:
            tools[key] = Tool(id=key, name=name, tool=tool, category=api.get("category_name"),
                              docs={"original": api_document(api)},
                              metadata={"method": api.get("method"), "origin": "api_list"})
    claimed = {i for i, _ in matched.values()}
    identical, conflicts = 0, []
    for i, e in enumerate(env.apis):
        if i in claimed:
            continue
        key = tool_key(e.tool, e.name)
        first = tools.get(key)
        if first is None:
            tools[key] = Tool(id=key, name=e.name, tool=e.tool, category=e.category, docs={"original": e.document},
                              metadata={"method": e.method, "origin": "toolenv", "source_file": e.file})
        elif first.docs["original"] == e.document:
            identical += 1
        else:
            conflicts.append(f"{e.file}[{e.index}]")

    queries, qrels = group_queries(*groups[group], tools)
    kinds = {k: kind for k, (_, kind) in matched.items()}

    def tally(keys: set[str] | list[str]) -> dict[str, int]:
        return {"matched_exactly": sum(kinds.get(k) == "exact" for k in keys),
                "matched_after_normalisation": sum(kinds.get(k) == "normalised" for k in keys),
                "added_from_api_list": sum(k not in kinds for k in keys)}

    gold_all = {k for _, rows in groups.values() for row in rows for k in
                (tool_key(*pair) for pair in row.get("relevant APIs") or [])}
    gold_group = {t for q in qrels.values() for t in q}
    other_category = sum(1 for k, (i, kind) in matched.items() if kind == "exact"
                         and env.apis[i].category != str(group_apis[k].get("category_name") or "").strip())
    ordered = sorted(tools.values(), key=lambda t: (t.category or "", t.tool or "", t.name, t.id))
    provenance = {
        "source": [groups_folder.name, toolenv_folder.name], "loader": "toolbench-env",
        "checksums": {**checksums, f"{toolenv_folder.name}/MANIFEST.tsv": env.manifest_sha256},
        "toolenv_verification": {"files_verified": env.counts["tool_files"], "manifest_sha256": env.manifest_sha256,
                                 "rule": "every tool file's sha256 checked against MANIFEST.tsv"},
        "corpus": "toolbench-toolenv APIs united with the 6 StableToolBench groups' api_list, deduplicated "
                  "(rules: toolret/catalog/loaders/toolbench_env.py)",
        "matching": {"group_apis": len(group_apis), **tally(list(group_apis)),
                     "matched_exactly_in_another_category": other_category,
                     "gold_apis_all_groups": len(gold_all), "gold_all_groups": tally(sorted(gold_all)),
                     "gold_apis_this_group": len(gold_group), "gold_this_group": tally(sorted(gold_group)),
                     "normalisation": "NFKC, casefold, non-alphanumerics removed; same category required"},
        "toolenv": {**env.counts, "identical_duplicates": identical, "duplicate_conflicts": len(conflicts),
                    "duplicate_conflicts_at": conflicts[:MAX_LISTED]},
        "corpus_size": len(ordered),
    }
    return Catalog(name=group_dataset_name(group, "toolbench-env-"), tools=ordered, queries=queries, qrels=qrels,
                   provenance=provenance)
