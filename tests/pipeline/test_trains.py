"""``Component.trains``: every component that learns from a train split says so (the CLI k-folds a dataset
without one for it), and one that learns elsewhere (ToolRerank: toolrerank.train_dataset) is not folded."""

from __future__ import annotations

from toolret.config import load_params
from toolret.registry import component, components
from toolret.stages import ROOT

LEARNERS = {"dense-ft", "hybrid-ft", "colt", "qta-rewriter", "qta-base", "qta-syn-ft", "toolrerank-ce", "ce-top10", "ce-top30", "ce-top50"}


def test_trains_is_set_on_every_learning_component_and_only_there():
    assert {c.name for c in components() if c.trains} == LEARNERS


def test_a_component_trained_on_another_dataset_does_not_fold_the_evaluated_one():
    params = load_params(ROOT / "params.yaml")
    train = params.toolrerank.train_dataset
    assert train and train != "toolbench-g1-tool"
    assert not component("toolrerank-ce").learns_from("toolbench-g1-tool", params)
    assert component("toolrerank-ce").learns_from(train, params)
    own = load_params(ROOT / "params.yaml", ["toolrerank.train_dataset=null"])
    # no train_dataset and no trained_on entry: its own train split (k-folded where it has none) ...
    assert "mtrb-metatool" not in own.trained_on
    assert component("toolrerank-ce").learns_from("mtrb-metatool", own)
    # ... while trained_on maps a test-only benchmark to its training catalog
    assert own.trained_on["toolbench-g1-tool"] != "toolbench-g1-tool"
    assert not component("toolrerank-ce").learns_from("toolbench-g1-tool", own)
    assert component("dense-ft").learns_from("mtrb-metatool", params) and not component("bm25").learns_from("x", params)
    assert not component("hybrid-ft").learns_from("toolbench-g1-tool", params)
