"""One upstream MCP server: its connection, kept alive, and its tools, kept current.

:meth:`Upstream.run` (a task of the gateway) loops forever: connect with the official SDK
(:class:`mcp.Client`: stdio for a ``command``, streamable HTTP for a ``url``), list every page of
``tools/list``, hand the tools to the gateway (``on_tools``), mark the server **up**, then watch it.

The protocol era: the ``initialize`` handshake (the newest handshake version both speak, 2025-11-25 with the
SDK); 2026-07-28 only with a server that refuses the handshake (remembered for its reconnections). Why: a
change is announced with ``notifications/tools/list_changed`` (``session.send_tool_list_changed()``) by
most servers, and the SDK's server drops that notification on 2026-07-28 connections (its ``NotifyOnlyOutbound``:
at that era change notifications travel only on ``subscriptions/listen`` streams), so a gateway on 2026-07-28
never heard of a tool added at runtime before the next ``relist_s``. On the handshake era the notification
arrives; a server that announces only on listen streams (``ctx.notify_tools_changed()``) is heard on
2026-07-28-only connections, else it is kept current by ``relist_s``.

- a ``notifications/tools/list_changed`` (through the client's message handler) or a ``subscriptions/listen``
  tools event (2026-07-28 servers that announce ``tools.listChanged``) re-lists at once;
- every ``heartbeat_s`` it pings the server (MCP ``ping``; ``server/discover`` on 2026-07-28 connections, which
  removed ping; an error answer counts, as from a server that does not implement it): a dead one is noticed
  (a request on a closed connection fails at once) without listing its tools -- a server of 46,879 tools
  spends seconds of CPU on each ``tools/list``;
- every ``relist_s`` it re-lists anyway: servers that never notify are kept current;
- the connection's incoming stream ending (a stdio server that exited), a forwarded call that finds the
  connection closed, or a listen stream that drops, ends the session.

Then the server is **down** (its tools stay indexed, withheld from search by the gateway) and is reconnected
after a backoff that doubles from ``backoff_min_s`` to ``backoff_max_s`` (+-10 % jitter), reset once a
connection succeeds. A stdio server is restarted by reconnecting (the SDK launches its command again).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio

from toolret import __version__
from toolret.catalog.importers.mcp import list_all_tools
from toolret.errors import ServerDown
from toolret.gateway.config import GatewayConfig, ServerConfig

log = logging.getLogger("toolret.gateway")


def describe(exc: BaseException) -> str:
    """The innermost error of an exception group, as ``Type: message`` (a lost connection: its reason)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) if isinstance(exc, ServerDown) else f"{type(exc).__name__}: {exc}"


def stream_error(exc: Exception) -> str:
    """One short line for an error the transport handed the session instead of a message: a stdout line that
    is not JSON-RPC (quoted, cut at 100 characters), or another transport error."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        errors = exc.errors()
        line = errors[0].get("input") if errors else None
        why = errors[0]["msg"] if len(errors) == 1 else "not a JSON-RPC message"
        text = line if isinstance(line, str) else json.dumps(line, ensure_ascii=False, default=str)
        quoted = repr(text[:100] + ("..." if len(text) > 100 else ""))
        return f"ignored a line of its stdout that is not JSON-RPC ({why}): {quoted}"
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"transport error: {type(exc).__name__}: {first[:200]}"


class _NoBadLineTraceback(logging.Filter):
    """Drops the SDK's traceback for a stdout line that is not JSON-RPC (``mcp.client.stdio``: one per line,
    screens long): the session hands the same error to :meth:`Upstream._on_message`, which logs one line
    naming the server."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to parse JSONRPC message")


def _quiet_bad_lines() -> None:
    sdk = logging.getLogger("mcp.client.stdio")
    if not any(isinstance(f, _NoBadLineTraceback) for f in sdk.filters):
        sdk.addFilter(_NoBadLineTraceback())


