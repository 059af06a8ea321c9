"""Percentile bootstrap CIs of the mean."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.metrics import bootstrap_ci, bootstrap_cis


def _data(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).binomial(1, 0.4, size=n).astype(float)


def test_ci_contains_mean_and_is_ordered() -> None:
    v = _data(300)
    lo, hi = bootstrap_ci(v)
    assert lo < v.mean() < hi
    assert 0.0 <= lo < hi <= 1.0


def test_ci_close_to_normal_approximation() -> None:
    # mean of Bernoulli(0.4), n=1877 (ToolLens test size): half-width ~ 1.96*sqrt(p(1-p)/n)
    v = _data(1877, seed=3)
    lo, hi = bootstrap_ci(v, n_samples=1000)
    half = 1.96 * v.std(ddof=0) / np.sqrt(v.size)
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.12)
    assert (lo + hi) / 2 == pytest.approx(v.mean(), abs=0.2 * half)


def test_ci_narrows_with_more_data() -> None:
    small = bootstrap_ci(_data(50))
    large = bootstrap_ci(_data(2000))
    assert (large[1] - large[0]) < 0.5 * (small[1] - small[0])


def test_ci_narrows_with_larger_alpha() -> None:
    v = _data(200)
    w95 = np.subtract(*bootstrap_ci(v, alpha=0.05)[::-1])
    w50 = np.subtract(*bootstrap_ci(v, alpha=0.5)[::-1])
    assert w50 < w95


def test_deterministic_with_seed() -> None:
    v = _data(100)
    assert bootstrap_ci(v, seed=7) == bootstrap_ci(v, seed=7)
    assert bootstrap_ci(v, seed=7) != bootstrap_ci(v, seed=8)


@pytest.mark.parametrize("c", [0.0, 1.0, 0.1, 1 / 3])
def test_constant_array_gives_degenerate_interval(c: float) -> None:
    assert bootstrap_ci(np.full(1877, c)) == (c, c)


def test_cis_match_single_ci_and_share_indices() -> None:
    rng = np.random.default_rng(1)
    a = rng.random(150)
    pq = {"a": a, "b": rng.random(150), "a_again": a.copy(), "const": np.ones(150)}
    cis = bootstrap_cis(pq, n_samples=500, seed=4)
    assert set(cis) == set(pq)
    for name in ("a", "b"):
        assert cis[name] == pytest.approx(bootstrap_ci(pq[name], n_samples=500, seed=4), abs=1e-12)
    # same resample indices for every metric -> identical columns give identical CIs
    assert cis["a"] == cis["a_again"]
    assert cis["const"] == (1.0, 1.0)


def test_cis_joint_resampling_is_paired() -> None:
    # b = 1 - a: with shared indices every replicate mean of b is 1 - mean of a,
    # so the CI of b is the mirror image of the CI of a
    a = _data(200, seed=5)
    cis = bootstrap_cis({"a": a, "b": 1.0 - a}, n_samples=999)
    assert cis["b"][0] == pytest.approx(1.0 - cis["a"][1], abs=1e-12)
    assert cis["b"][1] == pytest.approx(1.0 - cis["a"][0], abs=1e-12)


def test_many_resamples_chunks_consistent() -> None:
    # more replicates than one internal block; result must still be a sane CI
    v = _data(400, seed=9)
    lo, hi = bootstrap_ci(v, n_samples=2000)
    assert lo < v.mean() < hi


@pytest.mark.parametrize(
    "kwargs",
    [
        {"values": np.array([])},
        {"values": np.ones((3, 2))},
        {"values": np.array([0.1, np.nan])},
        {"values": np.ones(3), "n_samples": 0},
        {"values": np.ones(3), "alpha": 1.0},
    ],
)
def test_invalid_inputs(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        bootstrap_ci(**kwargs)


def test_cis_length_mismatch() -> None:
    with pytest.raises(ValueError, match="same length"):
        bootstrap_cis({"a": np.ones(3), "b": np.ones(4)})
