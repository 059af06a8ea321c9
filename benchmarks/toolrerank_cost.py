"""Reranking cost of ToolRerank vs plain ``CrossEncoder.predict`` over the same first-stage candidates.

For N test queries of a catalog, one query at a time (what an agent waits for), with the trained
ToolRerank artifact and its dense first stage (the first stage itself is not timed):

- ``plain``: ``CrossEncoder.predict`` on the query's top ``candidates`` (Rerank-50's cost), sorted;
- ``toolrerank``: the ``toolrerank-ce`` component's ``rerank`` (adaptive truncation, query-type classifier,
  cross-encoder on T, Alg. 1 with the extended list / Alg. 2), score cache off and memo cleared per query;
- ``plain_int8``: the same predict after PyTorch dynamic int8 quantisation of the cross-encoder's Linear
  layers (``torch.ao.quantization.quantize_dynamic``), with its max score difference and top-5 agreement.

Prints and writes JSON: ms/query (mean, p50, p95), pairs scored per query, ratios toolrerank / plain and
int8 / plain. Usage: ``python benchmarks/toolrerank_cost.py [--dataset toolbench-g1-tool] [--queries 30]
[--threads 1] [--out benchmarks/results/toolrerank_cost.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _stats(ms: list[float]) -> dict[str, float]:
    return {"mean_ms": float(np.mean(ms)), "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="toolbench-g1-tool")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/results/toolrerank_cost.json")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from toolret.catalog.datasets import load_dataset
    from toolret.config import apply_overrides, load_params
    from toolret.methods.toolrerank.crossencoder import load_cross_encoder
    from toolret.paths import project_dir
    from toolret.pipeline import build_pipeline
    from toolret.roles import Ranking
    from toolret.roles import Corpus

    params = apply_overrides(load_params(), {"toolrerank.score_cache": "off"})
    p = params
    catalog = load_dataset(args.dataset, root=p.source.root, beir=p.source.beir, dev_fraction=p.catalog.dev_fraction,
                           seed=p.catalog.seed, project_dir=project_dir())
    pipe = build_pipeline("toolrerank", catalog, params)
    pipe.fit(catalog)  # trains the artifact if absent (not timed here: run toolrerank_train first)
    pipe.index(Corpus.from_catalog(catalog))
    reranker = pipe.rerankers[0]
    cfg = reranker.config
    queries = [q.text for q in catalog.split("test")][: args.queries]
    first = pipe.retriever.search(queries, cfg.candidates)
    docs = reranker.documents
    reranker.embeddings()  # the document embeddings of Alg. 2 are index-time work
    reranker.query_modes(queries[:1])  # load the classifier once
    ce = reranker.scorer.model
    plain_top5, plain_ms, tr_ms, tr_pairs = [], [], [], []
    for r, q in enumerate(queries):
        cands = [int(i) for i in first.indices[r] if i >= 0]
        pairs = [(q, docs[c]) for c in cands]
        t0 = time.perf_counter()
        s = ce.predict(pairs, batch_size=cfg.batch_size_predict, show_progress_bar=False)
        order = np.argsort(-s, kind="stable")
        plain_ms.append((time.perf_counter() - t0) * 1000)
        plain_top5.append([cands[i] for i in order[:5]])
        one = Ranking([str(r)], first.tool_ids, first.indices[r: r + 1], first.scores[r: r + 1])
        reranker.scorer._memo.clear()
        before = reranker.scorer.stats["pairs_scored"]
        t0 = time.perf_counter()
        reranker.rerank([q], one, 10)
        tr_ms.append((time.perf_counter() - t0) * 1000)
        tr_pairs.append(reranker.scorer.stats["pairs_scored"] - before)

    q8 = load_cross_encoder(reranker.artifact / "model", cfg.max_length, cfg.device)
    torch.ao.quantization.quantize_dynamic(q8, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    int8_ms, diffs, agree = [], [], []
    for r, q in enumerate(queries):
        cands = [int(i) for i in first.indices[r] if i >= 0]
        pairs = [(q, docs[c]) for c in cands]
        ref = ce.predict(pairs, batch_size=cfg.batch_size_predict, show_progress_bar=False)
        t0 = time.perf_counter()
        s = q8.predict(pairs, batch_size=cfg.batch_size_predict, show_progress_bar=False)
        order = np.argsort(-s, kind="stable")
        int8_ms.append((time.perf_counter() - t0) * 1000)
        diffs.append(float(np.max(np.abs(np.asarray(s) - np.asarray(ref)))))
        agree.append(len(set(cands[i] for i in order[:5]) & set(plain_top5[r])) / 5)

    out = {
        "dataset": catalog.name, "n_queries": len(queries), "threads": args.threads, "candidates": cfg.candidates,
        "max_length": cfg.max_length, "load_average_start": os.getloadavg(),
        "machine": platform.processor() or platform.machine(),
        "plain_cross_encoder": {**_stats(plain_ms),
                                "pairs_per_query": float(np.mean([(row >= 0).sum() for row in first.indices]))},
        "toolrerank": {**_stats(tr_ms), "pairs_per_query": float(np.mean(tr_pairs)),
                       "setting": reranker.stats.get("setting")},
        "plain_int8": {**_stats(int8_ms), "max_abs_score_diff": float(np.max(diffs)),
                       "top5_agreement": float(np.mean(agree))},
    }
    out["ratio_toolrerank_vs_plain"] = out["toolrerank"]["mean_ms"] / out["plain_cross_encoder"]["mean_ms"]
    out["ratio_int8_vs_plain"] = out["plain_int8"]["mean_ms"] / out["plain_cross_encoder"]["mean_ms"]
    text = json.dumps(out, indent=2)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
