"""Weighted RRF and min-max score fusion against ranx.fuse (the reference implementation)."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.roles import Ranking
from toolret.retrieval.fusion import weighted_minmax, weighted_rrf

TOOLS = [f"t{i}" for i in range(12)]
QIDS = ["q0", "q1", "q2"]


def _random_ranking(seed: int, depth: int, short_row: bool) -> Ranking:
    rng = np.random.default_rng(seed)
    indices = np.stack([rng.permutation(len(TOOLS))[:depth] for _ in QIDS]).astype(np.int64)
    scores = -np.sort(-rng.uniform(0.1, 9.0, size=(len(QIDS), depth))).astype(np.float32)
    if short_row:  # a side that found fewer results for one query (bm25's -1 padding)
        indices[1, depth // 2:] = -1
        scores[1, depth // 2:] = -np.inf
    return Ranking(list(QIDS), list(TOOLS), indices, scores)


def _ranx_run(r: Ranking):
    from ranx import Run

    return Run(r.as_run())


def _as_dict(r: Ranking) -> dict[str, dict[str, float]]:
    return {q: dict(zip(r.ranked_ids(i), r.scores[i][r.indices[i] >= 0].astype(float))) for i, q in enumerate(QIDS)}


@pytest.fixture
def rankings():
    return [_random_ranking(1, 7, short_row=True), _random_ranking(2, 8, short_row=False)]


@pytest.mark.integration  # ranx compiles its metrics with numba (tens of seconds in a fresh venv)
@pytest.mark.xdist_group("ranx")  # on one worker: ranx's numba metrics compiled (and cached) once, not per worker
def test_equal_weight_rrf_is_ranx_rrf_scaled(rankings):
    from ranx import fuse

    ours = _as_dict(weighted_rrf(rankings, [0.5, 0.5], k=len(TOOLS), rrf_k=60))
    ref = fuse([_ranx_run(r) for r in rankings], norm=None, method="rrf", params={"k": 60}).to_dict()
    for q in QIDS:
        assert set(ours[q]) == set(ref[q])
        for tool, score in ref[q].items():
            assert ours[q][tool] == pytest.approx(0.5 * score, rel=1e-6)


@pytest.mark.integration  # ranx compiles its metrics with numba (tens of seconds in a fresh venv)
def test_weighted_minmax_is_ranx_wsum_of_minmax(rankings):
    from ranx import fuse

    weights = [0.3, 0.7]
    ours = _as_dict(weighted_minmax(rankings, weights, k=len(TOOLS)))
    ref = fuse([_ranx_run(r) for r in rankings], norm="min-max", method="wsum", params={"weights": weights}).to_dict()
    for q in QIDS:
        assert set(ours[q]) == set(ref[q])
        for tool, score in ref[q].items():
            assert ours[q][tool] == pytest.approx(score, rel=1e-5, abs=1e-6)


def test_weight_one_keeps_one_ranking_order_and_k_cuts(rankings):
    fused = weighted_rrf(rankings, [0.0, 1.0], k=4)
    assert fused.indices.shape == (3, 4)
    np.testing.assert_array_equal(fused.indices, rankings[1].indices[:, :4])


def test_rankings_over_different_corpora_are_refused(rankings):
    other = Ranking(list(QIDS), TOOLS[::-1], rankings[1].indices, rankings[1].scores)
    with pytest.raises(ValueError, match="corpus"):
        weighted_rrf([rankings[0], other], [0.5, 0.5], k=3)
    with pytest.raises(ValueError, match="one weight per ranking"):
        weighted_minmax(rankings, [1.0], k=3)


def test_a_ranking_of_weight_zero_adds_no_candidates(rankings):
    fused = weighted_minmax(rankings, [1.0, 0.0], k=len(TOOLS))
    for i in range(len(QIDS)):
        assert fused.ranked_ids(i) == rankings[0].ranked_ids(i)
