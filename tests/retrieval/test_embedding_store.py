"""The persistent embedding store behind Re-Invoke's memo: reuse across processes, identity of the
encoder, robustness to a broken shard."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from toolret.methods.reinvoke.components import MemoEncoder
from toolret.retrieval.dense import DenseConfig
from toolret.retrieval.embedding_store import EmbeddingStore, encoder_fingerprint


class CountingEncoder:
    """Hashed bag of words; records every text it is asked to encode."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts, show_progress: bool = False) -> np.ndarray:
        self.seen.extend(texts)
        out = np.zeros((len(texts), 32), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 32] += 1.0
        return out


TEXTS = ["Documentation: get weather Query: is it sunny", "Documentation: book a flight Query: fly to Oslo", "rain"]


def test_second_process_reads_vectors_instead_of_encoding(tmp_path):
    first = CountingEncoder()
    a = MemoEncoder(first, EmbeddingStore(tmp_path, "fp"))
    emb_a = a.encode(TEXTS + TEXTS[:1])
    assert first.seen == TEXTS and a.stats == {"encoded": 3, "from_store": 0}

    second = CountingEncoder()  # a new process: fresh memo, store read from disk
    b = MemoEncoder(second, EmbeddingStore(tmp_path, "fp"))
    emb_b = b.encode(TEXTS + ["new text"])
    assert second.seen == ["new text"] and b.stats == {"encoded": 1, "from_store": 3}
    np.testing.assert_array_equal(emb_b[:3], emb_a[:3])
    assert len(EmbeddingStore(tmp_path, "fp")) == 4

    other = CountingEncoder()  # another encoder fingerprint shares nothing
    MemoEncoder(other, EmbeddingStore(tmp_path, "other")).encode(TEXTS)
    assert other.seen == TEXTS


def test_unreadable_shard_is_skipped_and_reencoded(tmp_path):
    MemoEncoder(CountingEncoder(), EmbeddingStore(tmp_path, "fp")).encode(TEXTS)
    (tmp_path / "fp" / "torn.npz").write_bytes(b"PK\x03\x04 not a zip")
    store = EmbeddingStore(tmp_path, "fp")
    assert store.skipped_shards == 1 and len(store) == 3
    assert not list((tmp_path / "fp").glob("*.tmp"))  # writes go through temp + rename


def test_fingerprint_follows_weights_and_settings(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights v1")
    cfg = DenseConfig(model=str(model))
    fp = encoder_fingerprint(cfg)
    assert fp == encoder_fingerprint(DenseConfig(model=str(model)))
    assert fp != encoder_fingerprint(cfg.replace(max_seq_length=128))
    assert fp != encoder_fingerprint(cfg.replace(normalize=False))
    assert fp == encoder_fingerprint(cfg.replace(batch_size=8))  # batch size is not part of the identity
    (model / "model.safetensors").write_bytes(b"weights v2")
    assert fp != encoder_fingerprint(cfg)


def test_for_config_places_the_store_and_can_switch_it_off(tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    dense = DenseConfig(model=str(model))
    memo = MemoEncoder.for_config(dense.replace(embedding_cache=str(tmp_path / "emb")))
    assert memo.store is not None and memo.store.folder.parent == tmp_path / "emb"
    assert memo.store.folder.name.startswith(encoder_fingerprint(dense) + "-")
    # vectors made under other numeric kernels (toolret.reproducibility) are kept apart
    monkeypatch.setenv("MKL_CBWR", "AUTO")
    other = MemoEncoder.for_config(dense.replace(embedding_cache=str(tmp_path / "emb")))
    assert other.store.folder.parent == memo.store.folder.parent and other.store.folder != memo.store.folder
    assert MemoEncoder.for_config(dense.replace(embedding_cache="off")).store is None


def test_dense_index_reads_documents_from_the_store_across_retrievers(tmp_path):
    from toolret.retrieval.dense import DenseRetriever

    cfg = DenseConfig(embedding_cache=str(tmp_path / "emb"))
    docs = ["weather forecast for a city", "movie search by title", "currency exchange rates"]
    first = DenseRetriever(cfg)
    first.index(["w", "m", "c"], docs)
    second = DenseRetriever(cfg)
    encoded: list[str] = []
    real = second.encode
    second.encode = lambda texts, show_progress=False: (encoded.extend(texts), real(texts))[1]
    second.index(["w", "m", "c"], docs)
    assert encoded == []  # every document came from the store written by the first retriever
    q = ["will it rain tomorrow", "find a film"]
    assert first.search(q, 3).as_lists() == second.search(q, 3).as_lists()
    assert encoded == q  # queries are encoded, never stored


def test_an_injected_encoder_never_uses_the_store(tmp_path):
    from toolret.retrieval.dense import DenseRetriever

    class Fixed:
        def encode(self, texts, **kw):
            return np.eye(3, dtype=np.float32)[: len(texts)]

    r = DenseRetriever(DenseConfig(embedding_cache=str(tmp_path / "emb")), encoder=Fixed())
    r.index(["a", "b", "c"], ["x", "y", "z"])
    assert not (tmp_path / "emb").exists()  # its vectors are not the configured model's
