"""The gateway's own MCP server (official ``mcp`` SDK ``MCPServer``) over a :class:`Gateway`.

- tool ``search_tools(query, k=5, min_score=None, server=None, category=None)``: the best tools across the
  servers that are up (of one server / one category where asked) -- the answer of
  :mod:`toolret.serving.mcp_server` (a text listing plus structured hits, input schemas for the top 3) with
  ``withheld`` (tools of down servers) and ``servers_down`` added;
- tool ``call_tool(name, arguments)``: forwards to the owning server and returns its result as sent (a tool
  error stays a tool error); its protocol errors come back unchanged; an unknown tool or a down server is a
  tool error naming it;
- resource ``toolret://gateway`` (JSON): every server's state, tool count and last error; the tools'
  categories; the pipeline and why it was chosen.

Transports: stdio (:func:`serve_stdio`, what desktop agents launch) and streamable HTTP on 127.0.0.1
(:func:`serve_http`, ``/mcp``). Receipts know the caller from the client's ``clientInfo`` and the session
from the HTTP session id (stdio: one session per process; sessionless HTTP, 2026-07-28: the caller).
"""

# no `from __future__ import annotations`: the SDK reads the tools' annotations at runtime
import json
import sys
from typing import Annotated, Any

from pydantic import Field

from toolret import __version__
from toolret.errors import GatewayError
from toolret.gateway.gateway import MAX_K, MAX_QUERY_CHARS, Gateway
from toolret.serving.mcp_server import DEFAULT_SCHEMAS, checked_tool, search_answer

INSTRUCTIONS = ("A gateway to the tools of several MCP servers. Call search_tools with the task in plain language "
                "(or a tool's exact name, or select:<name>) to find tools: ids (<server>__<tool>), descriptions, "
                "input schemas. Then call_tool with the id and the arguments its input schema asks for.")


def _who(ctx: Any, transport: str) -> tuple[Any, str]:
    """``(caller, session)`` of a request: the client's name/version where it said; the session id."""
    rc = ctx.request_context
    info = getattr(getattr(rc.session, "client_params", None), "client_info", None)
    caller = f"{info.name}/{info.version}" if info is not None else None
    headers = getattr(getattr(rc, "request", None), "headers", None)  # HTTP: the Starlette request
    session_id = headers.get("mcp-session-id") if headers is not None else None
    return caller, session_id or (transport if transport == "stdio" else f"{transport}:{caller}")


def build_gateway_server(gateway: Gateway, transport: str = "stdio", lifespan: Any = None) -> Any:
    """An ``MCPServer`` with ``search_tools``, ``call_tool`` and ``toolret://gateway`` (``lifespan``: an
    async context manager factory the server runs around its session, e.g. the gateway itself on stdio)."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, ToolAnnotations

    async def search_tools(
        query: Annotated[str, Field(description="the task to find tools for, in plain language, or a tool's exact "
                                                f"name / select:<name> (at most {MAX_QUERY_CHARS} characters)")],
        ctx: Context,
        k: Annotated[int, Field(description=f"how many tools to return (1 .. {MAX_K})")] = 5,
        min_score: Annotated[float | None, Field(description="drop hits scoring below this (none may be left)")] = None,
        server: Annotated[str | None, Field(description="only this server's tools")] = None,
        category: Annotated[str | None, Field(description="only tools of this category (case-insensitive; "
                                                          "the categories are in the toolret://gateway "
                                                          "resource)")] = None,
    ) -> CallToolResult:
        """Find the tools of the gateway's MCP servers that best match a task, best first: tool id (what
        call_tool takes), name, server, category, description, retrieval score and, for the top hits, the
        input schema.
        Tools of servers that are down are withheld (counted in `withheld`)."""
        caller, session = _who(ctx, transport)
        try:
            answer = await gateway.search(query, k, min_score, server, category, caller=caller, session=session)
        except GatewayError as e:
            raise ToolError(str(e)) from None
        result = search_answer(query, answer["pipeline"], answer["n_tools"], answer["hits"], DEFAULT_SCHEMAS)
        result.structured_content.update(withheld=answer["withheld"], servers_down=answer["servers_down"])
        if answer["servers_down"]:
            result.content[0].text += (f"\n{answer['withheld']} tool(s) withheld: server(s) down: "
                                       f"{', '.join(answer['servers_down'])}")
        return result

    # its raw arguments pass the REST /search check first (toolret.serving.mcp_server.checked_tool)
    search = checked_tool(search_tools, annotations=ToolAnnotations(title="Search tools", read_only_hint=True,
                                                                    idempotent_hint=True, open_world_hint=False))
    mcp = MCPServer("toolret-gateway", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING",
                    lifespan=lifespan, tools=[search])

    @mcp.tool(annotations=ToolAnnotations(title="Call a tool", read_only_hint=False, open_world_hint=True))
    async def call_tool(
        name: Annotated[str, Field(description="the tool id from search_tools (<server>__<tool>)")],
        ctx: Context,
        arguments: Annotated[dict[str, Any] | None, Field(description="the tool's input, as its input schema "
                                                                      "asks")] = None,
    ) -> CallToolResult:
        """Call a tool of one of the gateway's servers; its result (or error) comes back as the server sent it."""
        caller, session = _who(ctx, transport)
        try:
            return await gateway.call_tool(name, arguments or {}, caller=caller, session=session)
        except GatewayError as e:
            raise ToolError(str(e)) from None

    @mcp.resource("toolret://gateway", name="gateway", title="Gateway status", mime_type="application/json",
                  description="every upstream server's state, tool count and last error; the tools' "
                              "categories; the pipeline and why it was chosen")
    def status() -> str:
        return json.dumps(gateway.status(), ensure_ascii=False)

    return mcp


