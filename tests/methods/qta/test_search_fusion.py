"""``qta.search: query_and_rewrite``: the query and its rewrite are both searched and their rankings fused
(equal-weight reciprocal rank); a rewrite that copies the query leaves the query's ranking."""

from __future__ import annotations

import pytest

from toolret.errors import CatalogError
from toolret.methods.qta.components import QTARewriter
from toolret.methods.qta.config import QTAConfig
from toolret.pipeline import Pipeline
from toolret.retrieval.bm25 import BM25Retriever
from toolret.retrieval.fusion import weighted_rrf

IDS = ["weather", "movies", "flights", "hotels"]
DOCS = ["current weather forecast for a city", "search movies by title and year",
        "book flights between airports", "find hotels near a location"]


def _bm25() -> BM25Retriever:
    r = BM25Retriever()
    r.index(IDS, DOCS)
    return r


def test_the_query_and_its_rewrite_are_fused_by_reciprocal_rank():
    queries = ["forecast for paris", "hotels in rome"]
    stored = {"forecast for paris": {"rewrite": "movies by title"},  # a rewrite that points elsewhere
              "hotels in rome": {"rewrite": "hotels in rome"}}  # a copy of the query
    rw = QTARewriter(QTAConfig(search="query_and_rewrite"), outputs=stored)
    assert rw.rewrite(queries) == [["forecast for paris", "movies by title"], ["hotels in rome"]]
    got = Pipeline(_bm25(), rw).search(queries, 4, ["a", "b"])
    bm25 = _bm25()
    fused = weighted_rrf([bm25.search(["forecast for paris"], 4, ["a"]), bm25.search(["movies by title"], 4, ["a"])],
                         [0.5, 0.5], 4)
    assert got.ranked_ids(0) == fused.ranked_ids(0)
    assert set(got.ranked_ids(0)[:2]) == {"weather", "movies"}  # each text's top tool is in the fused top 2
    assert got.ranked_ids(1)[0] == bm25.search(["hotels in rome"], 4).ranked_ids(0)[0]
    plain = Pipeline(_bm25(), QTARewriter(QTAConfig(), outputs=stored)).search(queries, 4, ["a", "b"])
    assert plain.ranked_ids(0)[0] == "movies"  # the paper's search: the rewrite alone


def test_rewrites_that_copy_the_query_are_counted_once_per_query():
    """Issue 27 reports how many test rewrites copy the query: a rewrite equal to its query (surrounding
    whitespace aside) counts, a fallback to the query (unusable output) does not, a repeated query counts once."""
    stored = {"forecast for paris": {"rewrite": " forecast for paris\n", "fallback": False},
              "hotels in rome": {"rewrite": "find hotels near rome", "fallback": False},
              "flights to oslo": {"rewrite": "flights to oslo", "fallback": True}}
    rw = QTARewriter(QTAConfig(), outputs=stored)
    rw.rewrite(["forecast for paris", "hotels in rome"])
    rw.rewrite(["forecast for paris", "flights to oslo"])
    assert rw.stats["copies_query"] == 1 and rw.stats["rewritten_queries"] == 3


def test_sampled_rewrites_are_fused_with_the_query_by_their_weights():
    """``rewrites: 3``: the query (``query_weight`` 0.25) and three rewrites (0.25 each) fused by weighted RRF; a
    rewrite repeated among the samples is searched once and counts with each slot it fills."""
    query = "forecast for paris"
    stored = {query: {"rewrite": "movies by title",
                      "samples": [{"rewrite": "book flights"}, {"rewrite": "movies by title"}]}}
    rw = QTARewriter(QTAConfig(search="query_and_rewrite", rewrites=3, query_weight=0.25), outputs=stored)
    assert rw.rewrite([query]) == [[query, "movies by title", "book flights"]]
    got = Pipeline(_bm25(), rw).search([query], 4, ["a"])
    bm25 = _bm25()
    texts = [query, "movies by title", "book flights", "movies by title"]
    expected = weighted_rrf([bm25.search([t], 4, ["a"]) for t in texts], [0.25, 0.25, 0.25, 0.25], 4)
    assert got.ranked_ids(0) == expected.ranked_ids(0)
    assert got.ranked_ids(0)[0] == "movies"  # a top rank counted twice beats the query's
    assert list(got.scores[0]) == list(expected.scores[0])
    alone = QTARewriter(QTAConfig(rewrites=3), outputs=stored)  # search: rewrite -> the rewrites only, 1/3 each
    assert alone.slot_weights() == [1 / 3] * 3
    assert Pipeline(_bm25(), alone).search([query], 4, ["a"]).ranked_ids(0)[0] == "movies"


def test_one_rewrite_fuses_as_before_and_a_stored_record_without_samples_needs_the_llm():
    rw = QTARewriter(QTAConfig(search="query_and_rewrite"), outputs={"q": {"rewrite": "r"}})
    assert rw.slot_weights() == [0.5, 0.5] and rw.rewrite(["q"]) == [["q", "r"]]
    short = QTARewriter(QTAConfig(search="query_and_rewrite", rewrites=2), outputs={"q": {"rewrite": "r"}})
    with pytest.raises(CatalogError, match="no stored sampled rewrites for 1 queries"):
        short.rewrite(["q"])
