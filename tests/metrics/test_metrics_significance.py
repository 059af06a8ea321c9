"""Paired two-sided significance tests."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from toolret.metrics import paired_test

METHODS = ["randomization", "bootstrap", "wilcoxon", "ttest"]


@pytest.mark.parametrize("method", METHODS)
def test_identical_arrays_p_is_one(method: str) -> None:
    a = np.random.default_rng(0).random(100)
    out = paired_test(a, a.copy(), method=method)
    assert out == {"method": method, "p_value": 1.0, "mean_diff": 0.0, "n": 100}


@pytest.mark.parametrize("method", METHODS)
def test_clearly_better_system(method: str) -> None:
    rng = np.random.default_rng(1)
    b = rng.random(100)
    a = b + 0.3 + rng.normal(0.0, 0.2, size=100)
    out = paired_test(a, b, method=method)
    assert out["p_value"] < 0.01
    assert out["mean_diff"] == pytest.approx(float(np.mean(a - b)))
    assert out["n"] == 100
    # symmetric: swapping the systems flips the sign, not the p-value
    swapped = paired_test(b, a, method=method)
    assert swapped["mean_diff"] == pytest.approx(-out["mean_diff"])
    assert swapped["p_value"] == pytest.approx(out["p_value"])


@pytest.mark.parametrize("method", METHODS)
def test_no_real_difference_not_significant(method: str) -> None:
    rng = np.random.default_rng(2)
    b = rng.random(200)
    a = b + rng.normal(0.0, 0.2, size=200)  # zero-mean noise only
    assert paired_test(a, b, method=method)["p_value"] > 0.05


def _paired_mean_diff(x, y, axis=-1):
    return np.mean(x - y, axis=axis)


def test_randomization_matches_scipy_exact() -> None:
    # n = 10 -> 2**10 = 1024 sign flips, enumerated exactly by both implementations
    rng = np.random.default_rng(3)
    b = rng.random(10)
    a = b + rng.normal(0.15, 0.2, size=10)
    ours = paired_test(a, b, method="randomization", n_samples=10000)["p_value"]
    ref = stats.permutation_test(
        (a, b), _paired_mean_diff, permutation_type="samples", n_resamples=10000,
        alternative="two-sided",
    ).pvalue
    assert 0.001 < ref < 0.5  # a non-trivial case
    assert ours == pytest.approx(ref, abs=1e-9)


def test_randomization_monte_carlo_close_to_scipy() -> None:
    # n = 40 -> too many flips to enumerate; both sample 20000 of them
    rng = np.random.default_rng(4)
    b = rng.random(40)
    a = b + rng.normal(0.05, 0.25, size=40)
    ours = paired_test(a, b, method="randomization", n_samples=20000)["p_value"]
    ref = stats.permutation_test(
        (a, b), _paired_mean_diff, permutation_type="samples", n_resamples=20000,
        alternative="two-sided", rng=np.random.default_rng(0),
    ).pvalue
    assert 0.01 < ref < 0.8
    assert ours == pytest.approx(ref, abs=0.02)


def test_scipy_based_methods_match_scipy() -> None:
    rng = np.random.default_rng(5)
    b = rng.random(60)
    a = b + rng.normal(0.05, 0.3, size=60)
    assert paired_test(a, b, "ttest")["p_value"] == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert paired_test(a, b, "wilcoxon")["p_value"] == pytest.approx(stats.wilcoxon(a - b).pvalue)


def test_bootstrap_close_to_randomization() -> None:
    rng = np.random.default_rng(6)
    b = rng.random(150)
    a = b + rng.normal(0.04, 0.25, size=150)
    p_boot = paired_test(a, b, "bootstrap", n_samples=5000)["p_value"]
    p_rand = paired_test(a, b, "randomization", n_samples=5000)["p_value"]
    assert 0.01 < p_rand < 0.9
    assert p_boot == pytest.approx(p_rand, abs=0.05)


@pytest.mark.parametrize("method", ["randomization", "bootstrap"])
def test_resampling_deterministic(method: str) -> None:
    rng = np.random.default_rng(7)
    a, b = rng.random(80), rng.random(80)
    assert paired_test(a, b, method, seed=3) == paired_test(a, b, method, seed=3)


def test_constant_nonzero_difference() -> None:
    b = np.linspace(0, 0.5, 30)
    a = b + 0.2
    assert paired_test(a, b, "ttest")["p_value"] == 0.0
    assert paired_test(a, b, "randomization", n_samples=999)["p_value"] == pytest.approx(1 / 1000)
    assert paired_test(a, b, "wilcoxon")["p_value"] < 1e-5


def test_metric_like_binary_scores() -> None:
    # COMP-style 0/1 scores with many ties and zero differences
    rng = np.random.default_rng(8)
    b = rng.binomial(1, 0.4, size=300).astype(float)
    a = np.where(rng.random(300) < 0.2, 1.0, b)  # A fixes ~20% of queries
    for method in METHODS:
        assert paired_test(a, b, method)["p_value"] < 1e-3, method


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((np.ones(3), np.ones(4)), {}),
        ((np.ones(0), np.ones(0)), {}),
        ((np.ones(3), np.ones(3)), {"method": "fisher"}),
        ((np.ones(3), np.array([1.0, np.inf, 0.0])), {}),
        ((np.ones(3), np.ones(3)), {"n_samples": 0}),
    ],
)
def test_invalid_inputs(args, kwargs) -> None:
    with pytest.raises(ValueError):
        paired_test(*args, **kwargs)
