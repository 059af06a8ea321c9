"""A small MCP server for the gateway tests (stdio) whose ``add_tool`` registers a tool at runtime and announces
it the classic way only: ``notifications/tools/list_changed`` on the session
(``session.send_tool_list_changed()``), never a ``subscriptions/listen`` event (``--notify listen``: the
other way only, ``ctx.notify_tools_changed()``).

``--protocol VERSION`` makes it speak that one protocol version, as an older or a newer SDK would (the
official SDK itself serves every version, the client's first request choosing the era):

- a handshake version (2024-11-05 ... 2025-11-25): the ``initialize`` handshake only, answered with that
  version (a ``server/discover`` probe is refused, as a pre-2026 server does);
- 2026-07-28: that version only (``initialize`` is refused with -32022, as a modern-only server does).
"""

import argparse

from mcp.server import runner
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

parser = argparse.ArgumentParser()
parser.add_argument("--protocol", choices=[*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
parser.add_argument("--notify", choices=["classic", "listen"], default="classic")
args = parser.parse_args()

if args.protocol in HANDSHAKE_PROTOCOL_VERSIONS:
    async def legacy_only(server, read_stream, write_stream, *, lifespan_state, raise_exceptions):
        await runner._serve_legacy_stream(server, read_stream, write_stream, lifespan_state=lifespan_state,
                                          session_id=None, init_options=None, raise_exceptions=raise_exceptions)

    runner._serve_modern_stream = legacy_only  # a 2026-07-28 probe lands on the handshake loop, which refuses it
    runner.HANDSHAKE_PROTOCOL_VERSIONS = (args.protocol,)  # initialize is answered with this version
    runner.LATEST_HANDSHAKE_VERSION = args.protocol
elif args.protocol in MODERN_PROTOCOL_VERSIONS:
    def no_handshake(params):
        raise MCPError(code=UNSUPPORTED_PROTOCOL_VERSION, message="this server speaks 2026-07-28 only",
                       data={"supported": [args.protocol], "requested": (params or {}).get("protocolVersion")})

    runner.ServerRunner._negotiate_initialize = staticmethod(no_handshake)

server = MCPServer("classic-notify-test", log_level="WARNING")


@server.tool()
def get_forecast(city: str) -> str:
    """Weather forecast for a city: temperature and rain for the next days."""
    return f"forecast for {city}: sunny"


@server.tool()
async def add_tool(name: str, description: str, ctx: Context) -> str:
    """Register a new tool at runtime and announce the changed tool list (one way only)."""

    def added(value: str = "") -> str:
        return f"{name} got {value!r}"

    server.add_tool(added, name=name, description=description)
    if args.notify == "classic":
        await ctx.request_context.session.send_tool_list_changed()  # notifications/tools/list_changed
    else:
        await ctx.notify_tools_changed()  # a subscriptions/listen event (2026-07-28)
    return f"added {name}"


server.run("stdio")
