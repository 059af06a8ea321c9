"""The client adapters, each driven as its client would use it over a real saved index: deferred-loading
tool references, a LangGraph-style retrieve_tools function, an OpenAI function list."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))


@pytest.fixture(scope="module")
def searcher(tmp_path_factory):
    import toolret
    from make_fixture import write_fixture_catalog

    root = tmp_path_factory.mktemp("adapters")
    catalog = toolret.load_catalog(write_fixture_catalog(root / "fixture", n_tools=30, n_train=10, n_test=10, seed=0))
    toolret.build("bm25", catalog).save(root / "index")
    return toolret.ToolSearcher.load(root / "index"), catalog


def test_tool_references_name_the_hits_in_order(searcher) -> None:
    from toolret.agent_adapters import tool_references

    s, catalog = searcher
    query = catalog.split("test")[0].text
    hits = s.search(query, k=3)
    blocks = tool_references(hits)
    assert blocks == [{"type": "tool_reference", "tool_name": h.tool_id} for h in hits] and len(blocks) == 3
    # a client whose deferred tools are registered under their display names
    assert [b["tool_name"] for b in tool_references(hits, name=lambda h: h.name)] == [h.name for h in hits]


def test_retrieve_tools_returns_ids_a_client_can_bind(searcher) -> None:
    from toolret.agent_adapters import retrieve_tools_function

    s, catalog = searcher
    retrieve_tools = retrieve_tools_function(s, k=4)
    q = catalog.split("test")[0]
    ids = retrieve_tools(q.text)
    assert 0 < len(ids) <= 4 and set(ids) <= set(catalog.tool_ids)
    assert ids == [h.tool_id for h in s.search(q.text, k=4)]
    assert retrieve_tools.__doc__ and retrieve_tools.__name__ == "retrieve_tools"  # what LangGraph reads


def test_openai_functions_are_valid_unique_and_map_back() -> None:
    from toolret.agent_adapters import MAX_FUNCTION_NAME, openai_functions
    from toolret.api import ToolHit

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    long_id = "Weather API/" + "x" * 80
    hits = [ToolHit("Weather API/get forecast", "get forecast", 2.0, "Forecast for a city", input_schema=schema),
            ToolHit("Weather_API/get_forecast", "get_forecast", 1.5, ""),  # the same name once sanitised
            ToolHit(long_id, "long", 1.0, "a long one")]
    functions, back = openai_functions(hits)
    names = [f["function"]["name"] for f in functions]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in names) and len(set(names)) == 3
    assert names[0] == "Weather_API_get_forecast" and len(names[2]) == MAX_FUNCTION_NAME
    assert [back[n] for n in names] == [h.tool_id for h in hits]
    assert functions[0]["function"]["parameters"] == schema
    assert functions[1]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert functions[1]["function"]["description"] == "get_forecast"  # no description: the name


def test_served_hits_are_the_api_s_hits_on_the_wire() -> None:
    """One hit shape: what `toolret serve` and the gateway answer (ToolHit.to_dict) reads back to the same hit,
    and the adapters take either."""
    from toolret.agent_adapters import openai_functions, tool_references
    from toolret.api import ToolHit

    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    hits = [ToolHit("books__search", "search", 0.9, "Find books", "books", "Library", schema, server="books"),
            ToolHit("weather::now", "now", None, "", "weather", None)]
    wire = [h.to_dict() for h in hits]
    assert wire[0] == {"tool_id": "books__search", "name": "search", "server": "books", "tool": "books",
                       "category": "Library", "description": "Find books", "score": 0.9, "input_schema": schema}
    assert "server" not in wire[1] and "input_schema" not in wire[1] and wire[1]["score"] is None
    assert [ToolHit.from_dict(d) for d in wire] == hits and ToolHit.from_dict(wire[0]).input_schema == schema
    assert "input_schema" not in hits[0].to_dict(include_schema=False)
    assert openai_functions(wire) == openai_functions(hits)
    assert tool_references(wire) == tool_references(hits)
