"""Evaluation result JSONs: the corpus size searched (``n_tools``) and metric values equal to trec_eval's."""

from __future__ import annotations

import json

import pytest

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


# BM25 on the fixture catalogue's test split, scored by pytrec_eval (trec_eval's recall_k, ndcg_cut_k and
# recip_rank; comp@k = 1 where recall_k is 1) and averaged with numpy: recorded before `toolret evaluate`
# scored through toolret.evaluate_api, and equal to the JSON it wrote then, float for float.
TREC_EVAL_MEANS = {
    "recall@1": 0.4583333333333333, "ndcg@1": 0.7, "comp@1": 0.25,
    "recall@3": 0.7166666666666666, "ndcg@3": 0.6944499757585472, "comp@3": 0.65,
    "recall@5": 0.7333333333333333, "ndcg@5": 0.7035270653854149, "comp@5": 0.65,
    "recall@10": 0.775, "ndcg@10": 0.7222687493267024, "comp@10": 0.75,
    "mrr": 0.7416666666666666,
}


def test_evaluate_command_writes_what_trec_eval_computes(fixture_catalog_dir, tmp_path):
    """The metric values of `toolret evaluate`'s JSON and per-query file, checked against pytrec_eval."""
    import numpy as np
    import pytrec_eval

    out = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", "bm25", "--k", "1,3,5,10",
                 "--output", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert list(result["metrics"]) == list(TREC_EVAL_MEANS)  # the key order is part of the file's bytes
    assert result["metrics"] == TREC_EVAL_MEANS  # exact floats
    assert result["n_queries"] == 20

    rows = [json.loads(line) for line in out.with_name("r.per_query.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(len(r["ranked"]) < 10 for r in rows)  # the file keeps the top 10: here every ranking is complete
    qrels = {r["query_id"]: {t: 1 for t in r["gold"]} for r in rows}
    run = {r["query_id"]: {t: float(len(r["ranked"]) - i) for i, t in enumerate(r["ranked"])} for r in rows}
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"recall.1,3,5,10", "ndcg_cut.1,3,5,10", "recip_rank"}).evaluate(run)
    for r in rows:
        q = trec[r["query_id"]]
        for k in (1, 3, 5, 10):
            assert r[f"recall@{k}"] == q[f"recall_{k}"] and r[f"ndcg@{k}"] == q[f"ndcg_cut_{k}"]
            assert r[f"comp@{k}"] == float(q[f"recall_{k}"] == 1.0)
        assert r["mrr"] == q["recip_rank"]

    # ci95: a percentile bootstrap written here (the params' seed and replicates, drawn 256 at a time) of the
    # per-query values; the package sums by a resampling-count matrix, so the last bit may differ
    ev = result["provenance"]["params"]["evaluation"]
    names = list(TREC_EVAL_MEANS)
    values = np.array([[r[m] for m in names] for r in rows])
    rng = np.random.default_rng(ev["seed"])
    replicates = np.concatenate([values[rng.integers(0, len(rows), size=(min(256, ev["bootstrap_samples"] - s),
                                                                          len(rows)))].mean(axis=1)
                                 for s in range(0, ev["bootstrap_samples"], 256)])
    for j, m in enumerate(names):
        low, high = np.quantile(replicates[:, j], [0.025, 0.975])
        assert result["ci95"][m] == pytest.approx([low, high], abs=1e-12), m


def test_qrels_from_catalog_is_the_catalogues_gold(fixture_catalog_dir):
    from toolret.evaluation import qrels_from_catalog

    catalog = load_beir(fixture_catalog_dir)
    test_ids = [q.id for q in catalog.split("test")]
    qrels = qrels_from_catalog(catalog, [*reversed(test_ids), "not-a-query"])
    assert list(qrels) == [*reversed(test_ids), "not-a-query"]  # the order asked for
    assert all(qrels.gold(q) == catalog.gold(q) for q in test_ids) and qrels.gold("not-a-query") == frozenset()
    assert list(qrels_from_catalog(catalog)) == list(catalog.qrels)
