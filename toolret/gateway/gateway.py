"""The gateway's Python API: many MCP servers behind one tool search and one call.

    >>> from toolret.gateway import Gateway, load_config                       # doctest: +SKIP
    >>> async with Gateway(load_config("gateway.yaml"), receipts="receipts.jsonl") as gw:
    ...     answer = await gw.search("list the files of a folder", k=3)
    ...     result = await gw.call_tool(answer["hits"][0]["tool_id"], {"path": "/tmp"})

Entering starts one :class:`~toolret.gateway.upstream.Upstream` task per server and waits (at most
``timeout_s``) until each has connected or failed once; leaving closes every connection (stdio servers
are stopped). Tools arrive in the :class:`~toolret.gateway.tool_index.GatewayIndex` with each listing.

- :meth:`Gateway.search`: ``{query, pipeline, n_tools, hits, withheld, servers_down}`` (see
  :meth:`GatewayIndex.search`); a bad request raises :class:`GatewayError`.
- :meth:`Gateway.call_tool`: the owning server's ``CallToolResult`` as it sent it (its ``_meta`` server
  stamp aside) -- a tool error stays a tool error -- and its protocol errors (:class:`mcp.MCPError`) raised
  unchanged; an unknown or ambiguous name or a down server raise :class:`GatewayError`.

A config's ``explore`` share of searches is shown with one adjacent pair swapped
(:mod:`toolret.gateway.explore`); its ``interleave`` share interleaves the adapt champion and challenger
(:mod:`toolret.gateway.interleave`), and :meth:`Gateway.refresh_adapted` (every ``adapt_poll_s``) swaps to a
promoted champion without failing a search. Both write a receipt (:mod:`toolret.gateway.receipts`) when the gateway has a log; ``session`` keys the
"shown in an earlier search" memory of calls (the MCP face passes the MCP session).

The pipeline (:func:`choose_pipeline`, logged and in :meth:`Gateway.status`): the config's ``index`` where
given; else the catalog's adapt champion where the config's ``adapt`` finds one; else the ``pipeline``
spec (default ``hybrid``).
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import anyio

from toolret.adapt import resolve_index
from toolret.adapt.champions import CHALLENGER, CHAMPION, served_identity
from toolret.config import load_params
from toolret.errors import CatalogError, GatewayError, ServerDown
from toolret.gateway.config import NAME_RE, GatewayConfig
from toolret.gateway.explore import Explorer
from toolret.gateway.interleave import Interleaver
from toolret.gateway.receipts import ReceiptLog
from toolret.gateway.tool_index import GatewayIndex, SearchRequest
from toolret.gateway.upstream import Upstream
from toolret.paths import project_dir
from toolret.pipeline import PIPELINE_FILE
from toolret.registry import parse_spec

log = logging.getLogger("toolret.gateway")
MAX_K = 100
MAX_QUERY_CHARS = 2000
SERVER_STAMP = "io.modelcontextprotocol/serverInfo"  # the upstream's _meta identity: not the gateway's


@dataclass(frozen=True)
class PipelineChoice:
    """What the gateway indexes with: ``index`` (a saved pipeline's folder) or else the spec ``pipeline``;
    ``source``: ``index`` (the config's), ``adapt`` (the catalog's champion) or ``pipeline``; ``why``:
    one line saying so (logged at start, in :meth:`Gateway.status`)."""

    pipeline: str
    index: str | None
    source: str
    why: str


def find_champion(ref: str, alias: str = CHAMPION) -> tuple[str | None, str]:
    """``(folder, where)`` of the adapt champion ``ref`` names (see :mod:`toolret.gateway.config`), or
    ``(None, why not)`` when there is none: no such folder, no champion in it yet, a registry without it.
    ``alias`` ``challenger``: the challenger of the same catalog instead (``<out>/challenger``,
    ``models:/adapt-<name>@challenger``)."""

    if ref.startswith("models:/"):
        candidates = [ref if alias == CHAMPION else ref.rsplit("@", 1)[0] + f"@{alias}"]
    elif Path(ref).expanduser().exists() or not NAME_RE.match(ref):
        path = Path(ref).expanduser()
        candidates = [str(path.parent / alias) if alias != CHAMPION and path.name == CHAMPION else ref]
    else:  # a bare catalog name: adapt's usual out-dir, then the registry
        candidates = [str(project_dir() / "data" / "adapt" / ref), f"models:/adapt-{ref}@{alias}"]
    missed = []
    for candidate in candidates:
        try:
            folder = Path(resolve_index(candidate)).expanduser()
        except Exception as e:  # noqa: BLE001 - no registry, no such model or alias: no champion
            missed.append(f"{candidate}: {type(e).__name__}: {e}")
            continue
        for where in ((folder, folder / alias) if folder.name != alias or alias == CHAMPION else (folder,)):
            if (where / PIPELINE_FILE).is_file():
                return str(where), candidate
        missed.append(f"{candidate}: no {PIPELINE_FILE} in {folder} nor {folder / 'champion'}")
    return None, "; ".join(missed)


def choose_pipeline(config: GatewayConfig) -> PipelineChoice:
    """The config's ``index``; else the adapt champion ``adapt`` names, where one exists; else the spec
    ``pipeline``. Fails before connecting anything when that cannot be built (an unknown spec, an ``index``
    that is not a saved pipeline); a missing champion is no error. The choice is logged (``toolret.gateway``:
    info; a configured champion that is not there: a warning saying why)."""
    choice = _choose(config)
    (log.warning if choice.source == "pipeline" and config.adapt else log.info)("gateway: %s", choice.why)
    return choice


def _choose(config: GatewayConfig) -> PipelineChoice:
    if config.index is not None:
        folder = resolve_index(config.index)
        if not (Path(folder) / PIPELINE_FILE).is_file():
            raise CatalogError(f"index {config.index}: not a saved pipeline (no {PIPELINE_FILE})")
        return PipelineChoice(config.pipeline, folder, "index", f"pipeline: the saved index {config.index}")
    missed = None
    if config.adapt is not None:
        folder, where = find_champion(config.adapt)
        if folder is not None:
            try:
                meta = json.loads((Path(folder) / PIPELINE_FILE).read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise CatalogError(f"adapt {config.adapt}: {folder}/{PIPELINE_FILE} unreadable ({e})") from None
            catalog = (meta.get("catalog") or {}).get("name")
            source = f"{folder}" + (f", from {where}" if where != folder else "")
            return PipelineChoice(config.pipeline, folder, "adapt", f"pipeline: the adapt champion "
                                  f"{meta.get('name')} of {catalog or config.adapt} ({source})")
        missed = where
    parse_spec(config.pipeline, params=load_params(config.params))
    why = f"pipeline: {config.pipeline}"
    return PipelineChoice(config.pipeline, None, "pipeline",
                          why + (f" (no adapt champion for {config.adapt}: {missed})" if missed else ""))


def _signature(folder: str | None) -> Any:
    """What tells a served folder's content apart: its path and the inodes of it and its ``pipeline.json``
    (an atomic replace makes new ones)."""
    if folder is None:
        return None
    try:
        return (str(folder), Path(folder).stat().st_ino, (Path(folder) / PIPELINE_FILE).stat().st_ino)
    except OSError:
        return (str(folder), None, None)


class SearchBatches:
    """Concurrent searches answered together: a search that arrives while another batch runs joins the batch
    that is open; the open batch's first search waits for the running one, closes it and runs it in a worker
    thread (:meth:`GatewayIndex.search_many`: one pipeline search for all). Alone, a search runs at once."""

    class _Batch:
        def __init__(self) -> None:
            self.requests: list[SearchRequest] = []
            self.done = anyio.Event()
            self.answers: list[Any] | None = None
            self.error: BaseException | None = None

    def __init__(self, index: GatewayIndex) -> None:
        self.index = index
        self._open: SearchBatches._Batch | None = None
        self._running = anyio.Lock()
        self.sizes: list[int] = []  # each batch's size (for tests and the status)

    async def search(self, request: SearchRequest) -> Any:
        batch, leader = self._open, self._open is None
        if leader:
            batch = self._open = SearchBatches._Batch()
        slot = len(batch.requests)
        batch.requests.append(request)
        if leader:
            async with self._running:
                self._open = None  # later searches open the next batch
                self.sizes.append(len(batch.requests))
                try:
                    batch.answers = await anyio.to_thread.run_sync(self.index.search_many, batch.requests)
                except Exception as e:  # noqa: BLE001 - every search of the batch gets it
                    batch.error = e
                finally:
                    batch.done.set()
        else:
            await batch.done.wait()
        if batch.error is not None:
            raise batch.error
        return batch.answers[slot]


class Gateway:
    """See the module docstring. ``receipts``: a log path, a :class:`ReceiptLog`, or ``None`` (off)."""

    def __init__(self, config: GatewayConfig, *, receipts: str | Path | ReceiptLog | None = None) -> None:
        self.choice = choose_pipeline(config)
        self.config = config
        self.index = GatewayIndex(self.choice.pipeline, index=self.choice.index, params=config.params,
                                  categories={s.name: s.category for s in config.servers if s.category})
        self.upstreams = {s.name: Upstream(s, config, self._on_tools) for s in config.servers}
        self.receipts = ReceiptLog(receipts) if isinstance(receipts, (str, Path)) else receipts
        self._shown: dict[str, set[str]] = defaultdict(set)
        self._batches = SearchBatches(self.index)
        self.explorer = Explorer(config.explore, config.explore_seed)
        self.interleaver = Interleaver(config.interleave, config.interleave_seed)
        self._signature = _signature(self.choice.index)
        self._swap = anyio.Lock()  # a model swap and a tools update, one at a time
        self.challenger: GatewayIndex | None = None
        self._challenger_batches: SearchBatches | None = None
        self.teams: dict[str, str] = {}  # champion / challenger -> how receipts name them
        self._challenger_signature: Any = None
        self.swaps: list[dict[str, Any]] = []
        self._set_challenger(self._find_challenger())
        self._tg: Any = None
        self.closed = anyio.Event()  # set once __aexit__ has stopped every server

    @property
    def entered(self) -> bool:
        """Whether :meth:`__aenter__` has started the servers (``closed`` is set once they are stopped)."""
        return self._tg is not None

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            for upstream in self.upstreams.values():
                self._tg.start_soon(upstream.run)
            if self.config.adapt is not None and self.config.index is None and self.config.adapt_poll_s > 0:
                self._tg.start_soon(self._poll_adapted)
            with anyio.move_on_after(self.config.timeout_s + 5):
                for upstream in self.upstreams.values():
                    await upstream.first_attempt.wait()
        except BaseException as e:  # cancelled (a signal) while servers connect: stop the ones started
            with anyio.CancelScope(shield=True):
                await self.__aexit__(type(e), e, e.__traceback__)
            raise
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        """Stops every server (the SDK closes a stdio server's stdin, then terminates and kills its process
        group, whether it was connected or still in ``initialize``); ``closed`` is set once done."""
        self._tg.cancel_scope.cancel()
        try:
            return await self._tg.__aexit__(*exc)
        finally:
            if self.receipts is not None:
                self.receipts.close()
            self.closed.set()

    # ------------------------------------------------------------------ champion / challenger
    def _find_challenger(self) -> str | None:
        """The challenger's folder where interleaving is on and the champion came from ``adapt``."""
        if self.config.interleave <= 0 or self.choice.source != "adapt" or self.config.adapt is None:
            return None
        folder, where = find_champion(self.config.adapt, CHALLENGER)
        if folder is None:
            log.warning("gateway: interleave %s but no challenger for %s: %s", self.config.interleave,
                        self.config.adapt, where)
        return folder

    def _set_challenger(self, folder: str | None, index: GatewayIndex | None = None) -> None:
        if folder is None:
            self.challenger = self._challenger_batches = None
            self.teams = {}
        else:
            self.challenger = index or GatewayIndex(self.choice.pipeline, index=folder, params=self.config.params,
                                                    categories=self.index.default_categories)
            self._challenger_batches = SearchBatches(self.challenger)
            self.teams = {CHAMPION: served_identity(self.choice.index, CHAMPION),
                          CHALLENGER: served_identity(folder, CHALLENGER)}
        self._challenger_signature = _signature(folder)

    def _rebuilt(self, folder: str) -> GatewayIndex:
        new = GatewayIndex(self.choice.pipeline, index=folder, params=self.config.params,
                           categories=self.index.default_categories)
        new.adopt(self.index)  # the current tools, indexed by the other model (warmed up once built)
        return new

    async def refresh_adapted(self) -> dict[str, Any]:
        """Re-resolve the ``adapt`` champion (and challenger, when interleaving); a folder whose content changed
        (a promotion replaces ``<out>/champion``; the registry's alias moved) is loaded and indexed off the
        request path, then swapped in by one reference assignment, as ``toolret serve``'s reload does
        (:meth:`toolret.serving.service.SearchService.reload`): searches in flight finish on the index they
        started with, none fails; a failed load keeps the old one serving (raised). Returns what changed."""
        if self.config.adapt is None or self.config.index is not None:
            return {}
        async with self._swap:
            choice = await anyio.to_thread.run_sync(_choose, self.config)
            changed: dict[str, Any] = {}
            if choice.index is not None and _signature(choice.index) != self._signature:
                new = await anyio.to_thread.run_sync(self._rebuilt, choice.index)
                previous = self.choice.why
                self.index, self._batches, self.choice = new, SearchBatches(new), choice
                self._signature = _signature(choice.index)
                changed[CHAMPION] = {"previous": previous, "current": choice.why}
            if self.config.interleave > 0:
                folder = await anyio.to_thread.run_sync(self._find_challenger)
                if changed or _signature(folder) != self._challenger_signature:
                    index = await anyio.to_thread.run_sync(self._rebuilt, folder) if folder else None
                    self._set_challenger(folder, index)
                    changed[CHALLENGER] = folder
            if changed:
                log.info("gateway: swapped %s", changed)
                self.swaps.append(changed)
            return changed

    async def _poll_adapted(self) -> None:
        while True:
            await anyio.sleep(self.config.adapt_poll_s)
            try:
                await self.refresh_adapted()
            except Exception as e:  # noqa: BLE001 - the old model keeps serving
                log.warning("gateway: could not swap the adapt model (%s: %s); still serving %s",
                            type(e).__name__, e, self.choice.why)

    async def _on_tools(self, server: str, tools: list[Any]) -> None:
        async with self._swap:
            if self.challenger is not None:
                await anyio.to_thread.run_sync(self.challenger.update, server, tools)
            diff = await anyio.to_thread.run_sync(self.index.update, server, tools)
            if diff:
                log.info("gateway: server %r: %d added, %d removed, %d changed; %d tools indexed", server,
                         len(diff.added), len(diff.removed), len(diff.changed), len(self.index))
                if self.receipts is not None:
                    self.receipts.write("tools", server=server, added=list(diff.added), removed=list(diff.removed),
                                        changed=list(diff.changed), tools=list(diff.tools))

    def down(self) -> set[str]:
        return {name for name, u in self.upstreams.items() if u.state != "up"}

    def status(self) -> dict[str, Any]:
        """Every server's state and indexed tools; the pipeline."""
        return {"pipeline": self.index.pipeline_name, "pipeline_source": self.choice.source,
                "pipeline_choice": self.choice.why, "n_tools": len(self.index), "warm_up_s": self.index.warm_up_s,
                "interleave": {"share": self.config.interleave, **self.teams} if self.teams else None,
                "swaps": len(self.swaps),
                "categories": self.index.categories(),
                "servers": {name: {**u.status(), "tools": len(self.index.server_tools(name))}
                            for name, u in self.upstreams.items()}}

    # ------------------------------------------------------------------ search
    async def search(self, query: str, k: int = 5, min_score: float | None = None, server: str | None = None,
                     category: str | None = None, *, caller: str | None = None,
                     session: str = "local") -> dict[str, Any]:
        if not isinstance(query, str) or not query.strip():
            raise GatewayError("query: give the task to find tools for, in plain language")
        if len(query) > MAX_QUERY_CHARS:
            raise GatewayError(f"query: at most {MAX_QUERY_CHARS} characters")
        if not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise GatewayError(f"k: between 1 and {MAX_K}")
        if server is not None and server not in self.upstreams:
            raise GatewayError(f"server: {server!r} is not one of {sorted(self.upstreams)}")
        if category is not None:
            known = self.index.categories()
            if not isinstance(category, str) or category.strip().lower() not in {c.lower() for c in known}:
                raise GatewayError(f"category: {category!r} is not one of {known}")
        start = time.perf_counter()
        down = self.down()
        request = SearchRequest(query, k, min_score, server, category, frozenset(down))
        batches, challenger, teams = self._batches, self._challenger_batches, self.teams  # one swap's state
        hits, withheld = await batches.search(request)
        if challenger is not None and self.interleaver.draw():
            other, _ = await challenger.search(request)
            hits, explored = self.interleaver.show(hits, other, k, teams)
        else:
            hits, explored = self.explorer.show(hits)
        latency = round((time.perf_counter() - start) * 1000, 2)
        self._shown[session].update(h["tool_id"] for h in hits)
        if self.receipts is not None:
            self.receipts.write("search", caller=caller, session=session, query=query, k=k, min_score=min_score,
                                server=server, category=category,
                                **(explored or {"shown": [{"id": h["tool_id"], "score": h["score"]} for h in hits]}),
                                withheld=withheld, latency_ms=latency)
        return {"query": query, "pipeline": self.index.pipeline_name, "n_tools": len(self.index), "hits": hits,
                "withheld": withheld, "servers_down": sorted(down)}

    # ------------------------------------------------------------------ calls
    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *, caller: str | None = None,
                        session: str = "local") -> Any:
        start = time.perf_counter()
        found = self.index.resolve(name) if isinstance(name, str) else []
        tool_id = found[0].id if len(found) == 1 else name
        receipt: dict[str, Any] = {"caller": caller, "session": session, "tool": tool_id,
                                   "server": found[0].server if len(found) == 1 else None,
                                   "shown_before": tool_id in self._shown[session]}
        try:
            if not found:
                raise GatewayError(f"unknown tool {name!r}: search_tools gives tool ids (<server>__<tool>)")
            if len(found) > 1:
                raise GatewayError(f"{name!r} names tools of several servers ({', '.join(t.id for t in found)}): "
                                   "call one by its id")
            if arguments is not None and not isinstance(arguments, dict):
                raise GatewayError("arguments: a JSON object of the tool's input")
            try:
                result = await self.upstreams[found[0].server].call(found[0].name, arguments or {})
            except ServerDown as e:
                raise GatewayError(f"{e}; its tools are back in search once it reconnects") from None
        except Exception as e:
            self._receipt("call", start, receipt, is_error=True, error=f"{type(e).__name__}: {e}")
            raise
        if result.meta and SERVER_STAMP in result.meta:
            meta = {k: v for k, v in result.meta.items() if k != SERVER_STAMP}
            result = result.model_copy(update={"meta": meta or None})
        self._receipt("call", start, receipt, is_error=bool(getattr(result, "is_error", False)))
        return result

    def _receipt(self, event: str, start: float, fields: dict[str, Any], **more: Any) -> None:
        if self.receipts is not None:
            self.receipts.write(event, **fields, **more, latency_ms=round((time.perf_counter() - start) * 1000, 2))


__all__ = ["Gateway", "GatewayError", "PipelineChoice", "SearchBatches", "choose_pipeline", "find_champion"]
