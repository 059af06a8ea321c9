"""``toolrerank.grid.ce_weight``: the fusion weight of the reranked order with the first stage's, chosen on dev."""

from __future__ import annotations

import pytest

from toolret.methods.toolrerank.rerank import select_ce_weight


def test_a_useless_reranker_selects_the_first_stage_and_a_perfect_one_itself():
    gold = [{0}, {1}, {2}]
    first = [[0, 5, 6], [1, 5, 6], [2, 5, 6]]       # gold first
    wrong = [[5, 6, 0], [5, 6, 1], [5, 6, 2]]       # gold last
    pick = select_ce_weight(wrong, first, gold, [1.0, 0.5, 0.0], "recall@1")
    assert pick["selected"] == 0.0 and pick["dev_recall@1"] == 1.0
    # at 0.5 (RRF, k 60) tool 5 scores 1/61 + 1/62 > gold's 1/63 + 1/61: still wrong; only 0.0 recovers gold
    assert [row["recall@1"] for row in pick["by_weight"]] == [0.0, 0.0, 1.0]
    pick = select_ce_weight(first, wrong, gold, [1.0, 0.5, 0.0], "recall@1")
    assert pick["selected"] == 1.0 and pick["by_weight"][-1]["recall@1"] == 0.0


def test_ties_go_to_the_larger_weight():
    gold = [{0}]
    same = [[0, 1, 2]]
    assert select_ce_weight(same, same, gold, [0.3, 1.0, 0.6], "recall@1")["selected"] == 1.0


def test_the_weight_grid_is_validated():
    from toolret.methods.toolrerank.config import GridConfig

    with pytest.raises(ValueError, match="ce_weight"):
        GridConfig(ce_weight=[1.2])
    with pytest.raises(ValueError, match="ce_weight"):
        GridConfig(ce_weight=[])
