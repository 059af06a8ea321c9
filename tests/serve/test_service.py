"""The search service in process: concurrent searches without a global lock answer exactly as sequential
ones (BM25, dense and hybrid: bm25s, faiss and the sentence-transformers encoder from 8 threads); which
components run without a lock is read from the components themselves; tool records
from every kind of catalog entry; a saved pipeline carries its records and catalog summary."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from serve_helpers import build_index

from toolret.catalog.model import Tool
from toolret.catalog.tool_fields import parse_toolbench_document
from toolret.catalog.tool_records import tool_record

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("method", ["bm25", "dense", "hybrid"])
def test_concurrent_searches_equal_sequential(method, serve_catalog, tmp_path):
    from toolret.serving.service import SearchService

    _, catalog = serve_catalog
    torch = __import__("torch") if method != "bm25" else None
    threads = torch.get_num_threads() if torch else None  # the service sets 1 (process-wide): restored below
    service = SearchService(build_index(catalog, tmp_path / method, method))
    try:
        service.load()  # loaded and warmed as the server does (torch: 1 intra-op thread)
        loaded = service.current
        assert loaded.lock is None and loaded.summary()["concurrent"]  # read-only components: no global lock
        queries = [q.text for q in catalog.queries]
        sequential = {q: loaded.search([q], 5)[0] for q in queries}
        with ThreadPoolExecutor(8) as pool:
            parallel = list(pool.map(lambda q: (q, loaded.search([q], 5)[0]), queries * 3))
    finally:
        service.close()
        if threads:
            torch.set_num_threads(threads)
    for q, hits in parallel:
        assert [h["tool_id"] for h in hits] == [h["tool_id"] for h in sequential[q]]
        assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in sequential[q]], rel=1e-5)


def test_concurrency_safety_is_derived_from_the_components():
    """A component declares ``concurrent_search = True`` when its search only reads shared state; a hybrid
    is safe exactly when both its sides are; anything that does not declare it runs under a lock."""
    from toolret.methods.toolrerank.components import ToolRerankReranker
    from toolret.methods.toolrerank.config import ToolRerankConfig
    from toolret.retrieval.bm25 import BM25Retriever
    from toolret.retrieval.dense import DenseRetriever
    from toolret.retrieval.finetuned import FinetunedDenseRetriever
    from toolret.retrieval.hybrid import HybridRetriever
    from toolret.roles import concurrent_safe

    class Unvetted(BM25Retriever):  # a subclass may cache or mutate in search(): it must opt in again
        name = "unvetted"
        concurrent_search = False

    assert concurrent_safe(BM25Retriever()) and concurrent_safe(DenseRetriever())
    assert concurrent_safe(FinetunedDenseRetriever("unused-folder"))
    assert concurrent_safe(HybridRetriever([BM25Retriever(), DenseRetriever()]))
    assert not concurrent_safe(HybridRetriever([BM25Retriever(), Unvetted()]))
    assert not concurrent_safe(HybridRetriever([BM25Retriever(), HybridRetriever([Unvetted(), BM25Retriever()])]))
    assert not concurrent_safe(ToolRerankReranker(ToolRerankConfig(), "unused-artifact"))  # score memo, stats
    assert not concurrent_safe(object())


def test_toolbench_document_gives_name_description_and_schema():
    doc = ('category_name:Finance, tool_name:MarketPulse, api_name:Stock Quote, api_description:Price, change, '
           'volume., required_params: [{"name": "symbol", "type": "STRING", "description": "Ticker"}], '
           'optional_params: [{"name": "days", "type": "NUMBER", "description": "", "default": 5}, '
           '{"name": "", "type": "STRING"}], return_schema: {"price": "float"}')
    parsed = parse_toolbench_document(doc)
    assert (parsed.api_name, parsed.description) == ("Stock Quote", "Price, change, volume.")
    r = tool_record(Tool(id="MarketPulse::Stock Quote", name="Stock Quote", docs={"original": doc},
                         tool="MarketPulse", category="Finance"))
    assert r == {"id": "MarketPulse::Stock Quote", "name": "Stock Quote", "tool": "MarketPulse",
                 "category": "Finance", "description": "Price, change, volume.",
                 "input_schema": {"type": "object", "required": ["symbol"], "properties": {
                     "symbol": {"type": "string", "description": "Ticker"},
                     "days": {"type": "number", "default": 5}}}}
    # no description in the source: empty, not the whole document
    empty = doc.replace("Price, change, volume.", "")
    assert tool_record(Tool(id="x", name="Stock Quote", docs={"original": empty}))["description"] == ""


def test_metadata_wins_and_other_documents_have_no_schema():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    r = tool_record(Tool(id="s", name="search", docs={"original": "search the web"},
                         metadata={"description": "Web search.", "input_schema": schema}))
    assert r["description"] == "Web search." and r["input_schema"] == schema
    r = tool_record(Tool(id="f", name="f", docs={"original": "x"},
                         metadata={"parameters": {"type": "object", "properties": {}}}))
    assert r["input_schema"] == {"type": "object", "properties": {}}
    r = tool_record(Tool(id="t", name="t", docs={"original": "x"}, metadata={
        "required_parameters": [{"name": "a", "type": "INTEGER"}], "optional_parameters": None}))
    assert r["input_schema"] == {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    # MTRB-style: the document is the description, no schema; long ones are cut
    doc = "GET /movie/{movie_id}/keywords: Get the keywords that have been added to a movie. " * 30
    r = tool_record(Tool(id="0", name="GET /movie/{movie_id}/keywords", docs={"original": doc}))
    assert "input_schema" not in r and len(r["description"]) == 1000 and r["description"].endswith("…")
    assert doc.startswith(r["description"][:-1])


def test_saved_pipeline_carries_records_and_catalog(serve_catalog, bm25_index):
    from toolret.pipeline import Pipeline

    directory, catalog = serve_catalog
    lines = (bm25_index / "tools.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == catalog.tool_ids
    loaded = Pipeline.load(bm25_index)
    assert loaded.tool_records == [tool_record(t) for t in catalog.tools]
    assert loaded.catalog_info["name"] == "fixture" and loaded.catalog_info["n_tools"] == 30
    assert loaded.catalog_info["provenance"]["source"] == directory.name  # the folder name, never a machine path
    loaded.save(bm25_index.parent / "again")  # a loaded pipeline saves its records again
    assert (bm25_index.parent / "again" / "tools.jsonl").read_text(encoding="utf-8").splitlines() == lines
