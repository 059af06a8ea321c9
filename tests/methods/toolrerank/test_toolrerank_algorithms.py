"""ToolRerank's list operations on hand-built candidate lists (expected values worked out by hand from
the paper's Sec. 3.2, Alg. 1 and Alg. 2)."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.methods.toolrerank.algorithms import (
    adaptive_truncation,
    connected_components,
    extended_f1,
    multi_tool_rerank,
    multi_tool_selection,
    rerank_order,
    single_tool_rerank,
    single_tool_set,
)


def test_adaptive_truncation_keeps_seen_up_to_m_s_and_unseen_up_to_m_u():
    # positions 1..8 (1-based); seen at 1, 2, 4, 7; unseen at 3, 5, 6, 8; m_s = 3, m_u = 6
    seen = [True, True, False, True, False, False, True, False]
    # seen kept if i <= 3: positions 1, 2 (4 and 7 dropped); unseen kept if i <= 6: 3, 5, 6 (8 dropped)
    assert adaptive_truncation(seen, m_s=3, m_u=6) == [0, 1, 2, 4, 5]


def test_adaptive_truncation_with_m_s_above_m_u_and_equal():
    seen = [False, True, False, True]
    assert adaptive_truncation(seen, m_s=4, m_u=1) == [0, 1, 3]  # unseen only at i = 1
    assert adaptive_truncation(seen, m_s=2, m_u=2) == [0, 1]  # plain top-2 when m_s == m_u


def test_rerank_order_is_stable_on_ties():
    assert rerank_order([0.2, 0.9, 0.2, 0.5]) == [1, 3, 0, 2]


def test_single_tool_set_takes_r1_and_confident_results():
    tools = ["A", "B", "A", "C", "D"]
    scores = [0.4, 0.95, 0.9, 0.86, 0.85]  # R is sorted by score; r_1 below tau_s still counts
    # tau_s = 0.85: B (0.95), A (0.9), C (0.86) are > 0.85; D (0.85) is not (strict)
    assert single_tool_set(tools, scores, 0.85) == {"A", "B", "C"}
    assert single_tool_set(tools, scores, 0.99) == {"A"}  # only tool(r_1)
    assert single_tool_set([], [], 0.5) == set()


def test_alg1_puts_results_of_tools_in_x_first_in_r_order():
    # R: r1 IMDB (0.97), r2 Movies (0.80), r3 IMDB (0.70), r4 Netflix (0.88*), r5 IMDB (0.30)
    # (* the scores need not be sorted for the algorithm; X uses score > tau_s)
    tools = ["IMDB", "Movies", "IMDB", "Netflix", "IMDB"]
    scores = [0.97, 0.80, 0.70, 0.88, 0.30]
    f1, f2, x = single_tool_rerank(tools, scores, tau_s=0.85)
    assert x == {"IMDB", "Netflix"}
    assert f1 == [0, 2, 3, 4]  # IMDB, IMDB, Netflix, IMDB in R's order
    assert f2 == [1]


def test_extended_list_adds_the_tools_other_apis_and_reranks_f1():
    f1 = ["imdb/by_director", "imdb/by_cast"]
    extra = ["imdb/by_name", "imdb/by_cast", "imdb/by_year"]  # by_cast already in F1: not duplicated
    score = {"imdb/by_director": 0.9, "imdb/by_cast": 0.6, "imdb/by_name": 0.7, "imdb/by_year": 0.6}
    # sorted by score; by_cast and by_year tie at 0.6: F1's item first
    assert extended_f1(f1, extra, score) == ["imdb/by_director", "imdb/by_name", "imdb/by_cast", "imdb/by_year"]


def test_connected_components_union_find():
    assert connected_components(5, [(0, 2), (3, 4), (2, 0)]) == [0, 1, 0, 3, 3]
    assert connected_components(3, []) == [0, 1, 2]


def test_alg2_keeps_at_most_n_per_component():
    # the paper's Figure 4 pattern: one SEO API, then six QR-code APIs of different tools that are similar
    # to each other (sim 0.8 > tau_m 0.7), then the second SEO API (same tool as r1 -> same component)
    tools = ["SEO", "QR1", "QR2", "QR3", "QR4", "QR5", "QR6", "SEO"]
    scores = [0.99, 0.98, 0.97, 0.96, 0.95, 0.94, 0.93, 0.92]
    sim = np.full((8, 8), 0.1)
    sim[1:7, 1:7] = 0.8
    np.fill_diagonal(sim, 1.0)
    # components: {0, 7} (same tool) and {1..6} (similar); n = 3: {0, 7} and {1, 2, 3}
    assert multi_tool_selection(tools, scores, sim, tau_m=0.7, n=3) == {0, 7, 1, 2, 3}
    f1, f2 = multi_tool_rerank(tools, scores, sim, tau_m=0.7, n=3)
    assert f1 == [0, 1, 2, 3, 7]  # Analyze V2 (position 8) moves up to 5th
    assert f2 == [4, 5, 6]


def test_alg2_threshold_is_strict_and_n_picks_best_scores_not_positions():
    tools = ["a", "b", "c"]
    scores = [0.5, 0.9, 0.7]  # deliberately not sorted: the best-scored members of a component are kept
    sim = np.array([[1.0, 0.7, 0.75], [0.7, 1.0, 0.1], [0.75, 0.1, 1.0]])
    # tau_m = 0.7: edge a-c only (0.75 > 0.7; a-b is 0.7, not >); components {a, c}, {b}; n = 1 keeps c and b
    assert multi_tool_selection(tools, scores, sim, tau_m=0.7, n=1) == {1, 2}
    # tau_m = 0.6: a-b and a-c join everything; n = 2 keeps the two best scores: b (0.9), c (0.7)
    assert multi_tool_selection(tools, scores, sim, tau_m=0.6, n=2) == {1, 2}
    assert multi_tool_rerank(tools, scores, sim, 0.6, 2) == ([1, 2], [0])


@pytest.mark.parametrize("n", [1, 2, 10])
def test_alg2_with_all_tools_distinct_and_dissimilar_keeps_everything(n):
    sim = np.eye(4)
    assert multi_tool_selection(["a", "b", "c", "d"], [0.4, 0.3, 0.2, 0.1], sim, 0.7, n) == {0, 1, 2, 3}
