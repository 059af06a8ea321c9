"""Does a trained ToolRerank cross-encoder separate gold APIs from the negatives a reranker meets?

For held-out dev queries (never trained on; the test split is not read) three kinds of (query, API) pairs
are scored: gold, hard (non-gold APIs of the first stage's top ``depth``) and random (uniform non-gold). The
result is the AUC of each separation (the Mann-Whitney U statistic over ``|a| |b|``, ties counted half),
for the cross-encoder and, as the reference, for the cosine of the ``dense`` bi-encoder (the default first
stage). A reranker worth its cost separates gold from hard better than the first stage does (whose
gold-vs-hard AUC is near or below 0.5 by construction) without losing the gold-vs-random separation; an AUC
of hard vs random below 0.5 means the cross-encoder prefers random APIs to the query's close neighbours --
it learned which APIs tend to be gold, not relevance.

``toolret reranker-separation --dataset toollens --artifact data/models/toollens/toolrerank [--queries 200]``
(a subcommand the ToolRerank method contributes, :func:`separation_command`) prints the JSON.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.errors import CatalogError
from toolret.methods.toolrerank.crossencoder import CrossEncoderScorer, hard_negative_pool
from toolret.methods.toolrerank.training import first_stage, read_report, sample_queries
from toolret.retrieval.dense import DenseRetriever


def separation_auc(a: Sequence[float], b: Sequence[float]) -> float:
    """P(score of a random ``a`` item > score of a random ``b`` item), ties counted half (scipy's U)."""
    from scipy.stats import mannwhitneyu

    if not len(a) or not len(b):
        raise ValueError("separation_auc needs at least one score on each side")
    return float(mannwhitneyu(a, b).statistic / (len(a) * len(b)))


def separation_pairs(catalog, retriever, n_queries: int, seed: int, depth: int = 30, per_query: int = 3,
                     docs: str = "original") -> dict[str, list[tuple[str, str]]]:
    """Gold, hard and random (query, document) pairs for ``n_queries`` seeded dev queries."""

    dev = sample_queries(catalog.split("dev"), n_queries, seed)
    if not dev:
        raise CatalogError(f"{catalog.name}: no dev split to diagnose the cross-encoder on")
    documents = catalog.docs(docs)
    pos = {t: i for i, t in enumerate(catalog.tool_ids)}
    ranked = retriever.search([q.text for q in dev], depth).indices
    rng = random.Random(seed)
    pairs: dict[str, list[tuple[str, str]]] = {"gold": [], "hard": [], "random": []}
    for q, row in zip(dev, ranked):
        gold = {pos[t] for t in catalog.gold(q.id)}
        hard = hard_negative_pool([int(t) for t in row], gold, depth)
        rest = [t for t in range(len(documents)) if t not in gold]
        pairs["gold"] += [(q.text, documents[t]) for t in sorted(gold)]
        pairs["hard"] += [(q.text, documents[t]) for t in rng.sample(hard, min(per_query, len(hard)))]
        pairs["random"] += [(q.text, documents[t]) for t in rng.sample(rest, min(per_query, len(rest)))]
    return pairs


def _aucs(scores: dict[str, np.ndarray]) -> dict[str, float]:
    return {"gold_vs_hard": separation_auc(scores["gold"], scores["hard"]),
            "gold_vs_random": separation_auc(scores["gold"], scores["random"]),
            "hard_vs_random": separation_auc(scores["hard"], scores["random"])}


def diagnose(catalog, artifact: str | Path, params, n_queries: int = 200, seed: int = 99) -> dict[str, Any]:
    """Cross-encoder and first-stage AUCs on ``n_queries`` dev queries of ``catalog``."""

    cfg = params.toolrerank.component_config()
    report = read_report(artifact)
    docs = report.get("docs", "original")
    retriever = first_stage(catalog, cfg, params, docs)
    pairs = separation_pairs(catalog, retriever, n_queries, seed, docs=docs)
    scorer = CrossEncoderScorer(Path(artifact) / "model", report["config"]["max_length"], cache="off")
    ce = {k: scorer.score_pairs(v, progress=True) for k, v in pairs.items()}
    # the reference cosine is the dense bi-encoder's: the first stage's own model when it is dense
    encoder = retriever if type(retriever) is DenseRetriever else DenseRetriever(params.dense)

    every = [p for pp in pairs.values() for p in pp]
    queries = list(dict.fromkeys(p[0] for p in every))  # each query / document encoded once for all kinds
    documents = list(dict.fromkeys(p[1] for p in every))
    q_emb = dict(zip(queries, encoder.encode(queries)))
    d_emb = dict(zip(documents, encoder.encode_documents(documents)))
    bi = {k: np.array([float(q_emb[q] @ d_emb[d]) for q, d in v]) for k, v in pairs.items()}
    return {"dataset": catalog.name, "artifact": str(artifact), "dev_queries": n_queries, "seed": seed,
            "n_pairs": {k: len(v) for k, v in pairs.items()},
            "cross_encoder": {"auc": _aucs(ce), "mean_score": {k: float(v.mean()) for k, v in ce.items()}},
            "dense_cosine": {"auc": _aucs(bi)}}


def separation_command(args, params, catalog) -> None:
    """``toolret reranker-separation``: :func:`diagnose` of ``--artifact`` on the catalog, JSON on stdout."""
    import json

    print(json.dumps(diagnose(catalog, args.artifact, params, args.queries, args.seed)))
