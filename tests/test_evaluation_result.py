"""Every evaluation result JSON says how large a corpus was searched (``n_tools``)."""

from __future__ import annotations

import json

from toolret.catalog.loaders.beir import load_beir
from toolret.catalog.model import Catalog
from toolret.cli import main
from toolret.evaluation import evaluate_retriever, split_volatile
from toolret.retrieval.bm25 import BM25Retriever


def test_result_has_n_tools(fixture_catalog_dir):
    full = load_beir(fixture_catalog_dir)
    kept = full.tools[:25]  # a corpus smaller than the file's, so n_tools is not a constant
    ids = {t.id for t in kept}
    catalog = Catalog(name=full.name, tools=kept, queries=full.queries,
                      qrels={q: {t: r for t, r in rels.items() if t in ids} for q, rels in full.qrels.items()})
    retriever = BM25Retriever()
    retriever.index(catalog.tool_ids, catalog.docs("original"))
    result, _ = evaluate_retriever(retriever, catalog, method="bm25", docs="original", ks=[5],
                                   bootstrap_samples=10, measure_latency=False)
    assert result["n_tools"] == 25
    assert split_volatile(result)[0]["n_tools"] == 25  # a stable field: kept in the DVC-tracked JSON


def test_evaluate_command_writes_n_tools(fixture_catalog_dir, tmp_path):
    out = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", "bm25", "--k", "5",
                 "--output", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["n_tools"] == len(load_beir(fixture_catalog_dir).tools) == 30
