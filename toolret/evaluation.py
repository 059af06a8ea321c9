"""Evaluate one retriever on one catalog: rankings -> per-query metrics -> the evaluation JSON.

The scoring is :func:`toolret.evaluate_api.evaluate` (a :class:`~toolret.evaluate_api.Run` of the ranking
against :func:`qrels_from_catalog`); this module adds the catalogue's side (query texts, tool names),
latency, provenance and the files.

The JSON (written by ``toolret evaluate`` and the ``evaluate`` DVC stages) holds ``dataset``,
``method``, ``docs``, ``n_queries``, ``n_tools`` (the corpus size searched), ``metrics`` (fractions),
``ci95`` (bootstrap, same keys), ``latency_ms`` (p50/p95 of single-query searches) and ``provenance``.
The per-query table goes to a JSONL beside it (query id, every metric, top-10 ranked ids, gold ids), the
whole ranking (top ``k_max`` with scores) to a TREC run file beside it (:func:`run_path_for`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolret.atomic import atomic_path, write_json
from toolret.catalog.model import Catalog
from toolret.errors import CatalogError
from toolret.retrieval.base import Ranking
from toolret.roles import Retriever

if TYPE_CHECKING:
    from toolret.evaluate_api import Qrels

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


def qrels_from_catalog(catalog: Catalog, query_ids: Sequence[str] | None = None) -> Qrels:
    """The catalogue's gold as :class:`~toolret.evaluate_api.Qrels` (relevance 1 per gold tool).

    ``query_ids`` (default: every query with judgements) are the queries, in that order; one without
    gold gets an empty judgement (``evaluate`` skips it). The adapter lives here, not in
    :mod:`toolret.evaluate_api`, so that the evaluation API imports no catalogue code.
    """
    from toolret.evaluate_api import Qrels

    qids = list(catalog.qrels) if query_ids is None else list(query_ids)
    return Qrels.from_gold({q: catalog.gold(q) for q in qids})


def score_ranking(ranking: Ranking, catalog: Catalog, ks: Sequence[int], bootstrap_samples: int = 1000,
                  seed: int = 13) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Metrics, CIs and per-query rows of a ranking against the catalog's qrels
    (:func:`toolret.evaluate_api.evaluate` of the ranking's run and the catalogue's gold)."""
    from toolret.evaluate_api import Run, evaluate

    run = Run.from_ranking(ranking)
    qrels = qrels_from_catalog(catalog, ranking.query_ids)
    res = evaluate(run, qrels, ks=ks, bootstrap_samples=bootstrap_samples, seed=seed)
    text = {q.id: q.text for q in catalog.queries}

    def name(tool_id: str) -> str:
        tool = catalog.tools[catalog.tool_position(tool_id)]
        return f"{tool.tool}/{tool.name}" if tool.tool and tool.tool != tool.name else tool.name

    rows = []
    for i, q in enumerate(res.query_ids):
        gold, ranked = sorted(qrels.gold(q)), list(run[q])
        rows.append({"query_id": q, "query": text.get(q, ""), **{m: float(v[i]) for m, v in res.per_query.items()},
                     "ranked": ranked[:10], "gold": gold, "gold_names": [name(t) for t in gold],
                     "top5_names": [name(t) for t in ranked[:5]]})
    return {"n_queries": len(res.query_ids), "metrics": res.means,
            "ci95": {m: list(map(float, ci)) for m, ci in res.ci.items()}}, rows


