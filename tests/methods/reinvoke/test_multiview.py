"""The multi-view ordering (Re-Invoke Sec. 3.3): pinned on hand-made cases."""

from __future__ import annotations

import numpy as np

from toolret.methods.reinvoke.multiview import multiview_rank, ranking_score


def test_each_intents_top_tool_precedes_any_second_ranked_tool():
    # 5 tools. Intent 0: tool 1 (0.95) > tool 0 (0.90) > ... ; intent 1: tool 3 (0.40) > tool 4 (0.35) > ...
    # Intent 1's top tool has a LOWER similarity than intent 0's second tool, yet must come before it.
    s = np.array([[0.90, 0.95, 0.10, 0.20, 0.05],
                  [0.10, 0.00, 0.30, 0.40, 0.35]])
    got = multiview_rank(s, 5)
    assert [c.tool for c in got] == [1, 3, 0, 4, 2]
    assert [c.rank for c in got] == [0, 0, 1, 1, 2]
    assert [c.intent for c in got] == [0, 1, 0, 1, 1]
    # ties on rank -> higher similarity first: both rank-0 candidates, 0.95 before 0.40
    assert got[0].similarity == 0.95 and got[1].similarity == 0.40


def test_dedupe_keeps_the_best_position_and_k_distinct_tools():
    # Both intents rank tool 2 first: it appears once; the next distinct tools follow by (rank, sim).
    s = np.array([[0.2, 0.5, 0.9, 0.1],
                  [0.6, 0.1, 0.8, 0.3]])
    got = multiview_rank(s, 3)
    assert [c.tool for c in got] == [2, 0, 1]  # (0, .9, i0) (0, .8, i1: dup) (1, .6, i1) (1, .5, i0)
    assert got[0].intent == 0 and got[0].similarity == 0.9
    assert len({c.tool for c in got}) == 3
    assert [c.tool for c in multiview_rank(s, 10)] == [2, 0, 1, 3]  # k > n_tools -> all tools once


def test_single_intent_is_the_plain_similarity_ranking_and_scores_decrease():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(1, 12))
    got = multiview_rank(s, 12)
    assert [c.tool for c in got] == list(np.argsort(-s[0]))
    s2 = rng.normal(size=(3, 12)) * 5  # unbounded (BM25-like) similarities
    scores = [ranking_score(c) for c in multiview_rank(s2, 12)]
    assert all(a > b for a, b in zip(scores, scores[1:]))


def test_exact_similarity_ties_are_deterministic():
    s = np.array([[0.5, 0.5, 0.1], [0.5, 0.2, 0.5]])
    assert [c.tool for c in multiview_rank(s, 3)] == [0, 1, 2]  # tool index breaks ties inside an intent


def test_tiebreak_orders_exactly_equal_similarities():
    s = np.array([[0.0, 0.0, 0.0, 0.7]])
    tie = np.array([[3, 1, 2, 0]])  # e.g. the backbone returned tools 3, 1, 2, 0
    assert [c.tool for c in multiview_rank(s, 4, tie)] == [3, 1, 2, 0]


def test_intent_rewriter_fuse_gives_the_multiview_order_per_query():
    from toolret.methods.reinvoke.components import IntentRewriter
    from toolret.roles import Ranking

    tools = ["t0", "t1", "t2", "t3", "t4"]
    # rows in groups order: query A has two intents (rows 0, 1), query B one intent (row 2); every row
    # ranks every tool, best first
    rows = [
        ([1, 0, 3, 2, 4], [0.95, 0.90, 0.20, 0.10, 0.05]),  # A, intent 0: t1 > t0 > t3 > t2 > t4
        ([3, 4, 2, 0, 1], [0.40, 0.35, 0.30, 0.10, 0.00]),  # A, intent 1: t3 > t4 > t2 > t0 > t1
        ([2, 0, 1, 3, 4], [0.80, 0.50, 0.30, 0.20, 0.10]),  # B, its only intent
    ]
    ranking = Ranking(["A:0", "A:1", "B:0"], tools, np.array([r[0] for r in rows]),
                      np.array([r[1] for r in rows], dtype=np.float32))
    groups = [["weather in Paris", "hotel in Paris"], ["a movie"]]
    fused = IntentRewriter().fuse(groups, ranking, 4, ["A", "B"])
    assert fused.query_ids == ["A", "B"] and fused.tool_ids == tools
    # A by (rank within its intent, similarity): rank 0 -> t1 (.95), t3 (.40); rank 1 -> t0 (.90), t4 (.35).
    # t3 (0.40) precedes t0 (0.90): intent 1's top tool beats intent 0's second tool.
    assert fused.ranked_ids(0) == ["t1", "t3", "t0", "t4"]
    # B: one intent = its own similarity order, cut at k
    assert fused.ranked_ids(1) == ["t2", "t0", "t1", "t3"]
    # scores decrease along the order (TREC runs sort by score): rank dominates, then similarity
    np.testing.assert_allclose(fused.scores[0], [0.95 / 1.95, 0.40 / 1.40, -2 + 0.90 / 1.90, -2 + 0.35 / 1.35],
                               rtol=1e-6)
    assert list(fused.as_run()["A"]) == ["t1", "t3", "t0", "t4"]
