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

Both write a receipt (:mod:`toolret.gateway.receipts`) when the gateway has a log; ``session`` keys the
"shown in an earlier search" memory of calls (the MCP face passes the MCP session).
"""

from __future__ import annotations

import functools
import logging
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Self

import anyio

from toolret.gateway.config import GatewayConfig
from toolret.gateway.receipts import ReceiptLog
from toolret.gateway.tool_index import GatewayIndex
from toolret.gateway.upstream import Upstream
from toolret.errors import ServerDown
from toolret.errors import GatewayError

log = logging.getLogger("toolret.gateway")
MAX_K = 100
MAX_QUERY_CHARS = 2000
SERVER_STAMP = "io.modelcontextprotocol/serverInfo"  # the upstream's _meta identity: not the gateway's


def check_pipeline(config: GatewayConfig) -> None:
    """Fail before connecting anything when the pipeline cannot be built: an unknown spec, no saved index."""
    from toolret.errors import CatalogError

    if config.index is not None:
        from toolret.adapt import resolve_index
        from toolret.pipeline import PIPELINE_FILE

        if not (Path(resolve_index(config.index)) / PIPELINE_FILE).is_file():
            raise CatalogError(f"index {config.index}: not a saved pipeline (no {PIPELINE_FILE})")
        return
    from toolret.config import load_params
    from toolret.registry import parse_spec

    parse_spec(config.pipeline, params=load_params(config.params))


class Gateway:
    """See the module docstring. ``receipts``: a log path, a :class:`ReceiptLog`, or ``None`` (off)."""

    def __init__(self, config: GatewayConfig, *, receipts: str | Path | ReceiptLog | None = None) -> None:
        check_pipeline(config)
        self.config = config
        self.index = GatewayIndex(config.pipeline, index=config.index, params=config.params)
        self.upstreams = {s.name: Upstream(s, config, self._on_tools) for s in config.servers}
        self.receipts = ReceiptLog(receipts) if isinstance(receipts, (str, Path)) else receipts
        self._shown: dict[str, set[str]] = defaultdict(set)
        self._tg: Any = None

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for upstream in self.upstreams.values():
            self._tg.start_soon(upstream.run)
        with anyio.move_on_after(self.config.timeout_s + 5):
            for upstream in self.upstreams.values():
                await upstream.first_attempt.wait()
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        self._tg.cancel_scope.cancel()
        try:
            return await self._tg.__aexit__(*exc)
        finally:
            if self.receipts is not None:
                self.receipts.close()

    async def _on_tools(self, server: str, tools: list[Any]) -> None:
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
        return {"pipeline": self.index.pipeline_name, "n_tools": len(self.index),
                "servers": {name: {**u.status(), "tools": len(self.index.server_tools(name))}
                            for name, u in self.upstreams.items()}}

    # ------------------------------------------------------------------ search
    async def search(self, query: str, k: int = 5, min_score: float | None = None, server: str | None = None,
                     *, caller: str | None = None, session: str = "local") -> dict[str, Any]:
        if not isinstance(query, str) or not query.strip():
            raise GatewayError("query: give the task to find tools for, in plain language")
        if len(query) > MAX_QUERY_CHARS:
            raise GatewayError(f"query: at most {MAX_QUERY_CHARS} characters")
        if not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise GatewayError(f"k: between 1 and {MAX_K}")
        if server is not None and server not in self.upstreams:
            raise GatewayError(f"server: {server!r} is not one of {sorted(self.upstreams)}")
        start = time.perf_counter()
        down = self.down()
        hits, withheld = await anyio.to_thread.run_sync(functools.partial(
            self.index.search, query, k, min_score=min_score, server=server, down=frozenset(down)))
        latency = round((time.perf_counter() - start) * 1000, 2)
        self._shown[session].update(h["tool_id"] for h in hits)
        if self.receipts is not None:
            self.receipts.write("search", caller=caller, session=session, query=query, k=k, min_score=min_score,
                                server=server, shown=[{"id": h["tool_id"], "score": h["score"]} for h in hits],
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


__all__ = ["Gateway", "GatewayError", "check_pipeline"]
