"""Running MCP server -> catalog: one tool per MCP tool (``toolret import-mcp``).

Connects with the official ``mcp`` SDK (a ``--command`` is launched and spoken to over stdio, a ``--url``
over streamable HTTP), lists the tools (``tools/list``, following ``nextCursor`` page by page) and makes
per MCP tool:

- ``id`` / ``name``: the tool's name (what an agent calls);
- ``tool``: the server's name (``serverInfo.name``; else the catalog name): the hierarchy is server ->
  tool; no category;
- ``docs["original"]``: name and title, description, and each input property (type, required or not,
  description) of its input schema;
- ``metadata``: ``input_schema`` verbatim (served to agents as is, :mod:`toolret.catalog.tool_records`),
  ``description``, ``title``, ``server``, ``annotations`` / ``output_schema`` where the tool has them.

Errors (:class:`CatalogError`) name the command or URL: the server cannot be started or reached, does not
answer in ``timeout_s``, lists no tools, lists a name twice, or pages forever.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

from toolret.catalog.importers.queries import imported_catalog
from toolret.catalog.importers.text import name_words, schema_summary, slug
from toolret.catalog.model import Catalog, Tool
from toolret.errors import CatalogError

MAX_PAGES = 1000  # tools/list pages followed before giving up (a server that keeps returning cursors)


def server_target(command: str | None = None, url: str | None = None) -> Any:
    """What :class:`mcp.Client` connects to: a URL (streamable HTTP) or stdio parameters for ``command``
    (split like a shell would; the child inherits this environment)."""
    if (command is None) == (url is None):
        raise CatalogError("give exactly one of an MCP server command (--command) or URL (--url)")
    if url is not None:
        if not re.match(r"https?://", url):
            raise CatalogError(f"MCP server URL {url!r}: expected http:// or https://")
        return url
    from mcp.client.stdio import StdioServerParameters

    argv = shlex.split(command)
    if not argv:
        raise CatalogError("MCP server command is empty")
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


async def list_all_tools(client: Any) -> list[Any]:
    """Every page of ``tools/list`` of a connected :class:`mcp.Client` (fresh, not from its response cache);
    a cursor returned twice or more than ``MAX_PAGES`` pages is a :class:`CatalogError`."""
    tools: list[Any] = []
    cursor: str | None = None
    cursors: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
        if cursor in cursors:
            raise CatalogError(f"tools/list returned the cursor {cursor!r} twice")
        cursors.add(cursor)
    raise CatalogError(f"tools/list still had more pages after {MAX_PAGES}")


async def list_server_tools(target: Any, timeout_s: float = 120) -> tuple[dict[str, Any], list[Any]]:
    """``(server info, tools)`` of an MCP server: every page of ``tools/list``. ``target``: anything
    :class:`mcp.Client` connects to (a URL, stdio parameters, an in-process server)."""
    import anyio
    from mcp import Client

    problem = None  # raised once the client is closed (inside, the SDK's task groups would wrap it)
    with anyio.fail_after(timeout_s):
        async with Client(target, read_timeout_seconds=timeout_s) as client:
            info = client.server_info
            server = info.model_dump(mode="json", exclude_none=True) if info is not None else {}
            try:
                tools = await list_all_tools(client)
            except CatalogError as err:
                problem = err
    if problem:
        raise problem
    return server, tools


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def tool_document(tool: Any, server: str) -> str:
    """The retrievable text of one MCP tool: name, title, description, input properties."""
    head = f"{tool.name} ({name_words(tool.name)})" if name_words(tool.name) else tool.name
    lines = [f"{head}: {tool.title}" if tool.title else head]
    if tool.description and tool.description.strip():
        lines.append(tool.description.strip())
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = set(schema.get("required") or [])
    if props:
        lines.append("Inputs:")
    for key, prop in props.items():
        desc = prop.get("description") if isinstance(prop, dict) else None
        lines.append(f"- {key} ({schema_summary(prop, 1)}, {'required' if key in required else 'optional'})"
                     + (f": {desc.strip()}" if isinstance(desc, str) and desc.strip() else ""))
    lines.append(f"MCP server: {server}")
    return "\n".join(lines)


def mcp_tool(tool: Any, server: str) -> Tool:
    if not isinstance(tool.name, str) or not tool.name.strip() or re.search(r"[\t\r\n]", tool.name):
        raise CatalogError(f"MCP server {server!r}: tool name {tool.name!r} is empty or has tabs / newlines")
    metadata: dict[str, Any] = {"input_schema": tool.input_schema, "server": server}
    if tool.description and tool.description.strip():
        metadata["description"] = tool.description.strip()
    if tool.title:
        metadata["title"] = tool.title
    if tool.annotations is not None:
        metadata["annotations"] = tool.annotations.model_dump(mode="json", exclude_none=True, by_alias=True)
    if tool.output_schema:
        metadata["output_schema"] = tool.output_schema
    return Tool(id=tool.name.strip(), name=tool.name.strip(), docs={"original": tool_document(tool, server)},
                tool=server, category=None, metadata=metadata)


def import_mcp(command: str | None = None, url: str | None = None, *, name: str | None = None,
               queries: str | None = None, timeout_s: float = 120) -> Catalog:
    """The validated catalog of a running MCP server's tools (``name``: default the slug of the server's
    name; ``queries``: a queries file, see :mod:`toolret.catalog.importers.queries`)."""
    import anyio

    target = server_target(command, url)
    source = f"MCP server {command!r}" if command is not None else f"MCP server at {url}"
    try:
        info, listed = anyio.run(list_server_tools, target, timeout_s)
    except Exception as e:  # noqa: BLE001 - spawn / connection / protocol errors, often in an exception group
        leaf = _leaf(e)
        if isinstance(leaf, CatalogError):
            raise CatalogError(f"{source}: {leaf}") from None
        if isinstance(leaf, TimeoutError):
            raise CatalogError(f"{source}: no answer to tools/list within {timeout_s:g} s") from None
        raise CatalogError(f"{source}: could not list its tools ({type(leaf).__name__}: {leaf})") from None
    server = (info.get("name") or "").strip() or name or "mcp-server"
    if not listed:
        raise CatalogError(f"{source}: the server {server!r} lists no tools")
    tools, seen = [], set()
    for t in listed:
        tool = mcp_tool(t, server)
        if tool.id in seen:
            raise CatalogError(f"{source}: the server {server!r} lists the tool {tool.id!r} twice")
        seen.add(tool.id)
        tools.append(tool)
    provenance = {"source": "mcp", **({"command": command} if command is not None else {"url": url}),
                  "server": info, "n_tools": len(tools)}
    return imported_catalog(name or slug(server) or "mcp-server", tools, provenance, queries)


__all__ = ["import_mcp", "list_server_tools", "mcp_tool", "server_target", "tool_document"]