def evaluate_retriever(retriever: Retriever, catalog: Catalog, *, method: str, docs: str, ks: Sequence[int],
                       k_max: int = 100, split: str = "test", bootstrap_samples: int = 1000, seed: int = 13,
                       provenance: dict[str, Any] | None = None, measure_latency: bool = True,
                       run_path: str | Path | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Search the split with an already indexed retriever and score it; with ``run_path``, the ranking is
    also written there as a TREC run file tagged ``method``."""
    k = max(k_max, max(ks))
    t0 = time.perf_counter()
    ranking = rank_split(retriever, catalog, split, k)
    search_s = time.perf_counter() - t0
    if run_path is not None:
        from toolret.evaluate_api import Run

        Run.from_ranking(ranking).to_trec(run_path, tag=method)
    scores, rows = score_ranking(ranking, catalog, ks, bootstrap_samples, seed)
    texts = [q.text for q in catalog.split(split)]
    result = {
        "dataset": catalog.name, "method": method, "docs": docs, "split": split, **scores,
        "n_tools": len(catalog.tools),
        "latency_ms": single_query_latency_ms(retriever, texts, k) if measure_latency else None,
        "batch_search_s": search_s,
        "provenance": provenance or {},
    }
    return result, rows


# Fields of a result that change from one run of the same inputs to the next (timings, the git sha,
# the full params dump). DVC-tracked results keep them out of the JSON, in the run-info sidecar.
VOLATILE_KEYS = ("latency_ms", "batch_search_s", "index_build_s")
VOLATILE_PROVENANCE_KEYS = ("git_sha", "params", "params_file")


def run_info_path(artifact: str | Path) -> Path:
    """The untracked run-info sidecar of an artifact (timings, git sha, params, cache hits).

    ``<project>/data/<rest>`` -> ``<project>/data/run_info/<rest>`` (outside every DVC output, so it never
    changes an output's md5), e.g. ``data/runs/<ds>/<method>/<docs>.json`` ->
    ``data/run_info/runs/<ds>/<method>/<docs>.json``; a file outside a ``data/`` folder ->
    ``<stem>.run_info.json`` beside it.
    """
    p = Path(artifact).resolve()
    parts = p.parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "data":
            if len(parts) > i + 1 and parts[i + 1] == "run_info":
                return p
            name = parts[-1] if parts[-1].endswith(".json") else parts[-1] + ".json"
            return Path(*parts[:i + 1], "run_info", *parts[i + 1:-1], name)
    return p.with_name(p.name.removesuffix(".json") + ".run_info.json")


def split_volatile(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(deterministic result, run info)``: timings, git sha and params move to the run info."""
    stable = {k: v for k, v in result.items() if k not in VOLATILE_KEYS}
    info = {k: result[k] for k in VOLATILE_KEYS if k in result}
    prov = dict(result.get("provenance") or {})
    info["provenance"] = {k: prov.pop(k) for k in VOLATILE_PROVENANCE_KEYS if k in prov}
    stable["provenance"] = prov
    return stable, info


def load_run_info(result_json: str | Path) -> dict[str, Any]:
    """The sidecar of a result (``{}`` when absent, e.g. after ``dvc pull`` on a fresh clone)."""
    path = run_info_path(result_json)
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def run_path_for(result_json: str | Path) -> Path:
    """The TREC run file beside a result JSON: ``<stem>.run.trec``."""
    result_json = Path(result_json)
    return result_json.with_name(result_json.name.removesuffix(".json") + ".run.trec")


def write_result(result: dict[str, Any], rows: list[dict[str, Any]], output: str | Path, *,
                 run_info_to: str | Path | None = None) -> tuple[Path, Path]:
    """Write ``output`` (JSON) and ``<output stem>.per_query.jsonl`` atomically.

    With ``run_info_to`` (the result's final path, for outputs first written into a temporary
    directory) the volatile fields go to :func:`run_info_path` of it instead of into the JSON, so the
    JSON depends only on the inputs (a DVC output re-run gives the same md5).
    """
    output = Path(output)
    per_query = output.with_name(output.name.removesuffix(".json") + ".per_query.jsonl")
    if run_info_to is not None:
        result, info = split_volatile(result)
        write_json(run_info_path(run_info_to), info)
    with atomic_path(per_query) as tmp:
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    write_json(output, result)
    return output, per_query


def provenance(catalog: Catalog, params: dict[str, Any], artifacts: dict[str, str] | None = None) -> dict[str, Any]:
    from toolret.paths import project_dir
    from toolret.provenance import git_state

    return {
        "git_sha": git_state(project_dir()).label,
        "params": params,
        "dataset_checksums": catalog.provenance.get("checksums", {}),
        "dataset_source": catalog.provenance.get("source"),
        "artifact_versions": artifacts or {},
    }


GRID_TEST_METRICS = ("ndcg@5", "recall@5", "comp@5")


def grid_summary(dataset: str, grid_key: str, grid: dict[str, Any],
                 results: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
    """Metrics, CIs and component stats of every grid row, each paired-tested (randomization test,
    seeded) against its ``baseline`` row on the same queries."""
    from toolret.metrics import paired_test

    per_query = {name: {m: np.array([r[m] for r in rows]) for m in GRID_TEST_METRICS if rows and m in rows[0]}
                 for name, (_, rows) in results.items()}
    out: dict[str, Any] = {"dataset": dataset, "grid": grid_key, "variants": {}}
    for name, (result, _) in results.items():
        variant = grid[name]
        row = {"method": variant.method, "set": dict(variant.set), "baseline": variant.baseline,
               "metrics": result["metrics"], "ci95": result["ci95"], "components": result.get("components", {})}
        base = variant.baseline
        if base and base != name and base in per_query:
            row["vs_baseline"] = {m: {**paired_test(per_query[name][m], per_query[base][m], method="randomization",
                                                    seed=13), "baseline": base} for m in per_query[name]}
        out["variants"][name] = row
    return out
