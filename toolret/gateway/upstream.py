"""One upstream MCP server: its connection, kept alive, and its tools, kept current.

:meth:`Upstream.run` (a task of the gateway) loops forever: connect with the official SDK
(:class:`mcp.Client`: stdio for a ``command``, streamable HTTP for a ``url``), list every page of
``tools/list``, hand the tools to the gateway (``on_tools``), mark the server **up**, then watch it:

- a ``notifications/tools/list_changed`` (any protocol version, through the client's message handler) or a
  ``subscriptions/listen`` tools event (2026-07-28 servers that announce ``tools.listChanged``) re-lists
  at once;
- every ``heartbeat_s`` it pings the server (MCP ``ping``; ``server/discover`` on 2026-07-28 connections, which
  removed ping; an error answer counts, as from a server that does not implement it): a dead one is noticed (a request on a closed connection fails at once) without listing its tools -- a server of 46,879 tools spends seconds of CPU on
  each ``tools/list``;
- every ``relist_s`` it re-lists anyway: servers that never notify are kept current;
- a forwarded call that finds the connection closed, or a listen stream that drops, ends the session.

Then the server is **down** (its tools stay indexed, withheld from search by the gateway) and is reconnected
after a backoff that doubles from ``backoff_min_s`` to ``backoff_max_s`` (+-10 % jitter), reset once a
connection succeeds. A stdio server is restarted by reconnecting (the SDK launches its command again).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
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


class Upstream:
    """See the module docstring. ``on_tools(server, tools)`` is awaited with every listing."""

    def __init__(self, config: ServerConfig, settings: GatewayConfig,
                 on_tools: Callable[[str, list[Any]], Awaitable[None]]) -> None:
        self.config, self.settings, self._on_tools = config, settings, on_tools
        self.name = config.name
        self.state = "starting"  # starting | up | down
        self.error: str | None = None
        self.since = time.time()
        self.connects = 0
        self.client: Any = None
        self.first_attempt = anyio.Event()  # set once the first connection succeeded or failed
        self._wake = anyio.Event()
        self._lost: str | None = None
        self.lists = 0  # tools/list listings made (every connection's first, notifications, relist_s)
        self.pings = 0  # heartbeat pings answered

    def status(self) -> dict[str, Any]:
        return {"state": self.state, "transport": self.config.transport, "since": self.since,
                "connects": self.connects, "error": self.error, "lists": self.lists, "pings": self.pings}

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
        """One connection, until it is lost (raises why)."""
        from mcp import Client
        from mcp_types import Implementation
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        self._wake, self._lost = anyio.Event(), None
        async with Client(self.config.target(), read_timeout_seconds=self.settings.timeout_s,
                          message_handler=self._on_message,
                          client_info=Implementation(name="toolret-gateway", version=__version__)) as client:
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
                await client.send_ping()
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


__all__ = ["ServerDown", "Upstream", "describe"]
