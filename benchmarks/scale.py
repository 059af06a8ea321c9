"""ToolBench at scale: the 46,879-API env corpus against the 2,479-API union corpus, bm25 and dense.

Per (corpus, method), each in its own process so peak memory is its own: index build (dense: document
encoding through the embedding store, cold unless the store already holds the corpus -- the six groups
share it, so it is encoded once), peak RSS, index size on disk, single-query latency p50 / p99 over the
765 test queries of the six groups (dense: query encoding + search, and the faiss search alone), and
batch queries/s. Dense runs exact search (faiss flat) and the approximate HNSW switch (``dense.index:
hnsw``): its latency and Recall@5 of the gold APIs and its overlap with the exact top 5.

Usage: ``python benchmarks/scale.py [--out benchmarks/results/scale.json]`` on an idle box (pause other
jobs: SIGSTOP / SIGCONT).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

GROUPS = ["g1-instruction", "g1-category", "g1-tool", "g2-instruction", "g2-category", "g3-instruction"]
K = 100


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _saved_mb(retriever) -> float:
    """Size on disk of the retriever's saved index (written to a temporary folder, then removed)."""
    tmp = Path(tempfile.mkdtemp())
    try:
        retriever.save(tmp / "index")
        return sum(p.stat().st_size for p in (tmp / "index").rglob("*") if p.is_file()) / 2**20
    finally:
        shutil.rmtree(tmp)


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _percentiles(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p99_ms": round(float(np.percentile(ms, 99)), 2)}


def _load(prefix: str):
    """The shared corpus and the six groups' test queries (with gold) of ``toolbench-<prefix>*``."""
    from toolret.catalog.datasets import load_dataset

    queries, gold, catalog = [], [], None
    for g in GROUPS:
        catalog = load_dataset(f"toolbench-{prefix}{g}")
        for q in catalog.split("test"):
            queries.append(q.text)
            gold.append(set(catalog.gold(q.id)))
    return catalog, queries, gold


def _recall5(ranking, gold) -> float:
    return float(np.mean([len(set(ranking.ranked_ids(i)[:5]) & g) / len(g) for i, g in enumerate(gold)]))


def _single_query(search, queries) -> dict[str, float]:
    ms = []
    for q in queries:
        t0 = time.perf_counter()
        search([q])
        ms.append((time.perf_counter() - t0) * 1000)
    return _percentiles(ms)


def run_bm25(prefix: str, out) -> None:
    from toolret.retrieval.bm25 import BM25Retriever

    catalog, queries, gold = _load(prefix)
    base = _rss_mb()
    r = BM25Retriever()
    _, build = _timed(lambda: r.index(catalog.tool_ids, catalog.docs("original")))
    size = _saved_mb(r)
    ranking, batch = _timed(lambda: r.search(queries, K))
    out.put({"method": "bm25", "index": "bm25s", "n_tools": len(catalog.tools), "n_queries": len(queries),
             "index_build_s": round(build, 2), "peak_rss_mb": round(_rss_mb(), 1),
             "rss_before_index_mb": round(base, 1), "index_size_mb": round(size, 2),
             "queries_per_s_batch": round(len(queries) / batch, 1),
             **_single_query(lambda q: r.search(q, K), queries), "recall@5": round(_recall5(ranking, gold), 4)})


def run_dense(prefix: str, out) -> None:
    from toolret.retrieval.dense import DenseConfig, DenseRetriever

    catalog, queries, gold = _load(prefix)
    docs = catalog.docs("original")
    exact = DenseRetriever(DenseConfig())
    store = exact.config.store()
    cold = len(store.get(docs)) < len(set(docs)) if store is not None else True
    base = _rss_mb()
    emb, encode = _timed(lambda: exact.encode_documents(docs))
    rows = []
    q_emb = exact.encode(queries)
    for kind in ("flat", "hnsw"):
        r = DenseRetriever(DenseConfig(index=kind), encoder=exact.encoder)
        _, build = _timed(lambda r=r: r.index_embeddings(catalog.tool_ids, emb))
        size = _saved_mb(r)
        ranking, batch = _timed(lambda r=r: r.search_embeddings(q_emb, K))
        search_only = []
        for i in range(len(queries)):
            t1 = time.perf_counter()
            r.search_embeddings(q_emb[i:i + 1], K)
            search_only.append((time.perf_counter() - t1) * 1000)
        rows.append({"method": "dense", "index": kind, "n_tools": len(catalog.tools), "n_queries": len(queries),
                     "encode_docs_s": round(encode, 1), "encode_cold": cold, "docs_per_s": round(len(docs) / encode, 1),
                     "index_build_s": round(build, 2), "index_size_mb": round(size, 2),
                     "queries_per_s_batch_search": round(len(queries) / batch, 1),
                     **_single_query(lambda q, r=r: r.search(q, K), queries),
                     "search_only": _percentiles(search_only), "recall@5": round(_recall5(ranking, gold), 4),
                     "_top5": [r_[:5] for r_ in ranking.as_lists().values()]})
    exact_top = rows[0].pop("_top5")
    approx_top = rows[1].pop("_top5")
    rows[1]["overlap_with_exact_top5"] = round(float(np.mean([len(set(a) & set(b)) / max(1, len(b))
                                                              for a, b in zip(approx_top, exact_top)])), 4)
    rows[1]["recall@5_loss_vs_exact"] = round(rows[0]["recall@5"] - rows[1]["recall@5"], 4)
    for row in rows:
        row.update(peak_rss_mb=round(_rss_mb(), 1), rss_before_encode_mb=round(base, 1))
        out.put(row)


def _in_child(fn, prefix: str) -> list[dict]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=fn, args=(prefix, q))
    p.start()
    rows = []
    while p.is_alive() or not q.empty():
        try:
            rows.append(q.get(timeout=1))
        except Exception:  # queue.Empty
            pass
    p.join()
    if p.exitcode:
        raise SystemExit(f"{fn.__name__}({prefix!r}) failed with exit code {p.exitcode}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/scale.json")
    ap.add_argument("--corpora", nargs="+", default=["", "env-"], help="toolbench-<prefix><group>")
    args = ap.parse_args()
    result = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "loadavg_start": os.getloadavg()}, "k": K, "rows": []}
    for prefix in args.corpora:
        for fn in (run_bm25, run_dense):
            rows = _in_child(fn, prefix)
            for row in rows:
                row["corpus"] = f"toolbench-{prefix}*"
            result["rows"] += rows
            print(json.dumps(rows), flush=True)
    small = {(r["method"], r["index"]): r for r in result["rows"] if r["corpus"] == "toolbench-*"}
    for r in result["rows"]:
        ref = small.get((r["method"], r["index"]))
        if r["corpus"] != "toolbench-*" and ref:
            r["p50_ratio_vs_2479"] = round(r["p50_ms"] / ref["p50_ms"], 2)
    result["machine"]["loadavg_end"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
