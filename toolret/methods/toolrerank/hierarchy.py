"""The tool hierarchy ToolRerank reads (category -> tool -> API, from the catalog model) and seen/unseen.

Catalogs name the same API differently (ToolLens ids are corpus numbers, ToolBench ids are
``tool::api``), so an API is identified across catalogs by its place in the hierarchy: the
(parent tool name, API name) pair of :class:`toolret.catalog.model.Tool`, whitespace-collapsed and
case-folded. A tool record without a parent tool is its own tool.

Seen / unseen: an API is *seen* when it occurs (as a gold API of a query) in the reranker's training
data; a tool is seen when one of its APIs is. ``seen_level`` chooses which of the two Adaptive
Truncation asks of a candidate (``api``: the candidate API itself; ``tool``: its parent tool, the
paper's ``tool(c_i)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolret.catalog.model import Catalog, Query, Tool


def _norm(text: str | None) -> str:
    return " ".join((text or "").split()).casefold()


def parent_tool(tool: Tool) -> str:
    """The tool an API belongs to (normalised); the API itself where the catalog has no hierarchy."""
    return _norm(tool.tool or tool.name)


def api_key(tool: Tool) -> tuple[str, str]:
    """Catalog-independent identity of an API: (parent tool, API name), normalised."""
    return parent_tool(tool), _norm(tool.name)


class SeenSet:
    """The APIs (and hence tools) of the reranker's training data."""

    def __init__(self, apis: Iterable[Sequence[str]], level: str = "api") -> None:
        if level not in ("api", "tool"):
            raise ValueError(f"seen_level must be 'api' or 'tool', got {level!r}")
        self.apis = {(str(a[0]), str(a[1])) for a in apis}
        self.tools = {t for t, _ in self.apis}
        self.level = level

    @classmethod
    def from_queries(cls, catalog: Catalog, queries: Iterable[Query], level: str = "api") -> SeenSet:
        """Every gold API of ``queries`` (the training queries) is seen."""
        apis = {api_key(catalog.tools[catalog.tool_position(t)]) for q in queries for t in catalog.gold(q.id)}
        return cls(apis, level)

    def tool_seen(self, tool: Tool) -> bool:
        return parent_tool(tool) in self.tools

    def api_seen(self, tool: Tool) -> bool:
        return api_key(tool) in self.apis

    def seen(self, tool: Tool) -> bool:
        """What Adaptive Truncation asks of a candidate (per ``level``)."""
        return self.api_seen(tool) if self.level == "api" else self.tool_seen(tool)

    def to_list(self) -> list[list[str]]:
        return [list(a) for a in sorted(self.apis)]


def is_multi_tool(catalog: Catalog, query_id: str) -> bool:
    """A query whose gold APIs belong to more than one tool (ToolBench's I2/I3 kind); else single-tool."""
    return len({parent_tool(catalog.tools[catalog.tool_position(t)]) for t in catalog.gold(query_id)}) > 1


def apis_by_tool(tools: Sequence[Tool]) -> dict[str, list[int]]:
    """Parent tool -> positions of its APIs in the library (library order)."""
    out: dict[str, list[int]] = {}
    for i, t in enumerate(tools):
        out.setdefault(parent_tool(t), []).append(i)
    return out


__all__ = ["SeenSet", "api_key", "apis_by_tool", "is_multi_tool", "parent_tool"]