STOP_GRACE_S = 15.0  # a signal: how long the servers may take to stop (the SDK: stdin closed, 2 s, terminate, kill)


async def _serve(gateway: Gateway, body: Any) -> None:
    """``body()`` until it returns or a SIGTERM / SIGINT arrives. On a signal everything is cancelled, which
    stops every server the gateway started -- connected or still in ``initialize`` (:meth:`Gateway.__aexit__`)
    -- then the process exits (at most ``STOP_GRACE_S`` later; the stdio transport's stdin reader, a thread,
    would otherwise hold it until stdin closes). A second signal meanwhile kills it at once."""
    import os
    import signal

    import anyio

    async def stop_on_signal(scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                break
        print(f"toolret gateway: {signal.Signals(signum).name}: stopping the servers", file=sys.stderr, flush=True)
        scope.cancel()
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_GRACE_S):
            if gateway.entered:
                await gateway.closed.wait()
        sys.stderr.flush()
        os._exit(128 + signum)

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_on_signal, tg.cancel_scope)
        await body()
        tg.cancel_scope.cancel()


def serve_stdio(gateway: Gateway) -> None:
    """MCP on stdin/stdout until stdin closes (or a SIGTERM / SIGINT: :func:`_serve`); the gateway runs inside
    the server's lifespan (started after the SDK has taken stdout, so nothing printed while indexing reaches
    the protocol stream)."""
    import contextlib

    import anyio

    @contextlib.asynccontextmanager
    async def lifespan(_server: Any):
        async with gateway:
            print(f"toolret gateway: {len(gateway.index)} tools of {len(gateway.upstreams)} server(s), down: "
                  f"{sorted(gateway.down()) or 'none'}; MCP on stdio", file=sys.stderr, flush=True)
            yield {}

    anyio.run(_serve, gateway, build_gateway_server(gateway, "stdio", lifespan=lifespan).run_stdio_async)


def serve_http(gateway: Gateway, host: str = "127.0.0.1", port: int = 8765) -> None:
    """MCP over streamable HTTP at ``http://host:port/mcp`` until interrupted (SIGTERM / SIGINT stop every
    server the gateway started, also while they connect: :func:`_serve`)."""
    import anyio

    async def main() -> None:
        async with gateway:
            print(f"toolret gateway: {len(gateway.index)} tools of {len(gateway.upstreams)} server(s); MCP at "
                  f"http://{host}:{port}/mcp", file=sys.stderr, flush=True)
            await build_gateway_server(gateway, "http").run_streamable_http_async(host=host, port=port)

    anyio.run(_serve, gateway, main)


__all__ = ["INSTRUCTIONS", "build_gateway_server", "serve_http", "serve_stdio"]
