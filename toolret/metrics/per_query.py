"""Per-query metric arrays for a whole run, and their means."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from toolret.metrics.comp import comp_at_k
from toolret.metrics.hits import build_hit_table
from toolret.metrics.mrr import reciprocal_rank
from toolret.metrics.ndcg import ndcg_at_k
from toolret.metrics.precision import precision_at_k
from toolret.metrics.recall import recall_at_k


def _normalise_ks(ks: Sequence[int]) -> list[int]:
    out: list[int] = []
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"every cutoff must be a positive int, got {k!r}")
        if int(k) not in out:
            out.append(int(k))
    return out


def per_query_metrics(
    ranked: Mapping[str, Sequence[str]],
    gold: Mapping[str, Iterable[str]],
    ks: Sequence[int],
    *,
    empty_gold: str = "skip",
    precision: bool = False,
    mrr_at_k: bool = False,
) -> tuple[list[str], dict[str, np.ndarray]]:
    """Score every query of a run.

    Args:
        ranked: query id -> ranked tool ids (best first). A query of ``gold`` missing
            here counts as an empty ranking (all metrics 0). Queries only in ``ranked``
            are ignored. Duplicate tool ids: only the first occurrence can be a hit.
        gold: query id -> set of gold tool ids; its key order fixes the output order.
        ks: cutoffs (positive ints; duplicates collapse, first-seen order kept).
        empty_gold: ``"skip"`` (default) excludes queries with an empty gold set from
            the output; ``"raise"`` raises :class:`ValueError` on them instead.
        precision: also return ``'precision@k'`` for each k.
        mrr_at_k: also return ``'mrr@k'`` (reciprocal rank cut at k) for each k.

    Returns:
        ``(query_ids, metrics)``: the ids of the scored queries (``gold`` key order,
        empty-gold queries removed) and ``{metric name: [n_queries] float array}`` with
        ``'recall@k'``, ``'ndcg@k'``, ``'comp@k'`` for each k and ``'mrr'`` (whole
        ranking, no cutoff), all fractions in [0, 1], rows aligned with ``query_ids``.

    Raises:
        ValueError: on an invalid cutoff, or an empty gold set with ``empty_gold="raise"``.
    """
    cutoffs = _normalise_ks(ks)
    table = build_hit_table(ranked, gold, max(cutoffs, default=0), empty_gold=empty_gold)
    metrics: dict[str, np.ndarray] = {}
    for k in cutoffs:
        metrics[f"recall@{k}"] = recall_at_k(table.hits, table.n_gold, k)
        metrics[f"ndcg@{k}"] = ndcg_at_k(table.hits, table.n_gold, k)
        metrics[f"comp@{k}"] = comp_at_k(table.hits, table.n_gold, k)
        if precision:
            metrics[f"precision@{k}"] = precision_at_k(table.hits, k)
        if mrr_at_k:
            metrics[f"mrr@{k}"] = reciprocal_rank(table.first_hit, k)
    metrics["mrr"] = reciprocal_rank(table.first_hit)
    return table.query_ids, metrics


def aggregate(per_query: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Mean of each per-query metric array.

    Args:
        per_query: metric name -> ``[n_queries]`` array (as from :func:`per_query_metrics`).

    Returns:
        metric name -> mean, as a plain float.

    Raises:
        ValueError: if an array is empty (a mean over zero queries is undefined) or not 1-D.
    """
    out: dict[str, float] = {}
    for name, values in per_query.items():
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim != 1:
            raise ValueError(f"metric {name!r}: expected a 1-D array, got shape {arr.shape}")
        if arr.size == 0:
            raise ValueError(f"metric {name!r}: no queries to average")
        out[name] = float(arr.mean())
    return out
