"""The MCP server (official ``mcp`` SDK, v2 ``MCPServer``) over a :class:`SearchService`.

- tool ``search_tools(query: str, k: int = 5, schemas: int = 3)``: the top-k tools for a task description,
  each ``{tool_id, name, tool, category, description, score, input_schema?}`` as structured content (the
  input schema for the top ``schemas`` hits only) and a one-line-per-hit text listing; a refused request (empty query, k out of range, busy, not ready) is a tool error
  whose text names the field;
- resource ``toolret://catalog`` (JSON): the served catalog's size and provenance and the pipeline.

Transports: stdio (``toolret mcp --index DIR``, :func:`run_stdio`: what desktop agents launch) and
streamable HTTP at ``/mcp`` beside the REST API (``toolret serve``, :mod:`toolret.serve`), stateless with
JSON responses: every POST is answered on its own, so any number of clients and an index swap need no
session state.
"""

# no `from __future__ import annotations`: the SDK reads the tool's annotations at runtime
import contextlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from toolret import __version__
from toolret.errors import RequestError
from toolret.serving.service import Limits, SearchService, check_search_arguments

INSTRUCTIONS = ("Tool retrieval over a catalog of APIs: call search_tools with the user's task in plain "
                "language to find the APIs that can do it (names, descriptions, input schemas), then call "
                "the chosen API with its input schema. Read toolret://catalog for what the catalog holds.")


DEFAULT_SCHEMAS = 3  # input schemas in an answer: the top few (a ToolBench schema is ~1-3 kB)
DESCRIPTION_CHARS = 300  # of each hit's description in the text listing


def search_answer(query: str, pipeline: str, n_tools: int, hits: list[dict[str, Any]], schemas: int) -> Any:
    """The ``search_tools`` result, bounded: the hits once as structured content (input schemas for the top
    ``schemas`` only) and a short text listing for clients that read text (one line per hit), not the same
    JSON twice."""
    from mcp_types import CallToolResult, TextContent

    shown = [h if i < schemas else {k: v for k, v in h.items() if k != "input_schema"} for i, h in enumerate(hits)]
    lines = [f"{len(hits)} tool(s) for {query!r} ({pipeline}, {n_tools} tools indexed):"]
    for i, h in enumerate(hits, 1):
        desc = (h.get("description") or "").replace("\n", " ")
        desc = desc if len(desc) <= DESCRIPTION_CHARS else desc[:DESCRIPTION_CHARS - 1] + "…"
        score = "-" if h.get("score") is None else f"{h['score']:.3f}"
        lines.append(f"{i}. {h['name']} [{h['tool_id']}] score {score}: {desc}")
    if any("input_schema" in h for h in shown):
        lines.append(f"input schemas of the top {min(schemas, len(hits))}: in the structured content")
    return CallToolResult(content=[TextContent(type="text", text="\n".join(lines))],
                          structured_content={"query": query, "pipeline": pipeline, "n_tools": n_tools, "hits": shown})


def checked_tool(fn: Any, required: tuple[str, ...] = ("query",), **kwargs: Any) -> Any:
    """``fn`` as an MCP tool (``Tool.from_function(fn, **kwargs)``) whose raw arguments first pass
    :func:`~toolret.serving.service.check_search_arguments`, the check of the REST ``/search`` body: no
    unknown argument, ``k`` an integer (the SDK's own validation would coerce ``"5"`` and ``true`` and
    drop unknown arguments), with the same messages (a refused call is a tool error naming the field)."""
    from mcp.server.mcpserver.tools import Tool
    from pydantic import create_model, model_validator
    from pydantic_core import PydanticCustomError

    tool = Tool.from_function(fn, **kwargs)
    base = tool.fn_metadata.arg_model
    allowed = {f.alias or name for name, f in base.model_fields.items()}

    def check(cls: Any, data: Any) -> Any:
        try:
            check_search_arguments(data, allowed, required)
        except RequestError as e:
            raise PydanticCustomError("toolret_argument", "{detail}", {"detail": e.body()["detail"]}) from None
        return data

    tool.fn_metadata.arg_model = create_model(base.__name__, __base__=base, __validators__={
        "toolret_arguments": model_validator(mode="before")(classmethod(check))})
    return tool


def build_mcp_server(service: SearchService) -> Any:
    """An ``MCPServer`` with the ``search_tools`` tool and the ``toolret://catalog`` resource."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, ToolAnnotations

    async def search_tools(
        query: Annotated[str, Field(description="the task to find tools for, in plain language "
                                                f"(at most {service.limits.max_query_chars} characters)")],
        k: Annotated[int, Field(description="how many tools to return (1 .. min(catalog size, "
                                            f"{service.limits.max_k}))")] = 5,
        schemas: Annotated[int, Field(description="input schemas for the top this many hits (0: none; "
                                                  "call again with a larger value to see more)", ge=0)] = DEFAULT_SCHEMAS,
    ) -> CallToolResult:
        """Find the tools (APIs) of the served catalog that best match a task, best first: tool id,
        name, parent tool, category, description, retrieval score and, for the top `schemas` hits where the
        catalog has it, the input schema. Fewer than k hits when fewer tools match (lexical retrievers)."""
        try:
            loaded, rows = await service.search(query, k, include_schema=True, query_field="query")
        except RequestError as e:
            raise ToolError(e.body()["detail"]) from None
        return search_answer(query, loaded.name, loaded.n_tools, rows[0], schemas)

    tool = checked_tool(search_tools, annotations=ToolAnnotations(title="Search tools", read_only_hint=True,
                                                                  idempotent_hint=True, open_world_hint=False))
    server = MCPServer("toolret", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING", tools=[tool])

    @server.resource("toolret://catalog", name="catalog", title="Served tool catalog",
                     description="size and provenance of the served catalog, and the pipeline serving it",
                     mime_type="application/json")
    def catalog() -> str:
        try:
            return json.dumps(service.catalog(), ensure_ascii=False)
        except RequestError as e:
            return json.dumps(e.body())

    return server


def run_stdio(index_dir: str | Path, *, catalog_dir: str | Path | None = None, limits: Limits | None = None) -> None:
    """``toolret mcp``: load + warm the pipeline, then speak MCP on stdin/stdout until stdin closes.
    Everything else (progress bars, logs, stray prints while loading) goes to stderr."""
    service = SearchService(index_dir, catalog_dir=catalog_dir, limits=limits)
    with contextlib.redirect_stdout(sys.stderr):
        service.load()
    print(f"toolret mcp: serving {service.current.name} over {service.current.n_tools} tools "
          f"({service.index_dir}) on stdio", file=sys.stderr, flush=True)
    try:
        build_mcp_server(service).run("stdio")
    finally:
        service.close()


__all__ = ["DEFAULT_SCHEMAS", "INSTRUCTIONS", "build_mcp_server", "checked_tool", "run_stdio", "search_answer"]
