"""``finetune.datasets``: one training catalog fine-tuned with its own settings (ToolLens in full) while the
others keep the section's (LoRA); an artifact of a catalog without its own settings keeps its key."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolret.catalog.model import Catalog, Query, Tool
from toolret.retrieval.finetune import FinetuneConfig, artifact_key


def _catalog(name: str) -> Catalog:
    tools = [Tool(id=f"t{i}", name=f"t{i}", docs={"original": f"tool number {i}"}) for i in range(3)]
    queries = [Query(id=f"q{i}", text=f"query {i}", split="train") for i in range(3)]
    return Catalog(name, tools, queries, {f"q{i}": {f"t{i}": 1} for i in range(3)})


def test_a_dataset_gets_its_own_settings_over_the_section() -> None:
    config = FinetuneConfig(method="lora", lr=1e-3, datasets={"toollens": {"method": "full", "lr": 2e-4, "epochs": 2}})
    full = config.for_dataset("toollens")
    assert (full.method, full.lr, full.epochs, full.datasets) == ("full", 2e-4, 2, {})
    other = config.for_dataset("toolbench-synthetic")
    assert (other.method, other.lr) == ("lora", 1e-3)


def test_the_artifact_key_moves_only_for_the_dataset_with_its_own_settings() -> None:
    plain = FinetuneConfig(method="lora", lr=1e-3, model="m")
    with_override = plain.replace(datasets={"toollens": {"method": "full"}})
    assert artifact_key(_catalog("toolbench-synthetic"), with_override) == artifact_key(_catalog("toolbench-synthetic"), plain)
    assert artifact_key(_catalog("toollens"), with_override) != artifact_key(_catalog("toollens"), plain)
    assert artifact_key(_catalog("toollens"), with_override) == artifact_key(_catalog("toollens"),
                                                                           plain.replace(method="full"))


def test_a_key_that_cannot_be_set_per_dataset_is_an_error_naming_it() -> None:
    with pytest.raises(ValidationError, match=r"finetune.datasets.toollens: keys \['max_seq_length'\]"):
        FinetuneConfig(datasets={"toollens": {"max_seq_length": 128}})


def test_the_section_reads_as_before_where_no_dataset_has_its_own_settings() -> None:
    """Other artifacts hash the whole section (ToolRerank's first stage): an empty table must not move them."""
    assert "datasets" not in FinetuneConfig().to_dict()
    assert FinetuneConfig(datasets={"toollens": {"epochs": 2}}).to_dict()["datasets"] == {"toollens": {"epochs": 2}}


def test_the_dataset_settings_pick_the_train_pairs_the_key_hashes() -> None:
    """A per-dataset ``max_train_pairs`` (ToolLens: 0 = all) is the one the key's train pairs are cut with, so
    that the key written at training (settings already resolved) is the one loading computes from the section."""
    section = FinetuneConfig(method="lora", model="m", max_train_pairs=1,
                             datasets={"toollens": {"method": "full", "max_train_pairs": 0}})
    resolved = section.for_dataset("toollens")
    assert artifact_key(_catalog("toollens"), section) == artifact_key(_catalog("toollens"), resolved)
