"""The gateway's tool index without servers: its pipeline is warmed up once built (issue 78, fault 8: the
first hybrid search of a gateway took 7.6 s), with the function ``toolret serve`` warms up with."""

from __future__ import annotations

from mcp_types import Tool as McpTool

from toolret.gateway.tool_index import GatewayIndex


def _tool(name: str, description: str) -> McpTool:
    return McpTool(name=name, description=description, input_schema={"type": "object", "properties": {}})


def test_the_pipeline_is_warmed_up_once_when_first_built():
    from toolret.gateway import tool_index
    from toolret.serving import service

    assert tool_index.warm_up is service.warm_up  # the one toolret serve runs (Loaded.warm)
    index = GatewayIndex("bm25")
    assert index.warm_up_s is None
    index.update("s", [_tool("send_mail", "Send an email"), _tool("get_weather", "Weather forecast")])
    first = index.warm_up_s
    assert isinstance(first, float) and first >= 0  # a search ran before any caller's
    index.update("s", [_tool("book_flight", "Book a flight")])
    assert index.warm_up_s == first  # re-indexing the built pipeline needs none
