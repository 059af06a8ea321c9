"""A small MCP server for the gateway tests (stdio): weather-ish tools, and ``add_tool``, which registers a
new tool at runtime and announces it (``notifications/tools/list_changed`` on the session, and the
``subscriptions/listen`` tools event of 2026-07-28 connections). Only convert_currency names a category in
its ``_meta`` (finance); the tests configure the server's default category (weather) for the others."""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("weather-test", log_level="WARNING")


@server.tool()
def get_forecast(city: str, days: int = 3) -> str:
    """Weather forecast for a city: temperature and rain for the next days."""
    return f"forecast for {city}: sunny for {days} days"


@server.tool(meta={"category": "finance"})
def convert_currency(amount: float, source: str, target: str) -> str:
    """Convert an amount of money from one currency to another at today's exchange rate."""
    return f"{amount} {source} = {amount * 2} {target}"


@server.tool()
def moon_phase(night: str) -> str:
    """Lunar phase (new, waxing, full, waning) of the moon."""
    return f"full moon on {night}"


@server.tool()
async def add_tool(name: str, description: str, ctx: Context) -> str:
    """Register a new tool at runtime and announce the changed tool list."""

    def added(value: str = "") -> str:
        return f"{name} got {value!r}"

    server.add_tool(added, name=name, description=description)
    await ctx.notify_tools_changed()                          # subscriptions/listen (2026-07-28)
    await ctx.request_context.session.send_tool_list_changed()  # notifications/tools/list_changed
    return f"added {name}"


server.run("stdio")
