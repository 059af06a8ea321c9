"""The data-level k-fold (toolret.catalog.folds) and the CLI's folding of learning pipelines."""

from __future__ import annotations

import pytest

from toolret.catalog.folds import base_dataset, kfold_split
from toolret.catalog.model import Catalog, Query, Tool
from toolret.errors import CatalogError


def _catalog(n_test=90, n_train=0):
    tools = [Tool(f"t{i}", f"t{i}", {"original": f"doc {i}"}) for i in range(5)]
    qs = [Query(f"q{i:02d}", f"query {i}", "test") for i in range(n_test)]
    qs += [Query(f"r{i}", f"train {i}", "train") for i in range(n_train)]
    return Catalog("mtrb-x", tools, qs, {q.id: {"t0": 1} for q in qs})


def test_nine_folds_of_ninety_queries_train_every_query_exactly_once():
    cat = _catalog()
    train_sets = []
    for f in range(9):
        folded = kfold_split(cat, 9, f, seed=13)
        train, test = {q.id for q in folded.split("train")}, {q.id for q in folded.split("test")}
        assert len(train) == 10 and len(test) == 80 and not train & test
        assert folded.name == f"mtrb-x-fold{f}of9" and base_dataset(folded) == "mtrb-x"
        assert folded.provenance["kfold"] == {"folds": 9, "fold": f, "seed": 13, "split": "test", "dataset": "mtrb-x",
                                              "n_train": 10, "n_test": 80}
        train_sets.append(train)
    assert set().union(*train_sets) == {q.id for q in cat.queries} and sum(map(len, train_sets)) == 90
    assert all(q.split == "test" for q in cat.queries)  # the source catalog is untouched
    assert kfold_split(cat, 9, 0, 13).split("train") == kfold_split(cat, 9, 0, 13).split("train")  # seeded
    assert {q.id for q in kfold_split(cat, 9, 0, 14).split("train")} != train_sets[0]


def test_bad_fold_settings_are_clear_errors():
    cat = _catalog(n_test=5)
    with pytest.raises(CatalogError, match="catalog.fold must be in"):
        kfold_split(cat, 3, 3, 13)
    with pytest.raises(CatalogError, match="folds must be >= 2"):
        kfold_split(cat, 1, 0, 13)
    with pytest.raises(CatalogError, match="fewer than 9 folds"):
        kfold_split(cat, 9, 0, 13)
    folded = kfold_split(cat, 5, 1, 13)
    assert kfold_split(folded, 5, 1, 13) is folded
    with pytest.raises(CatalogError, match="already fold 1 of 5"):
        kfold_split(folded, 5, 2, 13)


def test_cli_folds_only_learning_pipelines_on_datasets_without_a_train_split():
    from toolret.cli import _folded
    from toolret.config import validate_params

    params = validate_params({})
    cat = _catalog()
    assert _folded(cat, params, ["dense"]) is cat  # nothing learns: the dataset's own splits
    auto = _folded(cat, params, ["qta-rewriter", "dense"])
    assert auto.name == "mtrb-x-fold0of9" and len(auto.split("test")) == 80
    with_train = _catalog(n_train=4)
    assert _folded(with_train, params, ["qta-rewriter"]) is with_train  # has its own train split
    explicit = validate_params({"catalog": {"folds": 3, "fold": 2}})
    assert _folded(cat, explicit, ["dense"]).name == "mtrb-x-fold2of3"  # explicit folds apply to any pipeline
    assert _folded(cat, validate_params({"catalog": {"auto_folds": 0}}), ["qta-rewriter"]) is cat
