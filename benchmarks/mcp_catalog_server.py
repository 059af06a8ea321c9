"""An MCP server whose tools are a catalog's (for the gateway benchmark): ``tools/list`` returns every tool of
a JSONL file (``{"name", "description", "inputSchema"}`` per line), ``tools/call`` answers any of them at once
with its arguments echoed. Streamable HTTP on 127.0.0.1 (``--port``) or stdio.

    python benchmarks/mcp_catalog_server.py tools.jsonl --port 9100
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tools", help="JSONL: name, description, inputSchema")
    parser.add_argument("--port", type=int, help="streamable HTTP on 127.0.0.1:PORT/mcp (default: stdio)")
    args = parser.parse_args()
    # split on "\n" only: str.splitlines() also splits inside descriptions holding U+2028 and the like
    rows = [json.loads(line) for line in Path(args.tools).read_text(encoding="utf-8").split("\n") if line.strip()]
    tools = [types.Tool(name=r["name"], description=r["description"], input_schema=r["inputSchema"]) for r in rows]
    names = {t.name for t in tools}
    schemas = {r["name"]: r["inputSchema"] for r in rows}

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params) -> types.CallToolResult:
        if params.name not in names:
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"unknown tool {params.name}")],
                                        is_error=True)
        text = json.dumps({"tool": params.name, "arguments": params.arguments or {}})
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    # get_tool_input_schema: the SDK's HTTP transport checks a call's Mcp-Param headers against the tool's schema,
    # and without this lookup it runs the whole tools/list for each call (seconds for 46,879 tools)
    server = Server("catalog-bench", on_list_tools=list_tools, on_call_tool=call_tool,
                    get_tool_input_schema=schemas.get)
    if args.port:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.port, log_level="warning")
        return

    async def stdio() -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(stdio)


if __name__ == "__main__":
    main()
