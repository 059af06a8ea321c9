"""MLflow-safe metric names."""

from __future__ import annotations

import pytest

from toolret.metrics import metric_name_for_mlflow, metric_name_from_mlflow, per_query_metrics


@pytest.mark.parametrize(
    "name, key",
    [("recall@5", "recall_at_5"), ("ndcg@10", "ndcg_at_10"), ("comp@3", "comp_at_3"), ("mrr", "mrr")],
)
def test_round_trip(name: str, key: str) -> None:
    assert metric_name_for_mlflow(name) == key
    assert metric_name_from_mlflow(key) == name


def test_every_produced_metric_name_is_valid() -> None:
    _, pq = per_query_metrics({"q": ["a"]}, {"q": {"a"}}, [1, 5], precision=True, mrr_at_k=True)
    for name in pq:
        key = metric_name_for_mlflow(name)
        assert "@" not in key
        assert metric_name_from_mlflow(key) == name


@pytest.mark.parametrize("bad", ["", "recall@5!", "ndcg#3"])
def test_rejects_unfixable(bad: str) -> None:
    with pytest.raises(ValueError):
        metric_name_for_mlflow(bad)
