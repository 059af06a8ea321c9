"""``benchmarks/adapt_selection_power.py``'s pure functions (issue 79, cold-start power of adapt's choice): the
analytic number of requests against hand-computed values, the empirical power of ``paired_test`` on synthetic
paired differences whose truth is known, and the design effect of requests clustered by tool."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import adapt_selection_power as power  # noqa: E402


def test_analytic_n_matches_the_hand_computed_value() -> None:
    # (z_0.975 + z_0.8)^2 = (1.959964 + 0.841621)^2 = 7.848879
    assert power.analytic_n(0.3, 0.03) == 785  # 7.848879 * 100 = 784.89
    assert power.analytic_n(0.25, 0.05) == 197  # 7.848879 * 25 = 196.22
    assert power.analytic_n(0.4, 0.02) == 3140  # 7.848879 * 400 = 3139.55
    assert power.analytic_n(0.3, 0.03, power=0.9) == 1051  # (1.959964 + 1.281552)^2 * 100 = 1050.74
    with pytest.raises(ValueError):
        power.analytic_n(0.3, 0.0)


def test_detectable_gap_inverts_the_analytic_n() -> None:
    n = power.analytic_n(0.3, 0.03)
    assert 0.0299 < power.detectable_gap(0.3, n) <= 0.03
    assert power.detectable_gap(0.3, n - 20) > 0.03


def _pair(n: int, sd: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    b = rng.uniform(0, 1, n)
    return b + rng.normal(0, sd, n), b


def test_no_gap_is_rejected_at_about_alpha() -> None:
    a, b = _pair(400, 0.3, 1)
    size = power.empirical_power(a, b, 150, 0.0, resamples=200, permutations=500, seed=3)
    assert size <= 0.11  # alpha 0.05; 200 draws: SE 0.015


def test_a_huge_gap_is_always_found() -> None:
    a, b = _pair(400, 0.3, 2)
    assert power.empirical_power(a, b, 60, 0.5, resamples=100, permutations=500, seed=4) == 1.0


def test_at_the_analytic_n_the_power_is_about_80_percent() -> None:
    a, b = _pair(2000, 0.3, 5)
    sigma = float(np.std(a - b, ddof=1))
    n = power.analytic_n(sigma, 0.06)  # ~197
    got = power.empirical_power(a, b, n, 0.06, resamples=200, permutations=500, seed=6)
    assert 0.68 <= got <= 0.92, got
    assert power.empirical_power(a, b, n // 4, 0.06, resamples=200, permutations=500, seed=7) < 0.5


def test_smallest_n_needs_the_power_to_stay_above_the_target() -> None:
    assert power.smallest_n({10: 0.5, 20: 0.85, 30: 0.79, 40: 0.9}) == 40
    assert power.smallest_n({10: 0.81, 20: 0.9}) == 10
    assert power.smallest_n({10: 0.2, 20: 0.7}) is None


def test_design_effect_of_clustered_requests() -> None:
    rng = np.random.default_rng(8)
    independent = rng.normal(0, 1, 800)
    singletons = [str(i) for i in range(800)]
    assert power.cluster_design_effect(independent, singletons) == (pytest.approx(1.0), 1.0)
    by_four = [str(i // 4) for i in range(800)]
    deff, size = power.cluster_design_effect(independent, by_four)
    assert size == 4.0 and 0.7 < deff < 1.3
    assert abs(power.intra_cluster_correlation(independent, by_four)) < 0.1
    constant = np.repeat(rng.normal(0, 1, 200), 4)  # every request of a tool scores alike: ICC 1
    deff, size = power.cluster_design_effect(constant, by_four)
    assert 3.5 < deff < 4.5
    assert power.implied_icc(deff, size) == pytest.approx(1.0, abs=0.17)
    assert power.intra_cluster_correlation(constant, by_four) == pytest.approx(1.0)
    assert power.design_effect(0.1, 5) == pytest.approx(1.4)


def test_plan_goal_n_uses_every_held_out_tool_before_raising_goal_n() -> None:
    assert power.plan_goal_n(100, 0.0, 1.0, 30, 3, 10) == {"goal_n": 4, "requests_needed": 100, "requests": 120,
                                                          "reachable": True}
    # ICC 0.1: goal_n 5 needs 100 * 1.4 = 140 <= 30 * 5 = 150
    assert power.plan_goal_n(100, 0.1, 1.0, 30, 3, 10)["goal_n"] == 5
    short = power.plan_goal_n(1000, 0.0, 1.0, 5, 3, 10)
    assert short == {"goal_n": 10, "requests_needed": 1000, "requests": 50, "reachable": False}
