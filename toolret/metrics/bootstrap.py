"""Percentile bootstrap confidence intervals for the mean of per-query metrics."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

_CHUNK = 256  # bootstrap replicates per block, bounds memory at ~CHUNK * n_queries floats


def _check(n_samples: int, alpha: float) -> None:
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def bootstrap_means(matrix: np.ndarray, n_samples: int, seed: int) -> np.ndarray:
    """``[n_samples, n_metrics]`` means of resampled rows, one index draw shared by all columns.

    Each replicate draws ``n`` row indices with replacement; the replicate means are the
    resampling counts times the matrix, divided by ``n``.
    """
    n = matrix.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty((n_samples, matrix.shape[1]), dtype=np.float64)
    for start in range(0, n_samples, _CHUNK):
        stop = min(start + _CHUNK, n_samples)
        b = stop - start
        idx = rng.integers(0, n, size=(b, n))
        flat = (idx + (np.arange(b) * n)[:, None]).ravel()
        counts = np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)
        out[start:stop] = counts @ matrix / n
    return out


def _interval(means: np.ndarray, values: np.ndarray, alpha: float) -> tuple[float, float]:
    if np.all(values == values[0]):
        c = float(values[0])
        return c, c
    lo, hi = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def bootstrap_cis(
    per_query: Mapping[str, np.ndarray],
    n_samples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap CIs of the mean for several metrics over the same queries.

    Every metric is resampled with the same query indices, so the intervals come from one
    joint bootstrap. ``bootstrap_cis({'m': v}, ...)['m'] == bootstrap_ci(v, ...)`` for
    equal arguments.

    Args:
        per_query: metric name -> ``[n_queries]`` array; all the same length.
        n_samples: bootstrap replicates.
        alpha: the interval covers ``1 - alpha`` (two-sided, ``alpha/2`` in each tail).
        seed: seed of the ``numpy`` generator drawing the indices.

    Returns:
        metric name -> ``(low, high)``. A constant metric gets ``(c, c)`` exactly.

    Raises:
        ValueError: on arrays of different lengths, empty or non-1-D arrays, non-finite
            values, ``n_samples < 1`` or ``alpha`` outside (0, 1).
    """
    _check(n_samples, alpha)
    if not per_query:
        return {}
    names = list(per_query)
    cols = [np.asarray(per_query[m], dtype=np.float64) for m in names]
    for m, c in zip(names, cols):
        if c.ndim != 1 or c.size == 0:
            raise ValueError(f"metric {m!r}: expected a non-empty 1-D array, got shape {c.shape}")
        if not np.all(np.isfinite(c)):
            raise ValueError(f"metric {m!r}: values must be finite")
    if len({c.size for c in cols}) != 1:
        raise ValueError("all per-query arrays must have the same length")
    matrix = np.stack(cols, axis=1)
    means = bootstrap_means(matrix, int(n_samples), seed)
    return {m: _interval(means[:, j], cols[j], alpha) for j, m in enumerate(names)}


def bootstrap_ci(
    values: np.ndarray,
    n_samples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of one per-query metric.

    Args:
        values: ``[n_queries]`` per-query scores.
        n_samples: bootstrap replicates.
        alpha: the interval covers ``1 - alpha``.
        seed: seed of the index generator.

    Returns:
        ``(low, high)``; ``(c, c)`` for a constant array.

    Raises:
        ValueError: as :func:`bootstrap_cis`.
    """
    return bootstrap_cis({"_": values}, n_samples=n_samples, alpha=alpha, seed=seed)["_"]