def handshake_refused(exc: BaseException) -> bool:
    """Whether a failed connect is the server refusing the ``initialize`` handshake (an error answer to it, or
    a version the handshake does not know): a server that speaks 2026-07-28 only. A lost connection or no
    answer is no refusal."""
    from mcp import MCPError
    from mcp_types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT

    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)
    return isinstance(exc, RuntimeError) and "Unsupported protocol version" in str(exc)


class Upstream:
    """See the module docstring. ``on_tools(server, tools)`` is awaited with every listing."""

    def __init__(self, config: ServerConfig, settings: GatewayConfig,
                 on_tools: Callable[[str, list[Any]], Awaitable[None]]) -> None:
        self.config, self.settings, self._on_tools = config, settings, on_tools
        _quiet_bad_lines()
        self.name = config.name
        self.state = "starting"  # starting | up | down
        self.error: str | None = None
        self.since = time.time()
        self.connects = 0
        self.client: Any = None
        self.first_attempt = anyio.Event()  # set once the first connection succeeded or failed
        self._wake = anyio.Event()
        self._lost: str | None = None
        self.mode = "legacy"  # the initialize handshake first; "auto" (2026-07-28) once the server refused it
        self.lists = 0  # tools/list listings made (every connection's first, notifications, relist_s)
        self.pings = 0  # heartbeat pings answered

    def status(self) -> dict[str, Any]:
        client = self.client
        return {"state": self.state, "transport": self.config.transport, "since": self.since,
                "connects": self.connects, "error": self.error, "lists": self.lists, "pings": self.pings,
                "protocol": client.protocol_version if client is not None else None}

    async def _relist(self, client: Any) -> None:
        await self._on_tools(self.name, await list_all_tools(client))
        self.lists += 1

    # ------------------------------------------------------------------ the loop
    async def run(self) -> None:
        delay = self.settings.backoff_min_s
        while True:
            connects = self.connects
            try:
                await self._session()
            except Exception as e:  # noqa: BLE001 - spawn, transport and protocol errors, often in a group
                self.error = describe(e)
            self.client = None
            if self.state != "down":
                log.warning("gateway: server %r is down: %s", self.name, self.error)
                self.state, self.since = "down", time.time()
            self.first_attempt.set()
            delay = self.settings.backoff_min_s if self.connects > connects else delay  # it had come up
            await anyio.sleep(delay * random.uniform(0.9, 1.1))
            delay = min(delay * 2, self.settings.backoff_max_s)

    async def _session(self) -> None:
        """One connection, until it is lost (raises why): the initialize handshake first (the era on which the
        SDK delivers a server's ``notifications/tools/list_changed``); 2026-07-28 where the server refuses it."""
        for mode in ("legacy", "auto") if self.mode == "legacy" else ("auto",):
            entered = False
            try:
                async with self._client(mode) as client:
                    entered = True
                    await self._connected(client)
            except Exception as e:  # noqa: BLE001 - a refused handshake is retried on 2026-07-28
                if entered or mode != "legacy" or not handshake_refused(e):
                    raise
                log.info("gateway: server %r refuses the initialize handshake (%s); connecting on 2026-07-28",
                         self.name, describe(e))
                self.mode = "auto"  # and so on every reconnection

    def _client(self, mode: str) -> Any:
        from mcp import Client
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp_types import Implementation

        self._wake, self._lost = anyio.Event(), None
        target = self.config.target()
        transport = streamable_http_client(target) if isinstance(target, str) else stdio_client(target)
        return Client(self._watched(transport), mode=mode, read_timeout_seconds=self.settings.timeout_s,
                      message_handler=self._on_message,
                      client_info=Implementation(name="toolret-gateway", version=__version__))

    @contextlib.asynccontextmanager
    async def _watched(self, transport: Any) -> AsyncIterator[tuple[Any, Any]]:
        """The SDK transport, its incoming messages relayed: their end (a stdio server that exited) ends the
        session at once -- on a handshake-era connection nothing else would notice before the next heartbeat."""
        async with transport as (read, write):
            send, receive = anyio.create_memory_object_stream[Any](0)

            async def relay() -> None:
                async with send:
                    try:
                        async for item in read:
                            await send.send(item)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return  # the session closed its end: a shutdown, not a loss
                self.lose("the connection closed")

            async with anyio.create_task_group() as tg:
                tg.start_soon(relay)
                try:
                    yield receive, write
                finally:
                    tg.cancel_scope.cancel()

    async def _connected(self, client: Any) -> None:
        """List, mark up, then watch the connection until it is lost."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        await self._relist(client)
        self.client, self.connects, self.error = client, self.connects + 1, None
        self.state, self.since = "up", time.time()
        self.first_attempt.set()
        log.info("gateway: server %r is up", self.name)
        async with anyio.create_task_group() as tg:
            caps = client.server_capabilities.tools
            if caps is not None and caps.list_changed and client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                tg.start_soon(self._listen, client)
            try:
                await self._watch(client)
            finally:
                tg.cancel_scope.cancel()

    async def _watch(self, client: Any) -> None:
        heartbeat, relist = self.settings.heartbeat_s or math.inf, self.settings.relist_s or math.inf
        listed = time.monotonic()
        while True:
            with anyio.move_on_after(min(heartbeat, max(relist - (time.monotonic() - listed), 0))):
                await self._wake.wait()
            notified, self._wake = self._wake.is_set(), anyio.Event()
            if self._lost is not None:
                raise ServerDown(self._lost)
            if notified or time.monotonic() - listed >= relist:
                await self._relist(client)
                listed = time.monotonic()
            else:
                await self._ping(client)

    async def _ping(self, client: Any) -> None:
        """A heartbeat (``ping``, or ``server/discover`` where the protocol removed ping): any answer (a server
        without the method answers "method not found") shows it alive; a
        closed connection, or no answer within ``timeout_s``, raises (the server is down)."""
        from mcp import MCPError
        from mcp_types.jsonrpc import REQUEST_TIMEOUT
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        try:
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:  # 2026-07-28 removed ping: a discover probe
                await client.session.send_discover(client.protocol_version)
            else:
                await client.session.send_ping()  # a handshake-era connection: ping is defined
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:  # no answer within timeout_s: a hung server is down
                raise ServerDown(f"no answer to a ping within {self.settings.timeout_s} s") from None
            # any other error is an answer: the server is there
        self.pings += 1

    async def _listen(self, client: Any) -> None:
        from mcp.client.subscriptions import SubscriptionLost

        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _ in sub:
                    self._wake.set()
        except SubscriptionLost:
            self.lose("the change subscription dropped")
        except Exception as e:  # noqa: BLE001 - no listen support after all: relist_s re-lists
            log.info("gateway: server %r: no change subscription (%s)", self.name, describe(e))

    async def _on_message(self, message: Any) -> None:
        import mcp_types as types

        if isinstance(message, types.ToolListChangedNotification):
            self._wake.set()
        elif isinstance(message, Exception):  # the transport's: a garbage stdout line, an HTTP error ...
            log.warning("gateway: server %r: %s", self.name, stream_error(message))

    def lose(self, reason: str) -> None:
        """End the current session (the loop marks the server down and reconnects)."""
        if self._lost is None:
            self._lost = reason
        self.error = reason
        self._wake.set()

    # ------------------------------------------------------------------ calls
    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """``tools/call`` on this server: its ``CallToolResult``; its protocol errors raised unchanged
        (:class:`mcp.MCPError`); :class:`ServerDown` when not connected."""
        from mcp import MCPError
        from mcp_types.jsonrpc import CONNECTION_CLOSED

        client = self.client
        if client is None or self.state != "up":
            raise ServerDown(f"server {self.name!r} is {self.state}" + (f" ({self.error})" if self.error else ""))
        try:
            return await client.call_tool(name, arguments, read_timeout_seconds=self.settings.call_timeout_s)
        except MCPError as e:
            if e.code == CONNECTION_CLOSED:
                self.lose(f"connection closed during a call of {name!r}")
                raise ServerDown(f"server {self.name!r}: the connection closed during the call") from None
            raise


__all__ = ["ServerDown", "Upstream", "describe", "handshake_refused", "stream_error"]
