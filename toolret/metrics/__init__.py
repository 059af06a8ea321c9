"""Tool-retrieval metrics: Recall@k, NDCG@k, COMP@k, MRR (+ Precision@k), bootstrap CIs,
paired significance tests.

Typical use::

    qids, pq = per_query_metrics(ranked, gold, ks=[1, 5, 10])
    means = aggregate(pq)
    cis = bootstrap_cis(pq)
    paired_test(pq["recall@5"], other_pq["recall@5"])
"""

from __future__ import annotations

from toolret.metrics.bootstrap import bootstrap_ci, bootstrap_cis
from toolret.metrics.comp import comp_at_k
from toolret.metrics.hits import HitTable, build_hit_table
from toolret.metrics.mrr import reciprocal_rank
from toolret.metrics.names import metric_name_for_mlflow, metric_name_from_mlflow
from toolret.metrics.ndcg import ndcg_at_k
from toolret.metrics.per_query import aggregate, per_query_metrics
from toolret.metrics.precision import precision_at_k
from toolret.metrics.recall import recall_at_k
from toolret.metrics.significance import paired_test

__all__ = [
    "HitTable",
    "aggregate",
    "bootstrap_ci",
    "bootstrap_cis",
    "build_hit_table",
    "comp_at_k",
    "metric_name_for_mlflow",
    "metric_name_from_mlflow",
    "ndcg_at_k",
    "paired_test",
    "per_query_metrics",
    "precision_at_k",
    "recall_at_k",
    "reciprocal_rank",
]
