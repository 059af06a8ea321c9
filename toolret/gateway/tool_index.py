"""The gateway's searchable tool set: every upstream server's tools, namespaced, in one pipeline.

- A tool of server ``s`` named ``t`` is ``s__t`` (``id``, what ``call_tool`` takes); its server and original
  name are kept as fields. The catalog tool comes from the MCP importer's own conversion
  (:func:`toolret.catalog.importers.mcp.mcp_tool`: the document, the input schema) and the record agents see
  from the serving code's (:func:`toolret.catalog.tool_records.tool_record`).
- Its category (:func:`tool_category`): what the tool says in its ``_meta`` (``category``, or a namespaced
  ``<prefix>/category`` such as ``io.toolret/category``) or its ``annotations`` (an extra ``category``
  field, where the SDK keeps extras); else its server's configured ``category``; else none.
- :meth:`GatewayIndex.update` takes one server's current ``tools/list`` and diffs it against what the index
  holds for that server (added / removed / changed, by a fingerprint of each tool's document and metadata).
  Nothing changed: nothing is done. Else only the changed tools' entries are rebuilt and the pipeline is
  re-indexed over the current tool set (BM25's statistics are corpus-wide, so its index is rebuilt -- a few
  ms for thousands of tools; a dense side re-encodes only new or changed documents, the others come from
  the project's embedding store). The first index builds the pipeline (:func:`toolret.api.build` for a
  spec; a saved pipeline is loaded and re-indexed over these tools).
- :meth:`GatewayIndex.search` answers over the tools of the servers that are up (the others' tools stay
  indexed but are withheld, and counted), optionally one server's only: a query naming a tool exactly (its
  id, its original name, or ``select:<name>[,<name>...]``, which returns only those) puts it first, whatever
  ``min_score``; other hits below ``min_score`` are dropped. ``category`` keeps one category's tools only
  (case-insensitive), like ``server`` one server's.

Searches and re-indexing run in worker threads, one at a time (a lock): a search never sees a half-built index.
:meth:`GatewayIndex.search_many` answers several searches with one pipeline search (the gateway batches the
searches that arrive while one runs, as ``toolret serve`` does).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolret.adapt import resolve_index
from toolret.catalog.importers.mcp import mcp_tool
from toolret.catalog.model import Catalog, Tool
from toolret.catalog.tool_records import ToolHit, tool_record
from toolret.config import load_params
from toolret.errors import CatalogError
from toolret.gateway.config import SEPARATOR
from toolret.pipeline import Pipeline, build_pipeline
from toolret.roles import Corpus
from toolret.serving.service import warm_up

log = logging.getLogger("toolret.gateway")
SELECT = "select:"


@dataclass(frozen=True)
class SearchRequest:
    """One ``search_tools`` call: the query, ``k``, ``min_score``, the ``server`` / ``category`` it keeps to and
    the servers ``down`` at the time (their tools withheld)."""

    query: str
    k: int = 5
    min_score: float | None = None
    server: str | None = None
    category: str | None = None
    down: frozenset[str] = frozenset()

    def in_scope(self, server: str, category: str | None) -> bool:
        """Whether a (server, lower-cased category) group is one the request asks for."""
        wanted = self.category.strip().lower() if isinstance(self.category, str) else None
        return self.server in (None, server) and (wanted is None or category == wanted)

    def eligible(self, t: GatewayTool) -> bool:
        return t.server not in self.down and self.in_scope(t.server, t.category.lower() if t.category else None)


@dataclass(frozen=True)
class GatewayTool:
    id: str           # <server>__<name>
    server: str
    name: str         # the server's own name for it
    fingerprint: str
    tool: Tool = field(compare=False, repr=False)  # the catalog tool (id = self.id)
    record: dict[str, Any] = field(compare=False, repr=False)

    @property
    def category(self) -> str | None:
        return self.tool.category


@dataclass(frozen=True)
class Diff:
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    tools: tuple[str, ...] = field(default=(), compare=False)  # every indexed id after the update

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def _category_of(fields: Any) -> str | None:
    if not isinstance(fields, Mapping):
        return None
    keys = ["category"] + sorted(k for k in fields if isinstance(k, str) and k.endswith("/category"))
    for key in keys:
        value = fields.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def tool_category(mcp_tool_obj: Any, default: str | None = None) -> str | None:
    """The category an MCP tool names for itself (its ``_meta``, then its ``annotations``' extra fields),
    else ``default`` (its server's configured category)."""
    annotations = getattr(mcp_tool_obj, "annotations", None)
    return (_category_of(getattr(mcp_tool_obj, "meta", None))
            or _category_of(getattr(annotations, "model_extra", None))
            or (default.strip() if isinstance(default, str) and default.strip() else None))


def gateway_tool(server: str, mcp_tool_obj: Any, default_category: str | None = None) -> GatewayTool:
    """One upstream MCP tool as a namespaced catalog tool and served record (its category: see
    :func:`tool_category`)."""

    base = mcp_tool(mcp_tool_obj, server)
    tool_id = f"{server}{SEPARATOR}{base.id}"
    tool = dataclasses.replace(base, id=tool_id, category=tool_category(mcp_tool_obj, default_category),
                               metadata={**base.metadata, "original_name": base.name})
    fingerprint = hashlib.sha256(json.dumps([tool.docs, tool.metadata, tool.category], sort_keys=True,
                                            default=str).encode()).hexdigest()[:16]
    record = {**tool_record(tool), "server": server}
    return GatewayTool(tool_id, server, base.name, fingerprint, tool, record)


class GatewayIndex:
    """See the module docstring. ``pipeline``: a spec name; ``index``: a saved pipeline instead;
    ``categories``: server -> the category of its tools that name none."""

    def __init__(self, pipeline: str = "hybrid", *, index: str | None = None, params: str | None = None,
                 categories: Mapping[str, str] | None = None) -> None:
        self.spec, self.saved, self.params = pipeline, index, params
        self.default_categories = dict(categories or {})
        self._servers: dict[str, dict[str, GatewayTool]] = {}  # server -> original name -> tool
        self._tools: dict[str, GatewayTool] = {}                # id -> tool, in index order
        self._by_name: dict[str, list[GatewayTool]] = {}        # original name -> tools (several servers may share it)
        self._by_lower: dict[str, list[GatewayTool]] = {}       # lower-cased id / name -> tools
        self._per_server: dict[str, int] = {}                   # server -> tool count
        self._per_group: dict[tuple[str, str | None], int] = {}  # (server, lower-cased category) -> tool count
        self._pipeline: Any = None
        self._lock = threading.Lock()
        self.generation = 0  # bumped on every re-index
        self.warm_up_s: float | None = None  # the warm-up search once the pipeline was built (toolret serve's)

    # ------------------------------------------------------------------ contents
    @property
    def pipeline_name(self) -> str:
        return self._pipeline.name if self._pipeline is not None else (self.saved or self.spec)

    def tool_ids(self) -> list[str]:
        return list(self._tools)

    def server_tools(self, server: str) -> list[GatewayTool]:
        return list(self._servers.get(server, {}).values())

    def categories(self) -> list[str]:
        """The categories of the indexed tools (sorted; one spelling per case-insensitive name)."""
        seen: dict[str, str] = {}
        for t in self._tools.values():
            if t.category:
                seen.setdefault(t.category.lower(), t.category)
        return sorted(seen.values(), key=str.lower)

    def __len__(self) -> int:
        return len(self._tools)

    def resolve(self, name: str) -> list[GatewayTool]:
        """The tools ``name`` names: its id; else every tool with that original name."""
        if name in self._tools:
            return [self._tools[name]]
        return list(self._by_name.get(name, ()))

    def _set(self, servers: dict[str, dict[str, GatewayTool]]) -> None:
        """Hold ``servers``' tools, with the lookups a search reads (built here once, not per query: a search
        over 46,879 tools must not walk them all)."""
        tools = {t.id: t for s in servers.values() for t in s.values()}
        by_name: dict[str, list[GatewayTool]] = {}
        by_lower: dict[str, list[GatewayTool]] = {}
        for t in tools.values():
            by_name.setdefault(t.name, []).append(t)
            for key in dict.fromkeys((t.id.lower(), t.name.lower())):
                by_lower.setdefault(key, []).append(t)
        self._servers, self._tools, self._by_name, self._by_lower = servers, tools, by_name, by_lower
        self._per_server = {name: len(s) for name, s in servers.items()}
        groups: dict[tuple[str, str | None], int] = {}
        for t in tools.values():
            key = (t.server, t.category.lower() if t.category else None)
            groups[key] = groups.get(key, 0) + 1
        self._per_group = groups

    # ------------------------------------------------------------------ updates
    def update(self, server: str, listed: list[Any]) -> Diff:
        """Make ``server``'s tools the ``listed`` MCP tools; re-index only when something differs."""
        new: dict[str, GatewayTool] = {}
        for t in listed:
            try:
                gt = gateway_tool(server, t, self.default_categories.get(server))
            except CatalogError as e:
                log.warning("gateway: server %r: skipped a tool: %s", server, e)
                continue
            if gt.name in new:
                log.warning("gateway: server %r lists %r twice; kept the first", server, gt.name)
                continue
            new[gt.name] = gt
        with self._lock:
            old = self._servers.get(server, {})
            diff = Diff(added=tuple(n for n in new if n not in old), removed=tuple(n for n in old if n not in new),
                        changed=tuple(n for n in new if n in old and old[n].fingerprint != new[n].fingerprint))
            if not diff:
                return diff
            # unchanged tools keep their entries; only added / changed ones are new
            before = dict(self._servers)
            self._set({**self._servers,
                       server: {n: (old[n] if n in old and n not in diff.changed else gt) for n, gt in new.items()}})
            try:
                self._reindex()
            except BaseException:  # the index keeps serving what it held (the caller retries this server)
                self._set(before)
                if self._pipeline is not None and self._tools:
                    self._reindex()
                raise
            return dataclasses.replace(diff, tools=tuple(self._tools))

    def adopt(self, other: GatewayIndex) -> None:
        """Index ``other``'s current tools with this index's pipeline (a swap to another model: the tools stay)."""
        with other._lock:
            servers = {name: dict(tools) for name, tools in other._servers.items()}
        with self._lock:
            self._set(servers)
            if self._tools:
                self._reindex()

    def _reindex(self) -> None:
        tools = [t.tool for t in self._tools.values()]
        if not tools:
            self.generation += 1
            return
        corpus = Corpus([t.id for t in tools], [t.docs["original"] for t in tools], tools)
        built = self._pipeline is None
        if built:
            self._pipeline = self._build(tools)
        self._pipeline.index(corpus)
        self.generation += 1
        if built:  # the first caller's search must not load the models (hybrid: 7.6 s on 2 cores)
            self.warm_up_s = warm_up(self._pipeline)
            log.info("gateway: pipeline %s warmed up in %.2f s", self.pipeline_name, self.warm_up_s)

    def _build(self, tools: list[Tool]) -> Any:
        if self.saved is not None:

            return Pipeline.load(resolve_index(self.saved))

        catalog = Catalog(name="gateway", tools=tools, queries=[], qrels={},
                          provenance={"source": "mcp-gateway", "purpose": "serving"})
        pipeline = build_pipeline(self.spec, catalog, load_params(self.params))
        pipeline.fit(catalog)  # unsupervised specs: nothing to learn; the index follows in _reindex
        return pipeline

    # ------------------------------------------------------------------ search
    def _named(self, query: str) -> tuple[list[GatewayTool], bool]:
        """The tools a query names exactly, and whether it is a ``select:`` (only those)."""
        q = query.strip()
        select = q.lower().startswith(SELECT)
        names = [n.strip() for n in q[len(SELECT):].split(",")] if select else [q]
        found: list[GatewayTool] = []
        for n in names:
            hits = self.resolve(n) or list(self._by_lower.get(n.lower(), ()))
            found += [t for t in hits if t not in found]
        return found, select

    def search(self, query: str, k: int = 5, *, min_score: float | None = None, server: str | None = None,
               category: str | None = None,
               down: frozenset[str] | set[str] = frozenset()) -> tuple[list[dict[str, Any]], int]:
        """``(hits, withheld)``: the top ``k`` hits over the tools of servers not ``down`` (of ``server``
        and of ``category`` only, where given), each ``{tool_id, name, server, tool, category, description,
        score, input_schema?, match?}``; ``withheld``: how many tools of down servers the answer could not
        hold."""
        return self.search_many([SearchRequest(query, k, min_score, server, category, frozenset(down))])[0]

    def search_many(self, requests: list[SearchRequest]) -> list[tuple[list[dict[str, Any]], int]]:
        """:meth:`search` of each request, the pipeline run once for all of them (one batch of queries, as deep
        as the deepest request needs): what concurrent searches cost together."""
        with self._lock:
            plans = [self._plan(r) for r in requests]
            ranked = [i for i, (_, select, _, depth) in enumerate(plans) if not select and depth]
            scores: dict[int, dict[str, float | None]] = {i: {} for i in range(len(requests))}
            if ranked and self._pipeline is not None:
                depth = max(plans[i][3] for i in ranked)
                ranking = self._pipeline.search([requests[i].query for i in ranked], depth)
                for row, i in enumerate(ranked):
                    mine = scores[i]
                    for j, s in zip(ranking.indices[row][:plans[i][3]], ranking.scores[row][:plans[i][3]]):
                        if j >= 0 and ranking.tool_ids[j] in self._tools:
                            mine.setdefault(ranking.tool_ids[j], float(s) if math.isfinite(s) else None)
            return [self._answer(r, plan, scores[i]) for i, (r, plan) in enumerate(zip(requests, plans))]

    def _plan(self, r: SearchRequest) -> tuple[list[GatewayTool], bool, int, int]:
        """``(named tools, select, withheld, search depth)`` of a request (depth 0: no pipeline search)."""
        named, select = self._named(r.query)
        withheld = sum(n for (s, c), n in self._per_group.items() if s in r.down and r.in_scope(s, c))
        hidden = sum(n for (s, c), n in self._per_group.items() if s in r.down or not r.in_scope(s, c))
        depth = min(len(self._tools), r.k + hidden) if self._tools and not select else 0
        return named, select, withheld, depth

    def _answer(self, r: SearchRequest, plan, scores: dict[str, float | None]) -> tuple[list[dict[str, Any]], int]:
        named, _, withheld, _ = plan
        hits = [{**self._hit(t, scores.get(t.id)), "match": "exact"} for t in named if r.eligible(t)]
        shown = {h["tool_id"] for h in hits}
        for tool_id, score in scores.items():
            t = self._tools[tool_id]
            if tool_id in shown or not r.eligible(t):
                continue
            if r.min_score is not None and (score is None or score < r.min_score):
                continue
            hits.append(self._hit(t, score))
        return hits[:r.k], withheld

    @staticmethod
    def _hit(t: GatewayTool, score: float | None) -> dict[str, Any]:
        r = t.record
        return ToolHit(t.id, t.name, score, r.get("description", ""), t.server, t.category, r.get("input_schema"),
                       server=t.server).to_dict()


__all__ = ["Diff", "GatewayIndex", "GatewayTool", "SearchRequest", "gateway_tool", "tool_category"]
