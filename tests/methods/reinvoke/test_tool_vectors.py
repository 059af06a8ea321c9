"""Committed tool vectors: an index reading them ranks exactly as one encoding every copy, encodes only the
tools whose copies changed, and reads no other encoder's vectors."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.errors import CatalogError
from toolret.catalog.datasets import load_dataset
from toolret.methods.reinvoke.components import MemoEncoder, ReInvokeIndex
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.tool_vectors import ToolVectors, tool_key


def _synthetic(catalog, changed: str | None = None):
    recs = []
    for tool in catalog.tools:
        for j, q in enumerate((f"how do I {tool.name}", f"call {tool.tool} for me")):
            if tool.id == changed and j == 1:
                q = "an entirely different request about weather"
            recs.append({"tool_id": tool.id, "sample_index": j, "query": q, "status": "ok"})
    return recs


def _index(encoder_cls, catalog, store_dir, synthetic, fingerprint="bow", tool_vectors=None):
    encoder = encoder_cls()
    cfg = ReInvokeConfig(n_queries=2, tool_vectors=str(tool_vectors or store_dir))
    index = ReInvokeIndex(cfg, "dense", synthetic=synthetic, encoder=MemoEncoder(encoder, fingerprint=fingerprint))
    index.index(catalog.tool_ids, catalog.docs("original"))
    return index, encoder


@pytest.fixture
def written(tmp_path, fixture_catalog_dir, counting_encoder_cls):
    catalog = load_dataset(str(fixture_catalog_dir))
    store = tmp_path / "tool-vectors"
    writer = ReInvokeIndex(ReInvokeConfig(n_queries=2, tool_vectors="off"), "dense", synthetic=_synthetic(catalog),
                           encoder=MemoEncoder(counting_encoder_cls(), fingerprint="bow"))
    writer.write_tool_vectors(catalog.tool_ids, catalog.docs("original"), store / "fixture.npz", {"dataset": "fx"})
    return counting_encoder_cls, catalog, store


def test_stored_vectors_rank_as_encoding_every_copy_and_encode_none(written):
    enc_cls, catalog, store = written
    queries = [q.text for q in catalog.split("test")]
    qids = [f"q{i}" for i in range(len(queries))]
    plain, plain_enc = _index(enc_cls, catalog, store, _synthetic(catalog), tool_vectors="off")
    stored, stored_enc = _index(enc_cls, catalog, store, _synthetic(catalog))
    assert len(plain_enc.texts) == 2 * len(catalog.tools)  # the plain index encoded every copy ...
    assert stored_enc.texts == []  # ... the stored one none
    assert stored.stats["tool_vectors"] == {"stored": len(catalog.tools), "encoded_tools": 0}
    a, b = plain.search(queries, 10, qids), stored.search(queries, 10, qids)
    assert a.as_lists() == b.as_lists()
    np.testing.assert_array_equal(a.scores, b.scores)


def test_a_tool_whose_copies_changed_is_encoded_the_others_read(written):
    enc_cls, catalog, store = written
    changed = catalog.tool_ids[1]
    index, enc = _index(enc_cls, catalog, store, _synthetic(catalog, changed))
    assert index.stats["tool_vectors"] == {"stored": len(catalog.tools) - 1, "encoded_tools": 1}
    assert len(enc.texts) == 2 and all(t.startswith("Documentation: ") for t in enc.texts)
    assert "an entirely different request about weather" in enc.texts[1]
    queries = [q.text for q in catalog.split("test")] + ["weather request"]
    plain, _ = _index(enc_cls, catalog, store, _synthetic(catalog, changed), tool_vectors="off")
    assert index.search(queries, 10).as_lists() == plain.search(queries, 10).as_lists()


def test_other_encoders_vectors_and_unidentified_encoders_read_none(written):
    enc_cls, catalog, store = written
    other, enc = _index(enc_cls, catalog, store, _synthetic(catalog), fingerprint="another-encoder")
    assert other.stats["tool_vectors"] == {"stored": 0, "encoded_tools": len(catalog.tools)}
    assert len(enc.texts) == 2 * len(catalog.tools)
    anonymous, enc = _index(enc_cls, catalog, store, _synthetic(catalog), fingerprint=None)
    assert "tool_vectors" not in anonymous.stats and len(enc.texts) == 2 * len(catalog.tools)


def test_file_content_is_keyed_by_the_copies(written):
    enc_cls, catalog, store = written
    vectors = ToolVectors(store, "bow")
    assert vectors.files == ["fixture.npz"] and len(vectors) == len(catalog.tools)
    doc = catalog.docs("original")[0]
    tool = catalog.tools[0]
    copies = [f"Documentation: {doc} Query: how do I {tool.name}", f"Documentation: {doc} Query: call {tool.tool} for me"]
    assert set(vectors.get([copies])) == {0}
    assert vectors.get([copies[:1]]) == {} and vectors.get([copies[::-1]]) == {}
    assert tool_key(copies) != tool_key(copies[::-1])
    with np.load(store / "fixture.npz") as z:
        assert z["tool_ids"].tolist() == catalog.tool_ids and z["vectors"].dtype == np.float32


def test_an_unreadable_file_is_an_error_naming_it(written):
    enc_cls, catalog, store = written
    (store / "broken.npz").write_bytes(b"not a zip")
    with pytest.raises(CatalogError, match="broken.npz"):
        _index(enc_cls, catalog, store, _synthetic(catalog))
