"""A fully fine-tuned encoder stored for git (:func:`toolret.retrieval.finetune.save_compact`): float16 shards,
every file under the git limit, loaded back by the usual paths as the same float32 SentenceTransformer."""

from __future__ import annotations

import json

import pytest

from toolret.registry import MAX_GIT_FILE_MB
from toolret.retrieval.models import save_compact

TEXTS = ["will it rain in Paris tomorrow", "send an email to my manager about the meeting",
         "Weather API: current conditions and a 7-day forecast for a city",
         "Currency converter: convert an amount between two currencies at live rates"]


def _query_weight(model):
    return model[0].model.encoder.layer[0].attention.self.query.weight.detach().clone()


@pytest.fixture(scope="module")
def packaged():
    from toolret.retrieval.models import load_sentence_transformer

    return load_sentence_transformer("all-MiniLM-L6-v2", "cpu", 64)


@pytest.fixture(scope="module")
def tuned():
    """all-MiniLM-L6-v2 with its first layer's weights moved: a model that is not the packaged one."""
    import torch

    from toolret.retrieval.models import load_sentence_transformer

    model = load_sentence_transformer("all-MiniLM-L6-v2", "cpu", 64)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model[0].model.encoder.layer[0].parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=gen))
    return model


def test_compact_model_is_sharded_float16_under_the_git_limit_and_loads_back_as_float32(tuned, packaged, tmp_path):
    import numpy as np
    import torch
    from safetensors import safe_open
    from sentence_transformers import SentenceTransformer

    from toolret.retrieval.models import load_sentence_transformer

    out = tmp_path / "dense-ft" / "model"
    sizes = save_compact(tuned, out)
    assert sizes == {str(f.relative_to(out)): f.stat().st_size for f in out.rglob("*") if f.is_file()}
    assert max(sizes.values()) <= MAX_GIT_FILE_MB * 2**20, sizes
    shards = sorted(out.glob("model-*-of-*.safetensors"))
    assert len(shards) >= 2 and not (out / "model.safetensors").exists()
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == [s.name for s in shards]
    for shard in shards:
        with safe_open(str(shard), "pt") as f:
            assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    weights = sum(s.stat().st_size for s in shards)
    n_params = sum(p.numel() for p in tuned[0].model.parameters())
    assert weights < 2.01 * n_params  # 2 bytes a weight (+ headers)

    expected = tuned.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    for loaded in (SentenceTransformer(str(out), device="cpu"), load_sentence_transformer(str(out), "cpu", 64)):
        assert loaded[0].model.dtype == torch.float32
        assert [type(m) for m in loaded] == [type(m) for m in tuned]
        # the moved weights came back (to float16 precision), not the packaged encoder's
        w = _query_weight(loaded)
        assert (w - _query_weight(tuned)).abs().max() < 1e-3 < (w - _query_weight(packaged)).abs().max()
        got = loaded.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True)
        cosines = (got * expected).sum(axis=1)
        assert np.all(cosines > 1 - 1e-3), cosines


def test_a_compact_dense_ft_artifact_retrieves_as_the_original_through_the_dense_ft_retriever(tuned, tmp_path):
    """Callers are unchanged: ``FinetunedDenseRetriever(<artifact>)`` reads ``<artifact>/model`` as before."""
    from toolret.retrieval.dense import DenseConfig, DenseRetriever
    from toolret.retrieval.finetune import FinetuneConfig
    from toolret.retrieval.finetuned import FinetunedDenseRetriever

    ids = [f"t{i}" for i in range(len(TEXTS))]
    full = DenseRetriever(DenseConfig(max_seq_length=64, embedding_cache="off"), encoder=tuned)
    save_compact(tuned, tmp_path / "dense-ft" / "model")
    compact = FinetunedDenseRetriever(tmp_path / "dense-ft", FinetuneConfig(max_seq_length=64),
                                      DenseConfig(embedding_cache="off"))
    assert compact.trained
    queries = ["rain in Paris", "convert dollars to euros", "email my boss"]
    for r in (full, compact):
        r.index(ids, TEXTS)
    want, got = full.search(queries, 4), compact.search(queries, 4)
    assert got.as_lists() == want.as_lists()
    assert got.scores == pytest.approx(want.scores, abs=1e-3)


def test_save_compact_refuses_files_over_the_limit_and_writes_nothing(tuned, tmp_path):
    out = tmp_path / "model"
    # the 30,522 x 384 word embeddings are one 22.4 MiB float16 tensor: no shard size makes that file smaller
    with pytest.raises(ValueError, match="files over 20 MiB"):
        save_compact(tuned, out, max_shard_mb=5, max_file_mb=20)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_save_compact_refuses_a_lora_model(tmp_path):
    """A model carrying a LoRA adapter saves as the adapter alone (``model.save``, a few MB): not compacted."""
    from toolret.retrieval.finetune import FinetuneConfig
    from toolret.retrieval.models import load_sentence_transformer

    model = load_sentence_transformer("all-MiniLM-L6-v2", "cpu", 64)
    FinetuneConfig(method="lora", lora_r=4).add_lora(model)
    with pytest.raises(ValueError, match="LoRA adapter"):
        save_compact(model, tmp_path / "model")
    assert not (tmp_path / "model").exists()
