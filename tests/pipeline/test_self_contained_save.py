"""A self-contained save (what ``toolret adapt`` writes as a champion) ranks the same after the fine-tuned
encoder it was built with is retrained in place, moved or deleted: the encoder is copied into the save.

The bug it guards: a champion's ``component.json`` named ``<adapt out>/work/dense-ft/model``, which the next
adapt retrains in place, so the previous champion encoded queries with the new adapter against vectors the
old one made (on ToolLens its test Recall@5 moved 0.275 -> 0.291 without the champion changing)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from toolret.catalog.model import Catalog, Query, Tool
from toolret.pipeline import Pipeline
from toolret.retrieval.bm25 import BM25Retriever
from toolret.retrieval.dense import DenseConfig, DenseRetriever
from toolret.retrieval.hybrid import HybridConfig, HybridRetriever, HybridSide
from toolret.roles import Corpus

TOPICS = ["weather forecast rain tomorrow", "movie title search by actor", "currency exchange rate euro dollar",
          "recipe ingredient cooking dinner", "translate text into french", "stock price of a company",
          "hotel room booking near the beach", "flight ticket airline departure", "send an email message",
          "music playlist song lyrics"]
QUERIES = ["will it rain on saturday", "films starring an actor", "how many dollars is 20 euros",
           "what can I cook with eggs", "say hello in french", "share value of apple",
           "a room for two nights by the sea", "plane to tokyo next week", "write to my boss", "lyrics of a song"]


def _catalog() -> Catalog:
    tools = [Tool(id=f"t{i}", name=f"t{i}", docs={"original": text}) for i, text in enumerate(TOPICS)]
    queries = [Query(f"q{i}", text, "test") for i, text in enumerate(QUERIES)]
    return Catalog("self-contained", tools, queries, {f"q{i}": {f"t{i}": 1} for i in range(len(QUERIES))})


def _train_adapter(folder: Path, seed: int) -> None:
    """A LoRA adapter over the packaged encoder, saved as dense-ft saves one; its weights drawn from ``seed``
    (a retraining in place: same folder, other weights)."""
    import torch

    from toolret.retrieval.models import LoraSettings, load_sentence_transformer, name_adapter_base

    model = load_sentence_transformer("all-MiniLM-L6-v2")
    LoraSettings(method="lora", lora_r=4).add_lora(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:  # peft starts B at 0 (the adapter a no-op): give it weights, as training does
                weight.copy_(torch.randn(weight.shape, generator=generator) * 0.2)
    shutil.rmtree(folder, ignore_errors=True)
    model.save(str(folder))
    name_adapter_base(folder, "all-MiniLM-L6-v2")


def _dense(folder: Path) -> DenseRetriever:
    return DenseRetriever(DenseConfig(model=str(folder), embedding_cache="off"))


def _hybrid(folder: Path) -> HybridRetriever:
    sides = [HybridSide(component="bm25"), HybridSide(component="dense")]
    return HybridRetriever([BM25Retriever(), _dense(folder)], HybridConfig(sides=sides, weight=0.5, select_on_dev=False))


def _ranking(pipe: Pipeline) -> tuple[list[list[str]], np.ndarray]:
    ranking = pipe.search(QUERIES, k=5)
    return [ranking.ranked_ids(i) for i in range(len(QUERIES))], np.asarray(ranking.scores)


@pytest.mark.parametrize("build", [_dense, _hybrid], ids=["dense", "hybrid-with-a-dense-side"])
def test_a_self_contained_save_survives_its_encoder_retrained_moved_or_deleted(tmp_path: Path, build) -> None:
    model = tmp_path / "work" / "dense-ft" / "model"
    _train_adapter(model, seed=1)
    pipe = Pipeline(build(model), name="dense-ft")
    pipe.index(Corpus.from_catalog(_catalog()))
    ids, scores = _ranking(pipe)
    pipe.save(tmp_path / "champion", self_contained=True)
    pipe.save(tmp_path / "plain")

    _train_adapter(model, seed=2)  # the next adapt retrains its work folder in place
    plain_ids, plain_scores = _ranking(Pipeline.load(tmp_path / "plain"))
    assert not np.allclose(plain_scores, scores, rtol=0, atol=1e-6), "the retraining left the encoder as it was"
    reloaded_ids, reloaded_scores = _ranking(Pipeline.load(tmp_path / "champion"))
    assert reloaded_ids == ids and np.allclose(reloaded_scores, scores, rtol=0, atol=1e-6)

    # the copy names where it came from, and holds the adapter alone (the base encoder ships in its package)
    metas = [json.loads(f.read_text()) for f in sorted((tmp_path / "champion").rglob("component.json"))]
    dense = [m for m in metas if m["component"] == "dense"]
    assert len(dense) == 1 and dense[0]["encoder_dir"] == "encoder"
    assert dense[0]["config"]["model"] == str(model)  # outside the project: named as it was
    embedded = next((tmp_path / "champion").rglob("encoder"))
    assert (embedded / "adapter_config.json").is_file() and not (embedded / "model.safetensors").exists()

    # promoted (copied elsewhere), its source deleted, saved again without asking: still the same rankings
    shutil.copytree(tmp_path / "champion", tmp_path / "previous")
    shutil.rmtree(tmp_path / "work")
    shutil.rmtree(tmp_path / "champion")
    Pipeline.load(tmp_path / "previous").save(tmp_path / "again")
    shutil.rmtree(tmp_path / "previous")
    again_ids, again_scores = _ranking(Pipeline.load(tmp_path / "again"))
    assert again_ids == ids and np.allclose(again_scores, scores, rtol=0, atol=1e-6)


def test_a_packaged_encoder_stays_named(tmp_path: Path) -> None:
    pipe = Pipeline(DenseRetriever(DenseConfig(embedding_cache="off")), name="dense")
    pipe.index(Corpus.from_catalog(_catalog()))
    pipe.save(tmp_path / "saved", self_contained=True)
    meta = json.loads((tmp_path / "saved" / "0-dense" / "component.json").read_text())
    assert meta["config"]["model"] == "all-MiniLM-L6-v2" and "encoder_dir" not in meta
    assert not (tmp_path / "saved" / "0-dense" / "encoder").exists()
