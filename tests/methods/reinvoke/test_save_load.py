"""A saved Re-Invoke index (and a pipeline holding it) loads back ranking exactly as before."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.catalog.datasets import load_dataset
from toolret.methods.reinvoke.components import IntentRewriter, ReInvokeIndex
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.pipeline import Pipeline


def _synthetic(catalog):
    """Two synthetic queries per tool built from its name; the first tool's samples all failed to parse."""
    recs = []
    for i, tool in enumerate(catalog.tools):
        for j, q in enumerate((f"please use {tool.name}", f"{tool.name} {tool.tool} now")):
            recs.append({"tool_id": tool.id, "sample_index": j, "query": None if i == 0 else q,
                         "status": "empty" if i == 0 else "ok"})
    return recs


@pytest.mark.parametrize(("backbone", "aggregation"), [("dense", "mean"), ("dense", "max"), ("bm25", "mean")])
def test_saved_index_loads_and_ranks_identically(tmp_path, fixture_catalog_dir, bow_encoder, backbone, aggregation):
    from toolret.registry import load_component

    catalog = load_dataset(str(fixture_catalog_dir))
    queries = [q.text for q in catalog.split("test")] + ["nothing matches zzz"]
    qids = [f"q{i}" for i in range(len(queries))]
    cfg = ReInvokeConfig(n_queries=2, aggregation=aggregation)
    index = ReInvokeIndex(cfg, backbone, synthetic=_synthetic(catalog), encoder=bow_encoder)
    index.index(catalog.tool_ids, catalog.docs("original"))
    assert index.stats == {"n_copies": 2 * len(catalog.tools) - 1, "tools_without_queries": 1}
    before = index.search(queries, 10, qids)
    index.save(tmp_path / "saved")

    for loaded in (ReInvokeIndex.load(tmp_path / "saved"), load_component(tmp_path / "saved")):
        assert isinstance(loaded, ReInvokeIndex) and loaded.backbone == backbone
        assert loaded.config == cfg and loaded.tool_ids == catalog.tool_ids and loaded.stats == index.stats
        if backbone == "dense":  # a fresh memo over the same (stateless) bag-of-words encoder
            loaded._encoder = type(bow_encoder)(bow_encoder.dense)
        after = loaded.search(queries, 10, qids)
        assert after.as_lists() == before.as_lists()
        np.testing.assert_allclose(after.scores, before.scores, rtol=1e-6)
    # the ranking is not the plain backbone's (the expansion took part), so the comparison above is not vacuous
    other = ReInvokeIndex(cfg, backbone, synthetic=[dict(r, query=None) for r in _synthetic(catalog)],
                          encoder=bow_encoder)
    other.index(catalog.tool_ids, catalog.docs("original"))
    assert other.search(queries, 10, qids).as_lists() != before.as_lists()


def test_saved_pipeline_with_intents_loads_and_ranks_identically(tmp_path, fixture_catalog_dir):
    catalog = load_dataset(str(fixture_catalog_dir))
    queries = [q.text for q in catalog.split("test")]
    # stored intents: two per query (the query and its last three words), so fusion takes part
    outputs = {q: [q, " ".join(q.split()[-3:])] for q in queries}
    index = ReInvokeIndex(ReInvokeConfig(n_queries=2), "bm25", synthetic=_synthetic(catalog))
    pipe = Pipeline(index, IntentRewriter(ReInvokeConfig(n_queries=2), outputs=outputs), name="reinvoke-bm25")
    pipe.index_documents(catalog.tool_ids, catalog.docs("original"))
    before = pipe.search(queries, 10)
    pipe.save(tmp_path / "pipe")
    loaded = Pipeline.load(tmp_path / "pipe")
    assert loaded.name == "reinvoke-bm25" and isinstance(loaded.rewriter, IntentRewriter)
    after = loaded.search(queries, 10)
    assert after.as_lists() == before.as_lists()
    np.testing.assert_allclose(after.scores, before.scores, rtol=1e-6)
    assert after.as_lists() != index.search(queries, 10).as_lists()  # the intents changed the ranking
