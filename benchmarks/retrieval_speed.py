"""Retrieval speed: toolret's retrievers vs the raw libraries underneath them, in the same run.

Prints JSON: per (dataset, method) index build time, batch queries/s, single-query p50/p95 ms, and the
same numbers for the raw library call (bm25s; sentence-transformers + faiss) with ratios
platform/raw (goal <= 1.2x). Usage: ``python benchmarks/retrieval_speed.py [--datasets ...] [--queries N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _latencies(search_one, texts) -> dict[str, float]:
    ts = []
    for t in texts:
        t0 = time.perf_counter()
        search_one(t)
        ts.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": float(np.percentile(ts, 50)), "p95_ms": float(np.percentile(ts, 95))}


def bench_bm25(docs, queries, k):
    import bm25s

    from toolret.retrieval.bm25 import BM25Retriever

    ids = [str(i) for i in range(len(docs))]
    ours = BM25Retriever()
    _, ours_build = _timed(lambda: ours.index(ids, docs))
    _, ours_batch = _timed(lambda: ours.search(queries, k))
    ours_lat = _latencies(lambda q: ours.search([q], k), queries[:100])

    def raw_build():
        m = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        m.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
        return m

    raw, raw_build_s = _timed(raw_build)
    raw_search = lambda qs: raw.retrieve(bm25s.tokenize(qs, stopwords="en", show_progress=False), k=k,
                                         show_progress=False, n_threads=1)
    _, raw_batch = _timed(lambda: raw_search(queries))
    raw_lat = _latencies(lambda q: raw_search([q]), queries[:100])
    return _row(ours_build, ours_batch, ours_lat, raw_build_s, raw_batch, raw_lat, len(queries))


def bench_dense(docs, queries, k, encoder):
    import faiss

    from toolret.retrieval.dense import DenseConfig, DenseRetriever

    ids = [str(i) for i in range(len(docs))]
    ours = DenseRetriever(DenseConfig(), encoder=encoder)
    _, ours_build = _timed(lambda: ours.index(ids, docs))
    _, ours_batch = _timed(lambda: ours.search(queries, k))
    ours_lat = _latencies(lambda q: ours.search([q], k), queries[:100])

    def raw_build():
        emb = encoder.encode(docs, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        index = faiss.IndexFlatIP(emb.shape[1])
        index.add(emb.astype(np.float32))
        return index

    index, raw_build_s = _timed(raw_build)
    raw_search = lambda qs: index.search(encoder.encode(qs, batch_size=64, normalize_embeddings=True,
                                                        convert_to_numpy=True).astype(np.float32), k)
    _, raw_batch = _timed(lambda: raw_search(queries))
    raw_lat = _latencies(lambda q: raw_search([q]), queries[:100])
    return _row(ours_build, ours_batch, ours_lat, raw_build_s, raw_batch, raw_lat, len(queries))


def _row(ob, obatch, olat, rb, rbatch, rlat, nq):
    return {
        "toolret": {"index_build_s": ob, "queries_per_s": nq / obatch, **olat},
        "raw_library": {"index_build_s": rb, "queries_per_s": nq / rbatch, **rlat},
        "ratio_toolret_over_raw": {"index_build": ob / rb, "batch_search": obatch / rbatch,
                                   "p50": olat["p50_ms"] / rlat["p50_ms"]},
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", nargs="+", default=["toollens", "toolbench-g1-instruction"])
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--methods", nargs="+", default=["bm25", "dense"])
    args = p.parse_args()

    from toolret.catalog.datasets import load_dataset
    from toolret.retrieval.models import load_sentence_transformer

    encoder = load_sentence_transformer("all-MiniLM-L6-v2", max_seq_length=256) if "dense" in args.methods else None
    out = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count()}, "k": args.k, "results": []}
    for name in args.datasets:
        catalog = load_dataset(name)
        docs = catalog.docs("original")
        queries = [q.text for q in catalog.split("test")][: args.queries]
        for method in args.methods:
            row = bench_bm25(docs, queries, args.k) if method == "bm25" else bench_dense(docs, queries, args.k, encoder)
            out["results"].append({"dataset": name, "method": method, "n_tools": len(docs), "n_queries": len(queries), **row})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
