"""Catalogs imported from where agents' tools live (toolret.catalog.importers): an OpenAPI 3 file and a
running MCP server become curated catalogs that index, serve (with input schemas) and, given queries,
evaluate; bad input is refused naming the file and operation; a dense re-index after an API change
encodes only what changed. Starts MCP servers and `toolret serve` as subprocesses."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from toolret.catalog.importers.mcp import import_mcp, list_server_tools
from toolret.catalog.importers.openapi import import_openapi
from toolret.catalog.io import load_catalog
from toolret.errors import CatalogError
from toolret.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
from serve_helpers import Server, pipeline_hits  # noqa: E402

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SPEC = FIXTURES / "openapi_library.yaml"
QUERIES = FIXTURES / "openapi_library_queries.jsonl"
MCP_SERVER = FIXTURES / "mcp_travel_server.py"
LIBRARY = "Riverside Community Library"
OPERATIONS = {"searchBooks", "addBook", "getBook", "withdrawBook", "checkoutBook", "renewLoan", "listFines",
              "registerForEvent", "GET /opening-hours"}
TRAVEL_TOOLS = {"search_flights", "book_hotel", "convert_currency", "weather_forecast", "translate_phrase"}


def _spec_variant(tmp_path: Path, edit) -> Path:
    """The fixture spec, edited, written as JSON (the importer reads JSON and YAML)."""
    doc = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    edit(doc)
    out = tmp_path / "spec.json"
    out.write_text(json.dumps(doc), encoding="utf-8")
    return out


def _tools(directory: Path) -> dict:
    return {t.id: t for t in load_catalog(directory).tools}


# ---------------------------------------------------------------------------------------------- OpenAPI
def test_openapi_import_with_queries_evaluates(tmp_path):
    out = tmp_path / "library"
    assert main(["import-openapi", "--spec", str(SPEC), "--queries", str(QUERIES), "--out", str(out)]) == 0
    catalog = load_catalog(out)
    tools = {t.id: t for t in catalog.tools}
    assert catalog.name == "riverside-community-library" and set(tools) == OPERATIONS
    assert catalog.provenance["purpose"] == "evaluation" and catalog.provenance["n_operations"] == 9
    assert {t.tool for t in catalog.tools} == {LIBRARY}
    assert tools["renewLoan"].category == "loans" and tools["listFines"].category == "members"
    assert tools["GET /opening-hours"].category == LIBRARY  # no tag: the API title
    assert len(catalog.split("test")) == 6 and catalog.gold("q6") == {"checkoutBook", "getBook"}

    get_book = tools["getBook"].metadata  # a path-level parameter given by $ref to components/parameters
    assert (get_book["method"], get_book["path"]) == ("GET", "/books/{bookId}")
    assert get_book["input_schema"] == {"type": "object", "required": ["bookId"], "properties": {
        "bookId": {"type": "string", "description": "the book's catalog number"}}}
    assert get_book["parameter_locations"] == {"bookId": "path"}
    fines = tools["listFines"].metadata["input_schema"]
    assert fines["required"] == ["memberId"] and fines["properties"]["status"]["enum"] == ["open", "paid", "all"]
    add = tools["addBook"].metadata["input_schema"]  # request body by $ref; Book -> Series -> Book recurs
    assert add["required"] == ["body"] and add["properties"]["body"]["properties"]["title"]["type"] == "string"
    recurring = add["properties"]["body"]["properties"]["series"]["properties"]["books"]["items"]
    assert "properties" not in recurring and "#/components/schemas/Book" in recurring["$comment"]
    register = tools["registerForEvent"].metadata["input_schema"]  # optional body, required path parameter
    assert register["required"] == ["eventId"] and register["properties"]["body"]["properties"]["seats"]["maximum"] == 4

    doc = tools["checkoutBook"].text
    assert "POST /loans" in doc and "Borrow a book" in doc and "dueDate" in doc
    assert "when the book must be returned" in doc and "three weeks" in doc
    assert "the book's catalog number" in tools["withdrawBook"].text  # the shared parameter, documented

    result_path = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(out), "--method", "bm25", "--k", "1,5",
                 "--output", str(result_path)]) == 0
    result = json.loads(result_path.read_text())
    assert result["n_queries"] == 6 and {"recall@1", "recall@5", "ndcg@5", "mrr"} <= set(result["metrics"])
    rows = {r["query_id"]: r for r in map(json.loads, result_path.with_name("r.per_query.jsonl").open())}
    assert rows["q1"]["ranked"][0] == "renewLoan"  # "renew my loan ..."
    assert rows["q3"]["ranked"][0] == "listFines"  # "... late fees"
    assert result["metrics"]["recall@5"] >= 0.5


def test_openapi_import_without_queries_is_a_serving_catalog(tmp_path):
    from toolret.catalog.validation import validate_catalog
    from toolret.catalog.tool_records import read_tools

    out = tmp_path / "library"
    assert main(["import-openapi", "--spec", str(SPEC), "--out", str(out), "--name", "lib"]) == 0
    catalog = load_catalog(out)
    assert catalog.name == "lib" and catalog.provenance["purpose"] == "serving" and not catalog.queries
    assert not (out / "qrels" / "test.tsv").exists()
    report = validate_catalog(catalog)
    assert report.success, report.summary()
    assert not [r for r in report.results if r.name.startswith("splits.") and r.name.endswith("_present")]

    assert main(["index", "--catalog", str(out), "--method", "bm25", "--out", str(tmp_path / "idx")]) == 0
    records = {r["id"]: r for r in read_tools(tmp_path / "idx" / "original" / "tools.jsonl")}
    assert set(records) == OPERATIONS
    renew = records["renewLoan"]
    assert renew["input_schema"] == catalog.tools[catalog.tool_position("renewLoan")].metadata["input_schema"]
    assert renew["description"].startswith("Renew a loan. Extend the due date") and renew["category"] == "loans"
    assert main(["evaluate", "--dataset", str(out), "--method", "bm25", "--output", str(tmp_path / "r.json")]) == 2

    # the purpose rule is the loader's too: the same files as an evaluation catalog lack qrels/test.tsv
    meta = json.loads((out / "catalog.json").read_text())
    for purpose, message in (("evaluation", "qrels/test.tsv: missing"), ("publishing", "unknown catalog purpose")):
        meta["provenance"]["purpose"] = purpose
        (out / "catalog.json").write_text(json.dumps(meta))
        with pytest.raises(CatalogError, match=message):
            load_catalog(out)


def _duplicate_operation_id(doc):
    doc["paths"]["/books"]["post"]["operationId"] = "searchBooks"


def _swagger2(doc):
    doc.pop("openapi")
    doc["swagger"] = "2.0"


def _missing_parameter(doc):
    doc["paths"]["/loans/{loanId}/renew"]["post"]["parameters"] = [{"$ref": "#/components/parameters/LoanId"}]


def _missing_schema(doc):
    doc["paths"]["/loans"]["post"]["requestBody"]["content"]["application/json"]["schema"] = {
        "$ref": "#/components/schemas/Loan"}


def _external_ref(doc):
    doc["paths"]["/books"]["post"]["requestBody"]["content"]["application/json"]["schema"] = {
        "$ref": "common.yaml#/Book"}


@pytest.mark.parametrize("edit, expected", [
    (_duplicate_operation_id, ["duplicate operationId 'searchBooks'", "GET /books", "POST /books"]),
    (_swagger2, ["not an OpenAPI 3 document", "swagger: '2.0'"]),
    (_missing_parameter, ["POST /loans/{loanId}/renew (renewLoan)", "'#/components/parameters/LoanId' does not "
                          "resolve", "no 'LoanId' under '#/components/parameters'"]),
    (_missing_schema, ["POST /loans (checkoutBook)", "'#/components/schemas/Loan' does not resolve"]),
    (_external_ref, ["POST /books (addBook)", "'common.yaml#/Book' is not a local reference"]),
])
def test_bad_openapi_files_are_refused_naming_file_and_operation(tmp_path, edit, expected):
    spec = _spec_variant(tmp_path, edit)
    with pytest.raises(CatalogError) as err:
        import_openapi(spec)
    message = str(err.value)
    assert str(spec) in message
    for part in expected:
        assert part in message, message


def test_bad_queries_file_and_cli_errors(tmp_path, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "a", "text": "renew a loan", "gold": ["renewLoan"]}\n'
                       '{"_id": "b", "text": "pay a fine", "gold": ["payFine"]}\n')
    with pytest.raises(CatalogError, match=r"q\.jsonl:2 \(query _id='b'\): gold tool id\(s\) \['payFine'\]"):
        import_openapi(SPEC, queries=queries)
    queries.write_text('{"_id": "a", "text": "renew a loan", "gold": []}\n')
    with pytest.raises(CatalogError, match=r"q\.jsonl:1 .*'gold' must be a non-empty list"):
        import_openapi(SPEC, queries=queries)
    out = tmp_path / "out"
    assert main(["import-openapi", "--spec", str(_spec_variant(tmp_path, _swagger2)), "--out", str(out)]) == 2
    assert "not an OpenAPI 3 document" in capsys.readouterr().err and not out.exists()


# -------------------------------------------------------------------------------------------------- MCP
def _mcp_search(url: str, query: str, k: int) -> list[dict]:
    from mcp import Client

    async def call():
        async with Client(url, read_timeout_seconds=60) as client:
            return await client.call_tool("search_tools", {"query": query, "k": k})

    result = asyncio.run(call())
    assert not result.is_error, result.content
    return result.structured_content["hits"]


def test_import_mcp_stdio_then_index_search_and_serve(tmp_path):
    out = tmp_path / "travel"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(MCP_SERVER))}"
    assert main(["import-mcp", "--command", command, "--out", str(out)]) == 0
    catalog = load_catalog(out)
    tools = {t.id: t for t in catalog.tools}
    assert catalog.name == "travel-desk" and set(tools) == TRAVEL_TOOLS
    assert catalog.provenance["server"] == {"name": "travel-desk", "version": "0.3.0"}
    assert catalog.provenance["purpose"] == "serving"
    assert all(t.tool == "travel-desk" and t.name == t.id for t in catalog.tools)  # server -> tool
    convert = tools["convert_currency"].metadata["input_schema"]
    assert convert["required"] == ["amount", "from_currency", "to_currency"]
    assert convert["properties"]["amount"]["type"] == "number"
    assert convert["properties"]["from_currency"]["description"] == "ISO 4217 code, e.g. USD"
    weather = tools["weather_forecast"].metadata["input_schema"]
    assert weather["required"] == ["city"] and weather["properties"]["days"]["default"] == 3
    assert tools["book_hotel"].metadata["title"] == "Hotel booking"
    assert "Convert an amount of money from one currency to another" in tools["convert_currency"].text
    assert "IATA code of the departure airport" in tools["search_flights"].text

    assert main(["index", "--catalog", str(out), "--method", "bm25", "--out", str(tmp_path / "idx")]) == 0
    index = tmp_path / "idx" / "original"
    top = [hits[0][0] for hits in pipeline_hits(index, ["convert 100 dollars into another currency",
                                                         "will it rain in Lisbon, what is the weather forecast"], 3)]
    assert top == ["convert_currency", "weather_forecast"]

    with Server(index, tmp_path / "serve.log") as server:
        server.wait_ready()
        hits = _mcp_search(server.base + "/mcp", "convert 100 dollars into another currency", 2)
        assert hits[0]["tool_id"] == "convert_currency" and hits[0]["tool"] == "travel-desk"
        assert hits[0]["input_schema"] == convert
        assert hits[0]["description"].startswith("Convert an amount of money")

        # the served index is itself an MCP server: import it over streamable HTTP
        assert main(["import-mcp", "--url", server.base + "/mcp", "--out", str(tmp_path / "served")]) == 0
    served = load_catalog(tmp_path / "served").tools
    assert [t.id for t in served] == ["search_tools"] and served[0].tool == "toolret"
    assert set(served[0].metadata["input_schema"]["properties"]) == {"query", "k", "schemas"}
    assert served[0].metadata["input_schema"]["required"] == ["query"]


def test_import_mcp_with_queries_then_evaluate(tmp_path):
    """A catalog imported from a running MCP server (the SDK fixture server, over stdio) with a queries file
    is an evaluation catalog: `toolret evaluate` scores a pipeline on it."""
    out = tmp_path / "travel"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(MCP_SERVER))}"
    assert main(["import-mcp", "--command", command, "--queries", str(FIXTURES / "mcp_travel_queries.jsonl"),
                 "--out", str(out)]) == 0
    catalog = load_catalog(out)
    assert catalog.provenance["purpose"] == "evaluation" and len(catalog.split("test")) == 6
    assert catalog.gold("t6") == {"search_flights", "book_hotel"}
    result_path = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(out), "--method", "bm25", "--k", "1,5", "--output", str(result_path)]) == 0
    result = json.loads(result_path.read_text())
    assert result["n_queries"] == 6 and result["n_tools"] == len(TRAVEL_TOOLS)
    rows = {r["query_id"]: r for r in map(json.loads, result_path.with_name("r.per_query.jsonl").open())}
    assert rows["t4"]["ranked"][0] == "weather_forecast"  # "rain ... weekend" -> the forecast tool
    assert rows["t3"]["ranked"][0] == "book_hotel"
    # a query sharing no term with any tool gets no hits (not score-0 tools in arbitrary order): recall < 1
    assert rows["t1"]["ranked"] == [] and result["metrics"]["recall@5"] < 1.0


def test_mcp_tool_listing_follows_pagination_cursors():
    import mcp_types as types
    from mcp.server.lowlevel.server import Server as LowLevelServer

    names = [f"tool_{i}" for i in range(7)]

    async def list_tools(ctx, params):
        start = int(params.cursor) if params is not None and params.cursor else 0
        page = [types.Tool(name=n, description=f"does {n}", input_schema={"type": "object"})
                for n in names[start:start + 3]]
        return types.ListToolsResult(tools=page, next_cursor=str(start + 3) if start + 3 < len(names) else None)

    info, tools = asyncio.run(list_server_tools(LowLevelServer("paged", on_list_tools=list_tools)))
    assert [t.name for t in tools] == names and info["name"] == "paged"

    async def endless(ctx, params):
        return types.ListToolsResult(tools=[], next_cursor="again")

    with pytest.raises(CatalogError, match="cursor 'again' twice"):
        asyncio.run(list_server_tools(LowLevelServer("loop", on_list_tools=endless)))


def test_import_mcp_refuses_a_server_it_cannot_start(tmp_path):
    with pytest.raises(CatalogError, match=r"MCP server '/nonexistent/mcp-server --flag': could not list its tools"):
        import_mcp(command="/nonexistent/mcp-server --flag", timeout_s=30)
    with pytest.raises(CatalogError, match="exactly one"):
        import_mcp(command="x", url="http://127.0.0.1:1/mcp")


# ------------------------------------------------------------------------------------ dense re-index
def test_dense_reindex_after_an_api_change_encodes_only_the_changed_operation(tmp_path, monkeypatch):
    from toolret.pipeline import Pipeline
    from toolret.retrieval.dense import DenseRetriever
    from toolret.retrieval.embedding_store import text_key
    from toolret.catalog.tool_records import read_tools

    store = tmp_path / "embeddings"
    encoded: list[str] = []  # every text the encoder is asked for (`toolret index` runs in this process)
    real_encode = DenseRetriever.encode
    monkeypatch.setattr(DenseRetriever, "encode", lambda self, texts, show_progress=False: (
        encoded.extend(texts), real_encode(self, texts, show_progress))[1])

    def index(spec: Path, name: str) -> tuple[Path, dict]:
        catalog_dir = tmp_path / f"{name}-catalog"
        assert main(["import-openapi", "--spec", str(spec), "--out", str(catalog_dir)]) == 0
        encoded.clear()
        assert main(["index", "--catalog", str(catalog_dir), "--method", "dense", "--out", str(tmp_path / name),
                     "--set", f"dense.embedding_cache={store}"]) == 0
        return tmp_path / name / "original", _tools(catalog_dir)

    def shards() -> dict[str, set[str]]:
        import numpy as np

        out = {}
        for shard in store.glob("*/*.npz"):
            with np.load(shard) as z:
                out[shard.name] = set(z["keys"].tolist())
        return out

    first_index, first = index(SPEC, "v1")
    assert sorted(encoded) == sorted(t.text for t in first.values())
    before = shards()
    assert set().union(*before.values()) == {text_key(t.text) for t in first.values()}  # 9 documents encoded

    new_description = "Extend the due date of a borrowed item by fourteen days; renewals are limited to three."

    def change(doc):
        doc["paths"]["/loans/{loanId}/renew"]["post"]["description"] = new_description
        del doc["paths"]["/books/{bookId}"]["delete"]  # withdrawBook is gone

    second_index, second = index(_spec_variant(tmp_path, change), "v2")
    assert set(second) == OPERATIONS - {"withdrawBook"}
    assert second["renewLoan"].text != first["renewLoan"].text
    assert encoded == [second["renewLoan"].text]  # the 7 unchanged documents came from the store
    new = {name: keys for name, keys in shards().items() if name not in before}
    assert list(new.values()) == [{text_key(second["renewLoan"].text)}]  # one shard: the changed document only

    pipeline = Pipeline.load(second_index)
    assert "withdrawBook" not in pipeline.retriever.tool_ids and len(pipeline.retriever.tool_ids) == 8
    assert "withdrawBook" not in {r["id"] for r in read_tools(second_index / "tools.jsonl")}
    hits = pipeline_hits(second_index, ["renewals are limited: extend the due date of a borrowed item"], 1)
    assert hits[0][0][0] == "renewLoan"
    assert "withdrawBook" in {r["id"] for r in read_tools(first_index / "tools.jsonl")}


def test_an_import_never_replaces_an_existing_catalog_unasked(tmp_path, capsys):
    out = tmp_path / "library"
    assert main(["import-openapi", "--spec", str(SPEC), "--queries", str(QUERIES), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # a serving import (no queries) into the evaluation catalog: refused, nothing touched
    assert main(["import-openapi", "--spec", str(SPEC), "--out", str(out)]) == 2
    assert f"{out}: already holds a catalog; pass --force" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert load_catalog(out).queries
    assert main(["import-openapi", "--spec", str(SPEC), "--out", str(out), "--force"]) == 0
    assert not load_catalog(out).queries
