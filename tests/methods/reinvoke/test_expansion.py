"""Expansion texts and copy aggregation arithmetic; the retriever's mean/max on a tiny case."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.expansion import (
    aggregate_embeddings,
    aggregate_scores,
    build_copies,
    expanded_text,
)
from toolret.methods.reinvoke.retriever import ReInvokeRetriever


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


def test_retriever_mean_vs_max_and_synthetic_only(bow_encoder):
    ids = ["a", "b"]
    docs = ["weather forecast", "movie search"]
    synth = _records({"a": ["rain tomorrow", "storm alert"], "b": ["film cast", "rain film"]})
    r_mean = ReInvokeRetriever(ReInvokeConfig(intent_extractor=False, n_queries=2), synthetic=synth,
                               encoder=bow_encoder)
    r_mean.index(ids, docs)
    emb = bow_encoder.encode(["Documentation: weather forecast Query: rain tomorrow",
                              "Documentation: weather forecast Query: storm alert",
                              "Documentation: movie search Query: film cast",
                              "Documentation: movie search Query: rain film"])
    q = bow_encoder.encode(["rain film"])
    sims = (q @ emb.T)[0]
    got = r_mean._backbone.tool_scores(["rain film"])[0]
    np.testing.assert_allclose(got, [sims[:2].mean(), sims[2:].mean()], rtol=1e-5)
    r_max = ReInvokeRetriever(ReInvokeConfig(intent_extractor=False, n_queries=2, aggregation="max"),
                              synthetic=synth, encoder=bow_encoder)
    r_max.index(ids, docs)
    np.testing.assert_allclose(r_max._backbone.tool_scores(["rain film"])[0], [sims[:2].max(), sims[2:].max()],
                               rtol=1e-5)
    r_syn = ReInvokeRetriever(ReInvokeConfig(intent_extractor=False, n_queries=1, expansion="synthetic_only"),
                              synthetic=synth, encoder=bow_encoder)
    r_syn.index(ids, docs)
    assert r_syn.stats["n_copies"] == 2  # first query of each tool only
    # copies are the queries alone: the document's words match nothing, the first query's words do
    np.testing.assert_allclose(r_syn._backbone.tool_scores(["movie search"])[0], [0.0, 0.0], atol=1e-7)
    assert r_syn.search(["film"], 2).ranked_ids(0)[0] == "b"


def test_both_components_off_is_exactly_the_backbone(bow_encoder):
    from toolret.retrieval.bm25 import BM25Retriever

    ids = [f"t{i}" for i in range(4)]
    docs = ["weather forecast rain", "movie search cast", "currency convert euro", "recipe ingredient cook"]
    queries = ["rain in paris", "convert dollars to euro", "cook pasta recipe"]
    off = ReInvokeConfig(query_generator=False, intent_extractor=False)
    r = ReInvokeRetriever(off, encoder=bow_encoder)
    r.index(ids, docs)
    from toolret.retrieval.dense import DenseRetriever

    plain_dense = DenseRetriever(encoder=object())
    plain_dense.encode = lambda texts, show_progress=False: bow_encoder.encode(texts)
    plain_dense.index(ids, docs)
    assert r.search(queries, 4).as_lists() == plain_dense.search(queries, 4).as_lists()
    rb = ReInvokeRetriever(off.replace(backbone="bm25"))
    rb.index(ids, docs)
    plain = BM25Retriever()
    plain.index(ids, docs)
    queries.append("nothing matches here")  # all-zero BM25 scores: the backbone's own (arbitrary) order is kept
    assert rb.search(queries, 4).as_lists() == plain.search(queries, 4).as_lists()
