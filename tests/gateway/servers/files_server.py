"""A small MCP server for the gateway tests (stdio): file-ish tools, one echoing its arguments. Each tool names
its category in its ``_meta``: ``category`` (echo) or a namespaced ``io.toolret/category`` (the others).

``--pid-file FILE``: writes its pid there (a test kills it); ``--refuse-if FILE``: exits at once while FILE
exists (a test keeps it "down" across the gateway's reconnection attempts).
"""

import argparse
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

parser = argparse.ArgumentParser()
parser.add_argument("--pid-file")
parser.add_argument("--refuse-if")
args = parser.parse_args()
if args.refuse_if and Path(args.refuse_if).exists():
    sys.exit(3)
if args.pid_file:
    Path(args.pid_file).write_text(str(os.getpid()))

server = MCPServer("files-test", log_level="WARNING")


@server.tool(meta={"category": "debugging"})
def echo(text: str, times: int = 1) -> dict:
    """Echo a text back, repeated: shows exactly which arguments arrived."""
    return {"received": {"text": text, "times": times}, "echo": " ".join([text] * times)}


@server.tool(meta={"io.toolret/category": "filesystem"})
def read_file(path: str) -> str:
    """Read a text file from disk and return its contents."""
    return f"contents of {path}"


@server.tool(meta={"io.toolret/category": "filesystem"})
def delete_file(path: str) -> str:
    """Delete a file from disk; fails for protected paths."""
    if path.startswith("/protected"):
        raise ToolError(f"refusing to delete {path}")
    return f"deleted {path}"


server.run("stdio")
