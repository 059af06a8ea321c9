"""Expansion texts and copy aggregation arithmetic; the expanded index's mean/max on a tiny case; the
ablation identities (one intent per query = the retriever alone; no parsed query = the backbone)."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.methods.reinvoke.components import IntentRewriter, ReInvokeIndex
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.expansion import (
    aggregate_embeddings,
    aggregate_scores,
    build_copies,
    expanded_text,
)
from toolret.pipeline import Pipeline


def test_append_and_synthetic_only_texts():
    assert expanded_text("Get weather.", "Is it sunny?") == "Documentation: Get weather. Query: Is it sunny?"
    assert expanded_text("Get weather.", "Is it sunny?", "synthetic_only") == "Is it sunny?"
    texts, owner, fb = build_copies(["A doc", "B doc"], [["q1", "q2", "q3"], []], "append", n=2)
    assert texts == ["Documentation: A doc Query: q1", "Documentation: A doc Query: q2", "B doc"]
    assert owner.tolist() == [0, 0, 1] and fb == 1  # tool without queries keeps its plain document, counted
    texts, owner, fb = build_copies(["A doc", "B doc"], None)
    assert texts == ["A doc", "B doc"] and fb == 0  # no query generator: the backbone's own documents
    texts, _, _ = build_copies(["A doc"], [["q1", "q2"]], "synthetic_only")
    assert texts == ["q1", "q2"]


def test_mean_of_copy_embeddings_equals_manual_mean_and_mean_similarity():
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(5, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    owner = np.array([0, 0, 1, 1, 1])
    tools = aggregate_embeddings(emb, owner, 2)
    np.testing.assert_allclose(tools[0], (emb[0] + emb[1]) / 2, rtol=1e-6)
    np.testing.assert_allclose(tools[1], emb[2:].mean(axis=0), rtol=1e-6)
    q = rng.normal(size=(3, 8)).astype(np.float32)
    copy_sims = q @ emb.T
    # <q, mean(copies)> == mean(<q, copy>): the mean embedding IS the mean similarity score
    np.testing.assert_allclose(q @ tools.T, aggregate_scores(copy_sims, owner, 2, "mean"), rtol=1e-5, atol=1e-6)
    mx = aggregate_scores(copy_sims, owner, 2, "max")
    np.testing.assert_allclose(mx[:, 0], copy_sims[:, :2].max(axis=1))
    np.testing.assert_allclose(mx[:, 1], copy_sims[:, 2:].max(axis=1))
    with pytest.raises(ValueError):
        aggregate_embeddings(emb, np.array([0, 0, 0, 0, 0]), 2)  # a tool without copies


def _records(queries_per_tool):
    return [{"tool_id": t, "sample_index": j, "query": q, "status": "ok"}
            for t, qs in queries_per_tool.items() for j, q in enumerate(qs)]


def test_index_mean_vs_max_and_synthetic_only(bow_encoder):
    ids = ["a", "b"]
    docs = ["weather forecast", "movie search"]
    synth = _records({"a": ["rain tomorrow", "storm alert"], "b": ["film cast", "rain film"]})
    r_mean = ReInvokeIndex(ReInvokeConfig(n_queries=2), "dense", synthetic=synth, encoder=bow_encoder)
    r_mean.index(ids, docs)
    assert r_mean.stats["n_copies"] == 4
    emb = bow_encoder.encode(["Documentation: weather forecast Query: rain tomorrow",
                              "Documentation: weather forecast Query: storm alert",
                              "Documentation: movie search Query: film cast",
                              "Documentation: movie search Query: rain film"])
    q = bow_encoder.encode(["rain film"])
    sims = (q @ emb.T)[0]
    got, _ = r_mean.tool_scores_and_order(["rain film"])
    np.testing.assert_allclose(got[0], [sims[:2].mean(), sims[2:].mean()], rtol=1e-5)
    r_max = ReInvokeIndex(ReInvokeConfig(n_queries=2, aggregation="max"), "dense", synthetic=synth,
                          encoder=bow_encoder)
    r_max.index(ids, docs)
    got_max, _ = r_max.tool_scores_and_order(["rain film"])
    np.testing.assert_allclose(got_max[0], [sims[:2].max(), sims[2:].max()], rtol=1e-5)
    # the search scores are those aggregated similarities, best first
    ranking = r_max.search(["rain film"], 2)
    assert ranking.ranked_ids(0) == ["b", "a"]
    np.testing.assert_allclose(ranking.scores[0], [sims[2:].max(), sims[:2].max()], rtol=1e-5)
    r_syn = ReInvokeIndex(ReInvokeConfig(n_queries=1, expansion="synthetic_only"), "dense", synthetic=synth,
                          encoder=bow_encoder)
    r_syn.index(ids, docs)
    assert r_syn.stats["n_copies"] == 2  # first query of each tool only
    # copies are the queries alone: the document's words match nothing, the first query's words do
    got_syn, _ = r_syn.tool_scores_and_order(["movie search"])
    np.testing.assert_allclose(got_syn[0], [0.0, 0.0], atol=1e-7)
    assert r_syn.search(["film"], 2).ranked_ids(0)[0] == "b"


IDS = [f"t{i}" for i in range(4)]
DOCS = ["weather forecast rain", "movie search cast", "currency convert euro", "recipe ingredient cook"]
QUERIES = ["rain in paris", "convert dollars to euro", "cook pasta recipe", "nothing matches here"]


def _plain(backbone, bow_encoder):
    from toolret.retrieval.bm25 import BM25Retriever
    from toolret.retrieval.dense import DenseRetriever

    if backbone == "bm25":
        r = BM25Retriever()
    else:
        r = DenseRetriever(encoder=object())
        r.encode = lambda texts, show_progress=False: bow_encoder.encode(texts)
    r.index(IDS, DOCS)
    return r


@pytest.mark.parametrize("backbone", ["dense", "bm25"])
def test_one_intent_per_query_ranks_exactly_like_the_retriever_alone(backbone, tmp_path, fake_generator_cls,
                                                                      bow_encoder):
    from toolret.methods.reinvoke.generation import LazyLLM

    plain = _plain(backbone, bow_encoder)
    # an intent extractor whose output is unparsable for every query: one intent each (the raw query)
    cfg = ReInvokeConfig()
    gen = fake_generator_cls(lambda prompt, j: "")
    rewriter = IntentRewriter(cfg, llm=LazyLLM(cfg, tmp_path / "c.jsonl", gen))
    pipe = Pipeline(plain, rewriter)
    got = pipe.search(QUERIES, 4, [f"q{i}" for i in range(len(QUERIES))])
    want = plain.search(QUERIES, 4, [f"q{i}" for i in range(len(QUERIES))])
    assert got.as_lists() == want.as_lists()
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6)
    assert gen.calls == len(QUERIES) and rewriter.stats["fallback"] == len(QUERIES)
    # one parsed intent per query is searched in place of the query (no fusion, the retriever's ranking)
    stored = {q: [q.replace("rain", "movie")] for q in QUERIES}
    pipe = Pipeline(plain, IntentRewriter(cfg, outputs=stored))
    rewritten = [stored[q][0] for q in QUERIES]
    assert pipe.search(QUERIES, 4).as_lists() == plain.search(rewritten, 4).as_lists()
    assert pipe.search(QUERIES, 4).ranked_ids(0)[0] == "t1"  # "movie in paris": the intent, not the query


@pytest.mark.parametrize("backbone", ["dense", "bm25"])
def test_index_without_any_parsed_query_is_exactly_its_backbone(backbone, bow_encoder):
    failed = [{"tool_id": t, "sample_index": j, "query": None, "status": "empty"} for t in IDS for j in range(2)]
    r = ReInvokeIndex(ReInvokeConfig(n_queries=2), backbone, synthetic=failed, encoder=bow_encoder)
    r.index(IDS, DOCS)
    assert r.stats == {"n_copies": 4, "tools_without_queries": 4}  # every tool keeps its plain document
    plain = _plain(backbone, bow_encoder)
    # the last query shares no term with any document: no results from either
    assert r.search(QUERIES, 4).as_lists() == plain.search(QUERIES, 4).as_lists()
    np.testing.assert_allclose(r.search(QUERIES, 4).scores, plain.search(QUERIES, 4).scores, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backbone", ["dense", "bm25"])
def test_intent_ranking_query_ranks_by_the_query_and_hands_the_intents_on(backbone, bow_encoder):
    """``intent_ranking: query``: the first stage is the backbone's ranking of the query itself (not of its
    intents); the rewrites a reranker reads are the query followed by its intents."""
    plain = _plain(backbone, bow_encoder)
    stored = {q: [q.replace("rain", "movie"), "weather"] for q in QUERIES}
    rewriter = IntentRewriter(ReInvokeConfig(intent_ranking="query"), outputs=stored)
    assert rewriter.rewrite(QUERIES) == [[q, *stored[q]] for q in QUERIES]
    got = Pipeline(plain, rewriter).search(QUERIES, 4)
    assert got.as_lists() == plain.search(QUERIES, 4).as_lists()
    multiview = Pipeline(plain, IntentRewriter(ReInvokeConfig(), outputs=stored)).search(QUERIES, 4)
    assert multiview.as_lists() != got.as_lists()  # the paper's multi-view ranking of the intents differs
