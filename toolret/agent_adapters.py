"""Search results in the shapes agent clients take them: the plugs between a tool search and a client.

- :func:`tool_references`: a client-side custom tool search with deferred tool loading (the client keeps
  every tool's definition marked deferred; the search tool's result names the tools to load as
  ``{"type": "tool_reference", "tool_name": ...}`` blocks);
- :func:`retrieve_tools_function`: a LangGraph-bigtool-style ``retrieve_tools(query) -> [tool ids]``
  function (the agent binds the tools whose ids it returns);
- :func:`openai_functions`: an OpenAI-style function list of the top k (``{"type": "function",
  "function": {name, description, parameters}}``), names made valid (``^[A-Za-z0-9_-]{1,64}$``) and
  unique, with the map back to the tool ids for dispatching the call.

Each takes hit lists: :class:`toolret.ToolHit` (``ToolSearcher.search``) or the hits ``toolret serve`` and the
gateway answer with (their ``to_dict`` form, read back by :meth:`ToolHit.from_dict`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolret.api import ToolSearcher
from toolret.catalog.tool_records import ToolHit

_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")
MAX_FUNCTION_NAME = 64
EMPTY_PARAMETERS = {"type": "object", "properties": {}}


Hit = ToolHit | Mapping[str, Any]  # a hit, or a served one (ToolHit.to_dict's form)


def as_hits(hits: Sequence[Hit]) -> list[ToolHit]:
    """``hits`` as :class:`ToolHit` (a served dict read back with :meth:`ToolHit.from_dict`)."""
    return [h if isinstance(h, ToolHit) else ToolHit.from_dict(h) for h in hits]


def tool_references(hits: Sequence[Hit], name: Callable[[ToolHit], str] = lambda h: h.tool_id) -> list[dict]:
    """``tool_reference`` blocks, best first; ``name`` gives the name the client registered each tool under
    (default: the tool id)."""
    return [{"type": "tool_reference", "tool_name": name(h)} for h in as_hits(hits)]


def retrieve_tools_function(searcher: ToolSearcher, k: int = 5) -> Callable[[str], list[str]]:
    """``retrieve_tools(query) -> tool ids`` (best first, at most ``k``) over a saved index."""

    def retrieve_tools(query: str) -> list[str]:
        """Find the tools that can serve the request ``query``; returns their ids, best first."""
        return [h.tool_id for h in searcher.search(query, k)]

    return retrieve_tools


def function_name(tool_id: str, taken: set[str]) -> str:
    """A valid, unique function name for ``tool_id``: odd characters to ``_``, over-long or taken names
    shortened and suffixed with a hash of the id."""
    base = _NAME_BAD.sub("_", tool_id) or "tool"
    if len(base) <= MAX_FUNCTION_NAME and base not in taken:
        return base
    suffix = "_" + hashlib.sha1(tool_id.encode("utf-8")).hexdigest()[:8]
    return base[:MAX_FUNCTION_NAME - len(suffix)] + suffix


def openai_functions(hits: Sequence[Hit]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``(functions, function name -> tool id)`` for the hits, best first; a tool without an input schema
    takes no parameters."""
    functions, back, taken = [], {}, set()
    for h in as_hits(hits):
        name = function_name(h.tool_id, taken)
        taken.add(name)
        back[name] = h.tool_id
        schema = dict(h.input_schema) if h.input_schema else dict(EMPTY_PARAMETERS)
        functions.append({"type": "function", "function": {"name": name, "description": h.description or h.name,
                                                          "parameters": schema}})
    return functions, back


__all__ = ["Hit", "as_hits", "function_name", "openai_functions", "retrieve_tools_function", "tool_references"]
