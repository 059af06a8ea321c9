"""A small MCP server for the gateway tests (stdio) that prints three lines that are not JSON-RPC on its stdout
before it serves (a banner, a progress line, a JSON object that is no message), as careless servers do; its
one tool works."""

import sys

from mcp.server.mcpserver import MCPServer

print("Starting the noisy server v1.0 ...")
print("loading plugins: 3/3 done")
print('{"status": "ready"}')
sys.stdout.flush()

server = MCPServer("noisy-test", log_level="WARNING")


@server.tool()
def translate_text(text: str, language: str) -> str:
    """Translate a text into another language."""
    return f"{text} in {language}"


server.run("stdio")
