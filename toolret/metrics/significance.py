"""Two-sided paired significance tests between two systems' per-query scores."""

from __future__ import annotations

import numpy as np

from toolret.metrics.bootstrap import bootstrap_means

METHODS = ("randomization", "bootstrap", "wilcoxon", "ttest")
_CHUNK = 512  # sign-flip permutations per block


def _flip_means(diffs: np.ndarray, n_samples: int, seed: int) -> tuple[np.ndarray, bool]:
    """Means of sign-flipped differences: all ``2**n`` flips when that fits, else random ones.

    Returns:
        ``(means, exact)`` where ``exact`` says whether every flip was enumerated (the
        identity included).
    """
    n = diffs.size
    if n < 63 and 2**n <= n_samples:
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(n, dtype=np.int64)) & 1)
        return signs @ diffs / n, True
    rng = np.random.default_rng(seed)
    out = np.empty(n_samples, dtype=np.float64)
    for start in range(0, n_samples, _CHUNK):
        stop = min(start + _CHUNK, n_samples)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(stop - start, n))
        out[start:stop] = signs @ diffs / n
    return out, False


def _at_least_as_extreme(null: np.ndarray, observed: float) -> int:
    """How many null statistics have ``|t| >= |observed|``, forgiving float rounding."""
    thr = abs(observed)
    tol = 1e-9 * max(thr, 1e-12)
    return int(np.count_nonzero(np.abs(null) >= thr - tol))


def paired_test(
    a: np.ndarray,
    b: np.ndarray,
    method: str = "randomization",
    n_samples: int = 10000,
    seed: int = 0,
) -> dict:
    """Two-sided paired test of ``mean(a - b) == 0`` over the same queries.

    Methods:
        * ``"randomization"``: paired sign-flip permutation test on the mean difference
          (Fisher's randomization test, as ranx's ``"fisher"``). When ``2**n <= n_samples``
          every flip is enumerated and ``p = #{|t*| >= |t|} / 2**n`` (exact); otherwise
          ``n_samples`` random flips give ``p = (#{|t*| >= |t|} + 1) / (n_samples + 1)``.
        * ``"bootstrap"``: the differences are shifted to mean 0 (the null) and resampled
          with replacement ``n_samples`` times; ``p = (#{|t*| >= |t|} + 1) / (n_samples + 1)``.
        * ``"wilcoxon"``: :func:`scipy.stats.wilcoxon` on the differences (zero
          differences dropped, scipy's default).
        * ``"ttest"``: :func:`scipy.stats.ttest_rel`.

    All methods return ``p = 1.0`` when every difference is 0. When the differences are a
    non-zero constant (up to 1e-12 float noise), ``"ttest"`` returns ``p = 0.0`` (its
    statistic is infinite) instead of scipy's NaN.

    Args:
        a: ``[n]`` per-query scores of system A.
        b: ``[n]`` per-query scores of system B, same queries in the same order.
        method: one of ``"randomization"``, ``"bootstrap"``, ``"wilcoxon"``, ``"ttest"``.
        n_samples: permutations / bootstrap replicates (resampling methods only).
        seed: seed of the resampling generator.

    Returns:
        ``{'method': str, 'p_value': float, 'mean_diff': float (mean of a - b), 'n': int}``.

    Raises:
        ValueError: on an unknown method, arrays that are not 1-D of equal non-zero
            length, non-finite values, or ``n_samples < 1``.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0:
        raise ValueError(f"a and b must be 1-D of equal non-zero length, got {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("a and b must be finite")

    d = x - y
    n = int(d.size)
    mean_diff = float(d.mean())
    result = {"method": method, "p_value": 1.0, "mean_diff": mean_diff, "n": n}
    if not np.any(d):
        return result

    if method == "randomization":
        null, exact = _flip_means(d, int(n_samples), seed)
        count = _at_least_as_extreme(null, mean_diff)
        p = count / null.size if exact else (count + 1) / (null.size + 1)
    elif method == "bootstrap":
        null = bootstrap_means((d - mean_diff)[:, None], int(n_samples), seed)[:, 0]
        p = (_at_least_as_extreme(null, mean_diff) + 1) / (n_samples + 1)
    elif method == "wilcoxon":
        from scipy import stats  # heavy: imported by the two tests that use it

        p = float(stats.wilcoxon(d).pvalue)
    else:  # ttest
        # a (numerically) constant non-zero difference has zero variance: t is infinite
        constant = np.ptp(d) <= 1e-12 * max(1.0, abs(mean_diff))
        from scipy import stats

        p = 0.0 if constant else float(stats.ttest_rel(x, y).pvalue)
    result["p_value"] = float(min(max(p, 0.0), 1.0))
    return result
