"""Evaluate one retriever on one catalog: rankings -> per-query metrics -> the evaluation JSON.

The JSON (written by ``toolret evaluate`` and the ``evaluate`` DVC stages) holds ``dataset``,
``method``, ``docs``, ``n_queries``, ``metrics`` (fractions), ``ci95`` (bootstrap, same keys),
``latency_ms`` (p50/p95 of single-query searches) and ``provenance``. The per-query table goes to a
JSONL beside it (query id, every metric, top-10 ranked ids, gold ids).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.atomic import atomic_path, write_json
from toolret.catalog.model import Catalog, CatalogError
from toolret.retrieval.base import Ranking, Retriever

LATENCY_SAMPLE = 100  # queries timed one at a time for p50/p95 latency


def rank_split(retriever: Retriever, catalog: Catalog, split: str, k: int) -> Ranking:
    queries = catalog.split(split)
    if not queries:
        raise CatalogError(f"dataset {catalog.name!r} has no judged queries in split {split!r}")
    return retriever.search([q.text for q in queries], k, [q.id for q in queries])


def single_query_latency_ms(retriever: Retriever, texts: Sequence[str], k: int, sample: int = LATENCY_SAMPLE) -> dict[str, float]:
    """p50/p95 wall time (ms) of searching one query at a time, on the first ``sample`` queries."""
    times = []
    for text in list(texts)[:sample]:
        t0 = time.perf_counter()
        retriever.search([text], k)
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50": float(np.percentile(times, 50)), "p95": float(np.percentile(times, 95)), "n": len(times)}


def score_ranking(ranking: Ranking, catalog: Catalog, ks: Sequence[int], bootstrap_samples: int = 1000,
                  seed: int = 13) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Metrics, CIs and per-query rows of a ranking against the catalog's qrels."""
    from toolret.metrics import aggregate, bootstrap_cis, per_query_metrics

    ranked = ranking.as_lists()
    gold = {q: catalog.gold(q) for q in ranking.query_ids}
    qids, per_query = per_query_metrics(ranked, gold, ks)
    metrics = aggregate(per_query)
    cis = bootstrap_cis(per_query, n_samples=bootstrap_samples, seed=seed)
    rows = [{"query_id": q, **{m: float(v[i]) for m, v in per_query.items()},
             "ranked": ranked[q][:10], "gold": sorted(gold[q])} for i, q in enumerate(qids)]
    return {"n_queries": len(qids), "metrics": metrics, "ci95": {m: list(map(float, ci)) for m, ci in cis.items()}}, rows


def evaluate_retriever(retriever: Retriever, catalog: Catalog, *, method: str, docs: str, ks: Sequence[int],
                       k_max: int = 100, split: str = "test", bootstrap_samples: int = 1000, seed: int = 13,
                       provenance: dict[str, Any] | None = None, measure_latency: bool = True,
                       ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Search the split with an already indexed retriever and score it."""
    k = max(k_max, max(ks))
    t0 = time.perf_counter()
    ranking = rank_split(retriever, catalog, split, k)
    search_s = time.perf_counter() - t0
    scores, rows = score_ranking(ranking, catalog, ks, bootstrap_samples, seed)
    texts = [q.text for q in catalog.split(split)]
    result = {
        "dataset": catalog.name, "method": method, "docs": docs, "split": split, **scores,
        "latency_ms": single_query_latency_ms(retriever, texts, k) if measure_latency else None,
        "batch_search_s": search_s,
        "provenance": provenance or {},
    }
    return result, rows


def write_result(result: dict[str, Any], rows: list[dict[str, Any]], output: str | Path) -> tuple[Path, Path]:
    """Write ``output`` (JSON) and ``<output stem>.per_query.jsonl`` atomically."""
    output = Path(output)
    per_query = output.with_name(output.name.removesuffix(".json") + ".per_query.jsonl")
    with atomic_path(per_query) as tmp:
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    write_json(output, result)
    return output, per_query


def provenance(catalog: Catalog, params: dict[str, Any], artifacts: dict[str, str] | None = None) -> dict[str, Any]:
    from toolret.config import project_dir
    from toolret.tracking.provenance import git_state

    return {
        "git_sha": git_state(project_dir()).label,
        "params": params,
        "dataset_checksums": catalog.provenance.get("checksums", {}),
        "dataset_source": catalog.provenance.get("source"),
        "artifact_versions": artifacts or {},
    }
