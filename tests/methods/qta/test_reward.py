"""QTA's eq. 4 reward, gold ranks and the chosen / rejected rule, against hand-computed values."""

from __future__ import annotations

import pytest

from toolret.methods.qta.preferences import choose_pair
from toolret.methods.qta.reward import gold_ranks, query_reward, rank_score

# Hand-computed (n = 10): 1/log2(idx + 1.1) inside the top n, -(idx - n)/log2(idx/n + 1) beyond it.
#   idx 1: 1/log2(2.1) = 1/1.070389 = 0.934240      idx 2: 1/log2(3.1) = 1/1.632268 = 0.612644
#   idx 10: 1/log2(11.1) = 1/3.472488 = 0.287978    idx 11: -1/log2(2.1) = -0.934240
#   idx 12: -2/log2(2.2) = -2/1.137504 = -1.758236  idx 20: -10/log2(3) = -10/1.584963 = -6.309298
#   idx 54: -44/log2(6.4) = -44/2.678072 = -16.429731
HAND = {1: 0.934240, 2: 0.612644, 10: 0.287978, 11: -0.934240, 12: -1.758236, 20: -6.309298, 54: -16.429731}


@pytest.mark.parametrize("idx,expected", sorted(HAND.items()))
def test_rank_score_matches_hand_computed_values(idx, expected):
    assert rank_score(idx, 10) == pytest.approx(expected, abs=1e-6)


def test_reward_is_summed_over_gold_tools_and_n_moves_the_cutoff():
    assert query_reward([1, 12], 10) == pytest.approx(0.934240 - 1.758236, abs=1e-6)  # = -0.823997
    assert query_reward([], 10) == 0.0
    # n = 20: rank 12 is inside the cutoff -> 1/log2(13.1) = 1/3.711495 = 0.269433
    assert rank_score(12, 20) == pytest.approx(0.269433, abs=1e-6)
    # the penalty grows with the rank and the score falls monotonically
    scores = [rank_score(i, 10) for i in range(1, 60)]
    assert all(a > b for a, b in zip(scores, scores[1:]))
    with pytest.raises(ValueError):
        rank_score(0)


def test_gold_ranks_are_one_based_positions_in_the_ranking():
    ranked = [4, 0, 3, 1, 2]  # tool positions, best first
    assert gold_ranks(ranked, [0, 2]) == [2, 5]
    with pytest.raises(ValueError, match="not in the ranking"):
        gold_ranks([4, 0, -1], [3])


def test_chosen_is_the_first_best_and_rejected_the_last_worst():
    assert choose_pair([0.5, 0.9, -2.0]) == (1, 2)  # paper's example: idx1 < idx < idx2
    assert choose_pair([0.9, 0.9, -1.0]) == (0, 2)  # tie for best: the original query (first) is chosen
    assert choose_pair([-1.0, 0.9, -1.0]) == (1, 2)  # tie for worst: the last (a rewrite) is rejected
    assert choose_pair([0.3, 0.3, 0.3]) is None  # no preference: the round is skipped


def test_beat_query_keeps_only_rounds_where_a_rewrite_scores_above_the_query():
    assert choose_pair([0.5, 0.9, -2.0], "beat_query") == (1, 2)  # q1 beats q: the best_worst pair
    assert choose_pair([0.9, 0.5, -2.0], "beat_query") is None  # q is the best: no pair (best_worst: (0, 2))
    assert choose_pair([0.9, 0.9, -2.0], "beat_query") is None  # a tie with q does not beat it
    assert choose_pair([0.5, -2.0, 0.9], "beat_query") == (2, 1)


def test_rewrites_only_pairs_two_rewrites_and_the_query_only_gates_the_round():
    assert choose_pair([0.5, 0.9, -2.0], "rewrites_only") == (1, 2)
    assert choose_pair([-3.0, 0.9, -2.0], "rewrites_only") == (1, 2)  # q the worst: still never rejected
    assert choose_pair([0.5, 0.9, 0.9], "rewrites_only") is None  # both rewrites beat q but tie
    assert choose_pair([0.95, 0.9, -2.0], "rewrites_only") is None  # no rewrite beats q
    with pytest.raises(ValueError, match="pair_rule"):
        choose_pair([0.1, 0.2, 0.3], "both")


def test_the_stored_pairs_are_the_default_rule_recomputed_from_the_stored_rewards():
    """The committed fold-0 preference data (both LLMs): ``round_pair`` under best_worst reproduces every stored
    chosen / rejected, so training may pick pairs again under another rule from the same rewards."""
    from pathlib import Path

    from toolret.jsonl_artifacts import read_jsonl
    from toolret.methods.qta.preferences import dpo_pairs, round_pair, summarize

    root = Path(__file__).resolve().parents[3] / "data" / "qta" / "mtrb-restbench-fold0of9"
    files = sorted(root.rglob("preferences.jsonl"))
    assert len(files) == 2
    for f in files:
        records = read_jsonl(f)
        for r in records:
            pair = round_pair(r)
            assert (r["chosen"], r["rejected"]) == (pair if pair else (None, None)), (f, r["query_id"], r["round"])
        stats = {rule: summarize(records, rule) for rule in ("best_worst", "beat_query", "rewrites_only")}
        assert stats["best_worst"]["pairs"] == sum(r["chosen"] is not None for r in records)
        # the gated rules never choose the query, and rewrites_only never rejects it either
        assert "query" not in stats["beat_query"]["chosen"] and "query" not in stats["rewrites_only"]["chosen"]
        assert "query" not in stats["rewrites_only"]["rejected"]
        assert stats["beat_query"]["pairs"] <= stats["best_worst"]["pairs"]
        assert len(dpo_pairs(records, 10, "rewrites_only")) == stats["rewrites_only"]["pairs"]
