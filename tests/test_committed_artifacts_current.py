"""Every trained artifact committed to git matches the inputs the current params would train it on: a change
to a training setting's schema (a new grid field ...) must not silently turn a committed model stale (the
component would refuse it on a fresh clone and `make run` would have to retrain it)."""

from __future__ import annotations

import pytest

from toolret.artifact_key import differences, read_key
from toolret.config import load_params
from toolret.stages import ROOT

pytestmark = pytest.mark.integration


def test_the_committed_toolrerank_artifacts_match_their_training_params():
    """Each of `toolrerank.train_datasets` whose artifact is committed (the one the pipelines read must be)."""
    from toolret.methods.toolrerank.training import artifact_key

    params = load_params(ROOT / "params.yaml")
    assert params.toolrerank.train_dataset in params.toolrerank.train_datasets
    for train in params.toolrerank.train_datasets:
        folder = ROOT / "data" / "models" / train / "toolrerank"
        if train != params.toolrerank.train_dataset and not (folder / "artifact_key.json").is_file():
            continue  # not trained yet (a costly stage); the evaluated one must be there
        assert differences(read_key(folder), artifact_key(params.toolrerank, params, train)) == [], train


def test_a_fusion_grid_enters_the_key_and_the_paper_default_does_not():
    from toolret.methods.toolrerank.training import artifact_key

    params = load_params(ROOT / "params.yaml")

    def with_weights(weights):
        return params.toolrerank.model_copy(update={"grid": params.toolrerank.grid.model_copy(
            update={"ce_weight": weights})})

    assert "ce_weight" not in artifact_key(with_weights([1.0]), params, "x")["config"]["grid"]
    assert artifact_key(with_weights([1.0, 0.5]), params, "x")["config"]["grid"]["ce_weight"] == [1.0, 0.5]


def test_a_first_stage_section_enters_the_key_as_resolved_for_its_dense_ft_catalog():
    """Per-dataset fine-tune settings (``finetune.datasets``) move the key of a reranker whose first stage reads
    that dataset's dense-ft, and of no other."""
    from toolret.methods.toolrerank.training import artifact_key

    params = load_params(ROOT / "params.yaml")
    plain = params.replace(finetune=params.finetune.model_copy(update={"datasets": {}}))
    other = params.replace(finetune=params.finetune.model_copy(update={"datasets": {"elsewhere": {"epochs": 3}}}))
    train = params.toolrerank.train_dataset
    mine = params.trained_on.get(train, train)
    own = params.replace(finetune=params.finetune.model_copy(update={"datasets": {mine: {"epochs": 3}}}))
    assert artifact_key(params.toolrerank, other, train) == artifact_key(params.toolrerank, plain, train)
    assert artifact_key(params.toolrerank, own, train) != artifact_key(params.toolrerank, plain, train)
