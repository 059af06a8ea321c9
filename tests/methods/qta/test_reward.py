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
