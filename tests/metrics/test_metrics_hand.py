"""Hand-computed cases for Recall@k, NDCG@k, COMP@k, MRR and Precision@k."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from toolret.metrics import (
    aggregate,
    build_hit_table,
    comp_at_k,
    ndcg_at_k,
    per_query_metrics,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
)

LOG2_3 = math.log2(3)  # 1.5849625...


def _one(ranking: list[str], gold: set[str], ks: list[int], **kw) -> dict[str, float]:
    qids, pq = per_query_metrics({"q": ranking}, {"q": gold}, ks, **kw)
    assert qids == ["q"]
    return {m: float(v[0]) for m, v in pq.items()}


def test_gold_abc_ranking_axbyc() -> None:
    # gold {a,b,c}; ranking a x b y c -> hits at ranks 1, 3, 5
    m = _one(["a", "x", "b", "y", "c"], {"a", "b", "c"}, [1, 3, 5], precision=True)
    # recall: 1/3, 2/3, 3/3
    assert m["recall@1"] == pytest.approx(1 / 3)
    assert m["recall@3"] == pytest.approx(2 / 3)
    assert m["recall@5"] == pytest.approx(1.0)
    # ndcg@1: DCG = 1/log2(2) = 1, IDCG = 1 -> 1
    assert m["ndcg@1"] == pytest.approx(1.0)
    # ndcg@3: DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3) + 1/2 = 2.1309298 -> 0.7039180
    assert m["ndcg@3"] == pytest.approx(1.5 / (1 + 1 / LOG2_3 + 0.5))
    assert m["ndcg@3"] == pytest.approx(0.7039180, abs=1e-6)
    # ndcg@5: DCG = 1 + 1/2 + 1/log2(6) = 1.8868528; IDCG same 3 items = 2.1309298 -> 0.8854598
    assert m["ndcg@5"] == pytest.approx((1.5 + 1 / math.log2(6)) / (1.5 + 1 / LOG2_3))
    assert m["ndcg@5"] == pytest.approx(0.8854598, abs=1e-6)
    # comp: needs all of a, b, c -> only at k=5
    assert (m["comp@1"], m["comp@3"], m["comp@5"]) == (0.0, 0.0, 1.0)
    # first hit at rank 1
    assert m["mrr"] == 1.0
    # precision: 1/1, 2/3, 3/5
    assert m["precision@1"] == pytest.approx(1.0)
    assert m["precision@3"] == pytest.approx(2 / 3)
    assert m["precision@5"] == pytest.approx(3 / 5)


def test_gold_larger_than_k() -> None:
    # gold {a,b,c}, k=2, ranking a b c: top-2 = {a,b}
    m = _one(["a", "b", "c"], {"a", "b", "c"}, [2])
    # recall divides by |gold|=3, not min(k,|gold|)=2 -> 2/3
    assert m["recall@2"] == pytest.approx(2 / 3)
    # ideal DCG over min(3,2)=2 items: IDCG = 1 + 1/log2(3) = DCG -> 1
    assert m["ndcg@2"] == pytest.approx(1.0)
    # c is not in the top 2 -> 0
    assert m["comp@2"] == 0.0


def test_late_first_hit_and_mrr_at_k() -> None:
    # gold {b}; ranking x y b: first hit at rank 3
    m = _one(["x", "y", "b"], {"b"}, [1, 2, 3], mrr_at_k=True)
    assert m["mrr"] == pytest.approx(1 / 3)
    assert m["mrr@2"] == 0.0  # rank 3 > 2
    assert m["mrr@3"] == pytest.approx(1 / 3)
    assert (m["recall@1"], m["recall@2"], m["recall@3"]) == (0.0, 0.0, 1.0)
    # ndcg@3: DCG = 1/log2(4) = 0.5, IDCG = 1 -> 0.5
    assert m["ndcg@3"] == pytest.approx(0.5)
    assert m["comp@3"] == 1.0


def test_mrr_counts_beyond_largest_k() -> None:
    # first hit at rank 7, cutoffs only go to 3: MRR has no cutoff -> 1/7
    m = _one(["x1", "x2", "x3", "x4", "x5", "x6", "g"], {"g"}, [3])
    assert m["mrr"] == pytest.approx(1 / 7)
    assert m["recall@3"] == 0.0


def test_duplicates_count_once() -> None:
    # gold {a,b}; ranking a a b: the 2nd 'a' keeps rank 2 but is not a hit
    m = _one(["a", "a", "b"], {"a", "b"}, [2, 3], precision=True)
    assert m["recall@2"] == pytest.approx(1 / 2)
    assert m["precision@2"] == pytest.approx(1 / 2)
    assert m["recall@3"] == pytest.approx(1.0)
    # ndcg@3: DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3) = 1.6309298 -> 0.9197208
    assert m["ndcg@3"] == pytest.approx(1.5 / (1 + 1 / LOG2_3))
    assert m["comp@2"] == 0.0 and m["comp@3"] == 1.0
    # recall never exceeds 1 even with a gold tool repeated
    m2 = _one(["a", "a", "a"], {"a", "b"}, [3])
    assert m2["recall@3"] == pytest.approx(1 / 2)
    assert m2["comp@3"] == 0.0


def test_short_ranking_padded() -> None:
    # ranking shorter than k: gold {a}, ranking [a], k=10
    m = _one(["a"], {"a"}, [10], precision=True)
    assert m["recall@10"] == 1.0
    assert m["ndcg@10"] == pytest.approx(1.0)
    assert m["precision@10"] == pytest.approx(0.1)  # 1 hit / k=10


def test_no_hits_and_missing_query_are_zero() -> None:
    qids, pq = per_query_metrics(
        {"q1": ["x", "y"], "extra": ["a"]},  # 'extra' is not in gold: ignored
        {"q1": {"a"}, "q2": {"a", "b"}},  # q2 has no ranking at all
        [1, 2],
    )
    assert qids == ["q1", "q2"]
    for name, values in pq.items():
        assert values.shape == (2,), name
        assert_allclose(values, 0.0, err_msg=name)


def test_order_follows_gold_and_empty_gold_skipped() -> None:
    gold = {"z": {"a"}, "empty": set(), "b": {"b"}}
    ranked = {"b": ["b"], "z": ["x", "a"], "empty": ["a"]}
    qids, pq = per_query_metrics(ranked, gold, [1])
    assert qids == ["z", "b"]
    assert_allclose(pq["recall@1"], [0.0, 1.0])
    assert_allclose(pq["mrr"], [0.5, 1.0])
    assert set(pq) == {"recall@1", "ndcg@1", "comp@1", "mrr"}


def test_empty_gold_raise_mode() -> None:
    with pytest.raises(ValueError, match="empty gold"):
        per_query_metrics({"q": ["a"]}, {"q": set()}, [1], empty_gold="raise")


@pytest.mark.parametrize("bad", [[0], [-1], [1.5], [True]])
def test_bad_cutoffs_rejected(bad: list) -> None:
    with pytest.raises(ValueError):
        per_query_metrics({"q": ["a"]}, {"q": {"a"}}, bad)


def test_duplicate_ks_collapse() -> None:
    _, pq = per_query_metrics({"q": ["a"]}, {"q": {"a"}}, [5, 1, 5])
    assert list(pq) == ["recall@5", "ndcg@5", "comp@5", "recall@1", "ndcg@1", "comp@1", "mrr"]


def test_array_functions_direct() -> None:
    # two queries; hits rows: [1,0,1], [0,1,0]; gold sizes 3 and 1
    hits = np.array([[True, False, True], [False, True, False]])
    n_gold = np.array([3, 1])
    assert_allclose(recall_at_k(hits, n_gold, 3), [2 / 3, 1.0])
    assert_allclose(precision_at_k(hits, 2), [0.5, 0.5])
    assert_allclose(comp_at_k(hits, n_gold, 2), [0.0, 1.0])
    # ndcg@3 row 0: (1 + 1/2) / (1 + 1/log2 3 + 1/2); row 1: (1/log2 3) / 1
    assert_allclose(
        ndcg_at_k(hits, n_gold, 3), [1.5 / (1.5 + 1 / LOG2_3), 1 / LOG2_3]
    )
    assert_allclose(reciprocal_rank(np.array([0, 2, 4]), k=3), [0.0, 0.5, 0.0])
    with pytest.raises(ValueError):
        recall_at_k(hits, n_gold, 4)  # deeper than the table


def test_hit_table_first_hit_and_depth() -> None:
    table = build_hit_table({"q": ["x", "a", "b"]}, {"q": ["b", "a"]}, depth=1)
    assert table.depth == 1
    assert table.hits.tolist() == [[False]]
    assert table.first_hit.tolist() == [2]
    assert table.n_gold.tolist() == [2]


def test_aggregate_means() -> None:
    out = aggregate({"recall@1": np.array([0.0, 1.0, 0.5]), "mrr": np.array([1.0])})
    assert out == {"recall@1": pytest.approx(0.5), "mrr": 1.0}
    assert all(type(v) is float for v in out.values())
    with pytest.raises(ValueError, match="no queries"):
        aggregate({"mrr": np.array([])})
