"""COMP@k (Sufficiency@k): brute-force set inclusion, hand cases and invariants."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from toolret.metrics import per_query_metrics

KS = [1, 2, 3, 5, 10, 20]


def _random(seed: int, n_queries: int = 200, n_tools: int = 50):
    rng = np.random.default_rng(seed)
    tools = [f"t{i}" for i in range(n_tools)]
    gold, ranked = {}, {}
    for q in range(n_queries):
        g = rng.choice(n_tools, size=int(rng.integers(1, 5)), replace=False)
        length = int(rng.integers(0, 25))
        # bias towards gold so that complete top-k sets actually occur
        pool = np.concatenate([g, rng.permutation(n_tools)])
        order = list(dict.fromkeys(rng.permutation(pool[: len(g) + 6]).tolist() + pool.tolist()))
        gold[f"q{q}"] = {tools[i] for i in g}
        ranked[f"q{q}"] = [tools[i] for i in order[:length]]
    return ranked, gold


@pytest.mark.parametrize("seed", [0, 1])
def test_comp_matches_brute_force(seed: int) -> None:
    ranked, gold = _random(seed)
    qids, pq = per_query_metrics(ranked, gold, KS)
    for k in KS:
        expected = np.array([float(gold[q] <= set(ranked[q][:k])) for q in qids])
        assert_array_equal(pq[f"comp@{k}"], expected)
        # the random data must contain both outcomes for k >= 5
        if k >= 5:
            assert 0 < expected.sum() < len(expected)


@pytest.mark.parametrize("seed", [0, 1])
def test_comp_le_recall_and_iff_full_recall(seed: int) -> None:
    ranked, gold = _random(seed)
    _, pq = per_query_metrics(ranked, gold, KS)
    for k in KS:
        comp, rec = pq[f"comp@{k}"], pq[f"recall@{k}"]
        assert np.all(comp <= rec + 1e-12)
        assert_array_equal(comp == 1.0, np.isclose(rec, 1.0))
        assert set(np.unique(comp)) <= {0.0, 1.0}


def test_comp_hand_cases() -> None:
    gold = {
        "all_in": {"a", "b"},  # ranking b a x: {a,b} ⊆ top-2 -> comp@2 = 1, comp@1 = 0
        "one_out": {"a", "c"},  # ranking a x y c: c at rank 4 -> comp@3 = 0, comp@5 = 1
        "too_big": {"a", "b", "c"},  # |gold| = 3 > k = 2 -> comp@2 = 0 whatever the ranking
        "dup": {"a", "b"},  # ranking a a x: b never appears -> 0 even though 'a' counted twice
    }
    ranked = {
        "all_in": ["b", "a", "x"],
        "one_out": ["a", "x", "y", "c"],
        "too_big": ["a", "b", "c"],
        "dup": ["a", "a", "x"],
    }
    qids, pq = per_query_metrics(ranked, gold, [1, 2, 3, 5])
    assert qids == list(gold)
    assert_array_equal(pq["comp@1"], [0, 0, 0, 0])
    assert_array_equal(pq["comp@2"], [1, 0, 0, 0])
    assert_array_equal(pq["comp@3"], [1, 0, 1, 0])
    assert_array_equal(pq["comp@5"], [1, 1, 1, 0])
