"""A saved pipeline served by real processes answers like the pipeline itself, over every protocol:
MCP on stdio (`toolret mcp`), MCP streamable HTTP at /mcp and REST /search (`toolret serve`, one port).
Hits carry the catalog's names, descriptions and input schemas; /health and toolret://catalog report
the catalog's size and provenance. (Moved here from tests/pipeline/test_serve.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest
from serve_helpers import http, pipeline_hits

pytestmark = pytest.mark.integration

K = 4
NO_MATCH = "zzqx vvkw"  # no term of any document: BM25 retrieves nothing


def _queries(catalog) -> list[str]:
    return [q.text for q in catalog.split("test")[:5]] + [NO_MATCH]


def check_hits(hits: list[dict], expected: list[tuple[str, float]], catalog, *, schemas: bool) -> None:
    """Same tools, order and scores as the pipeline's own search; names / descriptions / schemas are
    the catalog's (the fixture corpus has no titles: the name is its metadata's API name)."""
    assert [h["tool_id"] for h in hits] == [t for t, _ in expected]
    assert [h["score"] for h in hits] == pytest.approx([s for _, s in expected], rel=1e-5)
    tools = {t.id: t for t in catalog.tools}
    for h in hits:
        t = tools[h["tool_id"]]
        assert h["name"] == t.metadata["api_name"] and h["tool"] == t.tool and h["category"] == t.category
        assert f"api_description:{h['description']}, required_params" in t.text
        if schemas:
            schema = h["input_schema"]
            assert schema["type"] == "object"
            assert all(f'"name": "{p}"' in t.text for p in schema["properties"])
            assert all(f'"name": "{p}"' in t.text.split("optional_params")[0] for p in schema.get("required", []))
        else:
            assert "input_schema" not in h


def test_rest_search_and_health(server, bm25_index, serve_catalog):
    directory, catalog = serve_catalog
    status, _, health = http("GET", server.base + "/health")
    assert status == 200 and health["status"] == "ready"
    assert health["pipeline"] == "bm25" and health["n_tools"] == len(catalog.tools) == 30
    assert health["catalog"]["name"] == "fixture" and health["catalog"]["n_tools"] == 30
    assert health["catalog"]["provenance"]["source"] == directory.name  # the folder name, never a machine path
    assert health["tool_metadata"] == "tools.jsonl"

    queries = _queries(catalog)
    expected = pipeline_hits(bm25_index, queries, K)
    assert expected[-1] == [] and all(expected[:-1])
    status, _, body = http("POST", server.base + "/search", {"queries": queries, "k": K})
    assert status == 200 and body["pipeline"] == "bm25" and body["n_tools"] == 30
    assert len(body["results"]) == len(queries)
    for hits, exp in zip(body["results"], expected):
        check_hits(hits, exp, catalog, schemas=False)
    status, _, body = http("POST", server.base + "/search", {"queries": queries[:2], "k": K, "include_schema": True})
    assert status == 200
    for hits, exp in zip(body["results"], expected):
        check_hits(hits, exp, catalog, schemas=True)


def test_mcp_streamable_http(server, bm25_index, serve_catalog):
    from mcp import Client

    _, catalog = serve_catalog
    queries = _queries(catalog)
    expected = pipeline_hits(bm25_index, queries, K)

    async def session(mode: str):
        async with Client(server.base + "/mcp", mode=mode, read_timeout_seconds=60) as client:
            tools = (await client.list_tools()).tools
            results = [await client.call_tool("search_tools", {"query": q, "k": K, "schemas": K}) for q in queries]
            default_k = await client.call_tool("search_tools", {"query": queries[0]})
            resource = await client.read_resource("toolret://catalog")
        return tools, results, default_k, resource

    for mode in ("auto", "legacy"):  # the 2026 protocol and the initialize handshake older agents speak
        tools, results, default_k, resource = asyncio.run(session(mode))
        assert [t.name for t in tools] == ["search_tools"]
        assert set(tools[0].input_schema["properties"]) == {"query", "k", "schemas"}
        for result, exp in zip(results, expected):
            assert not result.is_error
            data = result.structured_content
            assert data["pipeline"] == "bm25" and data["n_tools"] == 30
            check_hits(data["hits"], exp, catalog, schemas=True)
            # the text is a listing, one line per hit, not the structured JSON again
            lines = result.content[0].text.splitlines()
            with_schemas = any("input_schema" in h for h in data["hits"])
            assert len(lines) == len(data["hits"]) + 1 + with_schemas and all(f"[{h['tool_id']}]" in line for h, line in zip(data["hits"], lines[1:]))
            assert "input_schema" not in result.content[0].text
        hits = default_k.structured_content["hits"]  # k defaults to 5, schemas to the top 3
        check_hits(hits[:3], pipeline_hits(bm25_index, queries[:1], 5)[0][:3], catalog, schemas=True)
        check_hits(hits[3:], pipeline_hits(bm25_index, queries[:1], 5)[0][3:], catalog, schemas=False)
        info = json.loads(resource.contents[0].text)
        assert info["n_tools"] == 30 and info["catalog"]["name"] == "fixture" and info["catalog"]["provenance"]


def test_mcp_stdio(bm25_index, serve_catalog):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    _, catalog = serve_catalog
    queries = _queries(catalog)
    expected = pipeline_hits(bm25_index, queries, K)
    params = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=["-m", "toolret.cli", "mcp", "--index", str(bm25_index)])

    async def session():
        async with Client(params, read_timeout_seconds=120) as client:
            tools = (await client.list_tools()).tools
            results = [await client.call_tool("search_tools", {"query": q, "k": K, "schemas": K}) for q in queries]
            empty = await client.call_tool("search_tools", {"query": "   ", "k": K})
            too_many = await client.call_tool("search_tools", {"query": "weather", "k": 31})
            after = await client.call_tool("search_tools", {"query": queries[0], "k": K, "schemas": K})
            resource = await client.read_resource("toolret://catalog")
        return tools, results, empty, too_many, after, resource

    tools, results, empty, too_many, after, resource = asyncio.run(session())
    assert [t.name for t in tools] == ["search_tools"]
    for result, exp in zip(results, expected):
        assert not result.is_error
        check_hits(result.structured_content["hits"], exp, catalog, schemas=True)
    assert empty.is_error and "query: is empty" in empty.content[0].text
    assert too_many.is_error and "k: 31 exceeds the 30 indexed tools" in too_many.content[0].text
    assert not after.is_error  # still serving after refused calls
    check_hits(after.structured_content["hits"], expected[0], catalog, schemas=True)
    assert json.loads(resource.contents[0].text)["catalog"]["n_tools"] == 30


def test_old_index_without_tools_file(bm25_index, serve_catalog, tmp_path):
    """An index saved before tools.jsonl existed still serves: ids only, or names from --catalog."""
    import shutil

    from toolret.serving.service import Loaded

    directory, catalog = serve_catalog
    old = tmp_path / "old"
    shutil.copytree(bm25_index, old)
    (old / "tools.jsonl").unlink()
    meta = json.loads((old / "pipeline.json").read_text())
    meta.pop("catalog")
    (old / "pipeline.json").write_text(json.dumps(meta))
    query = catalog.split("test")[0].text
    expected = pipeline_hits(bm25_index, [query], K)[0]

    ids_only = Loaded(old)
    hits = ids_only.search([query], K)[0]
    assert [(h["tool_id"], h["name"], h["description"]) for h in hits] == [(t, t, "") for t, _ in expected]
    assert ids_only.catalog == {"n_tools": 30} and "pass --catalog" in ids_only.tool_metadata

    with_catalog = Loaded(old, catalog_dir=directory)
    check_hits(with_catalog.search([query], K)[0], expected, catalog, schemas=True)
    assert with_catalog.catalog["name"] == "fixture"


def test_search_tools_answer_is_bounded_on_a_large_catalog():
    """k = 100 over tools with ToolBench-sized schemas: one copy of the hits, schemas for the top few only
    (the answer was the result twice with every schema: 641,577 characters on a 2,000-tool catalog)."""
    from toolret.serving.mcp_server import search_answer

    schema = {"type": "object", "properties": {f"param_{i}": {"type": "string", "description": "x" * 120}
                                               for i in range(12)}, "required": ["param_0"]}
    hits = [{"tool_id": str(i), "name": f"api_{i}", "tool": "T", "category": "C", "description": "d" * 400,
             "score": 1.0 / (i + 1), "input_schema": schema} for i in range(100)]
    answer = search_answer("find a book", "bm25", 2000, hits, schemas=3)
    size = len(answer.content[0].text) + len(json.dumps(answer.structured_content))
    unbounded = 2 * len(json.dumps({"hits": hits}))  # every schema, text and structured content alike
    assert size < 0.25 * unbounded, (size, unbounded)
    shown = answer.structured_content["hits"]
    assert [h["tool_id"] for h in shown] == [str(i) for i in range(100)]
    assert ["input_schema" in h for h in shown] == [True] * 3 + [False] * 97
    assert "input_schema" in hits[50]  # the service's rows are not modified
    none = search_answer("find a book", "bm25", 2000, hits, schemas=0).structured_content["hits"]
    assert not any("input_schema" in h for h in none)
