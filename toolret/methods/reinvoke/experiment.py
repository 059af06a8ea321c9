"""Evaluate Re-Invoke, its ablations (paper Table 3) and HyDE from the generated artifacts.

Writes, under ``<runs>/<dataset>/`` (the layout of the platform's ``evaluate`` stage):

- ``reinvoke/<docs>.json``, ``reinvoke-bm25/<docs>.json``, ``hyde/<docs>.json`` (+ ``.per_query.jsonl``),
  in :func:`toolret.evaluation.write_result`'s format, for every document variant in ``docs``;
- ``reinvoke-ablations/<variant>.json`` (+ per-query) for every ablation in ``params.reinvoke.ablations``
  (document variant ``original``), and ``reinvoke-ablations/summary.json``: metrics, CIs, paired
  randomization tests against the ablation's baseline, round-trip consistency and parse statistics.

No LLM is loaded here: everything generated comes from the artifacts (so evaluating is cheap and
re-runnable). No setting is tuned on the test queries: the ablation grid is the paper's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.catalog.model import Catalog
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.retriever import HydeRetriever, MemoEncoder, ReInvokeRetriever

# Paper Table 3 (ToolE / ToolBench) as settings of ReInvokeConfig, run with the dense backbone; the
# query-generator studies (b)-(d) switch the intent extractor off, as in the paper ("query generator
# alone"). The bm25 rows repeat study (a) on the sparse backbone.
DEFAULT_ABLATIONS: dict[str, dict[str, Any]] = {
    "baseline": {"query_generator": False, "intent_extractor": False},
    "qgen": {"intent_extractor": False},
    "intent": {"query_generator": False},
    "qgen_intent": {},
    "qgen_synthetic_only": {"intent_extractor": False, "expansion": "synthetic_only"},
    "qgen_n1": {"intent_extractor": False, "n_queries": 1},
    "qgen_n5": {"intent_extractor": False, "n_queries": 5},
    "qgen_max": {"intent_extractor": False, "aggregation": "max"},
    "bm25_baseline": {"backbone": "bm25", "query_generator": False, "intent_extractor": False},
    "bm25_qgen": {"backbone": "bm25", "intent_extractor": False},
    "bm25_intent": {"backbone": "bm25", "query_generator": False},
    "bm25_qgen_intent": {"backbone": "bm25"},
}


def baseline_of(variant: str, overrides: dict[str, Any]) -> str:
    return "bm25_baseline" if overrides.get("backbone") == "bm25" else "baseline"


class Evaluator:
    """Shared state of one dataset's evaluation (catalogue, artifacts, memoised embeddings)."""

    def __init__(self, catalog: Catalog, params: dict[str, Any], synthetic: Sequence[dict] | None,
                 intents: Sequence[dict] | None, hyde: Sequence[dict] | None, split: str = "test",
                 encoder: MemoEncoder | None = None) -> None:
        from toolret.methods.reinvoke import _backbone_configs

        self.catalog, self.params, self.split = catalog, params, split
        self.base = ReInvokeConfig.from_params(params, dataset=catalog.name)
        self.dense_config, self.bm25_config = _backbone_configs(params, None)
        self.encoder = encoder or MemoEncoder.for_config(self.dense_config, self.base)
        self.synthetic = list(synthetic) if synthetic is not None else None
        self.intent_records = list(intents or [])
        self.intents = {r["text"]: r["intents"] for r in self.intent_records}
        self.hyde_records = list(hyde or [])
        self.hyde = {r["text"]: r["document"] for r in self.hyde_records}
        ev = params.get("evaluation", {}) or {}
        self.ks = ev.get("ks", [1, 3, 5, 10])
        self.k_max = ev.get("k_max", 100)
        self.bootstrap = ev.get("bootstrap_samples", 1000)
        self.seed = ev.get("seed", 13)

    def retriever(self, method: str, **overrides: Any):
        backbone = overrides.pop("backbone", "bm25" if method.endswith("-bm25") else "dense")
        cfg = self.base.replace(backbone=backbone, **overrides)
        kw = dict(dense_config=self.dense_config, bm25_config=self.bm25_config, encoder=self.encoder)
        if method.startswith("hyde"):
            return HydeRetriever(cfg, documents=self.hyde, name=method, **kw)
        return ReInvokeRetriever(cfg, synthetic=self.synthetic if cfg.query_generator else None,
                                 intents=self.intents, name=method, **kw)

    def evaluate(self, retriever, method: str, docs: str, output: Path, extra: dict[str, Any] | None = None):
        from toolret.evaluation import evaluate_retriever, provenance, write_result

        t0 = time.perf_counter()
        retriever.index(self.catalog.tool_ids, self.catalog.docs(docs))
        index_s = time.perf_counter() - t0
        result, rows = evaluate_retriever(retriever, self.catalog, method=method, docs=docs, ks=self.ks,
                                          k_max=self.k_max, split=self.split, bootstrap_samples=self.bootstrap,
                                          seed=self.seed, provenance=provenance(self.catalog, self.params))
        result["index_build_s"] = index_s
        result["reinvoke"] = {"config": retriever.config.to_dict(), "stats": dict(retriever.stats), **(extra or {})}
        write_result(result, rows, output)
        return result, rows


def run(catalog: Catalog, params: dict[str, Any], out_root: str | Path, *, synthetic: Sequence[dict] | None,
        intents: Sequence[dict] | None, hyde: Sequence[dict] | None, docs: Sequence[str] = ("original",),
        ablations: dict[str, dict[str, Any]] | None = None, split: str = "test",
        methods: Sequence[str] = ("reinvoke", "reinvoke-bm25", "hyde"), log=print,
        encoder: MemoEncoder | None = None) -> dict[str, Any]:
    """Evaluate everything for one dataset; returns the summary (also written to disk)."""
    from toolret.atomic import write_json
    from toolret.methods.reinvoke.generation import status_counts
    from toolret.metrics import paired_test
    from toolret.retrieval.dense import DenseRetriever
    from toolret.methods.reinvoke.roundtrip import round_trip_consistency

    out_root = Path(out_root)
    ev = Evaluator(catalog, params, synthetic, intents, hyde, split, encoder)
    if ablations is None:
        ablations = (params.get("reinvoke", {}) or {}).get("ablations") or DEFAULT_ABLATIONS
    summary: dict[str, Any] = {"dataset": catalog.name, "split": split, "config": ev.base.to_dict(),
                               "methods": {}, "ablations": {}}

    for method in methods:
        if method.startswith("hyde") and not ev.hyde:
            continue
        for d in docs:
            r, _ = ev.evaluate(ev.retriever(method), method, d, out_root / method / f"{d}.json")
            summary["methods"].setdefault(method, {})[d] = {"metrics": r["metrics"], "ci95": r["ci95"]}
            log(f"{catalog.name} {method} {d}: " + _fmt(r["metrics"]))

    per_query: dict[str, dict[str, np.ndarray]] = {}
    for name, overrides in ablations.items():
        overrides = dict(overrides or {})
        method = "reinvoke-bm25" if overrides.get("backbone") == "bm25" else "reinvoke"
        r, rows = ev.evaluate(ev.retriever(method, **overrides), f"{method}[{name}]", "original",
                              out_root / "reinvoke-ablations" / f"{name}.json",
                              {"ablation": name, "overrides": overrides})
        per_query[name] = {m: np.array([row[m] for row in rows]) for m in ("ndcg@5", "recall@5", "comp@5")}
        summary["ablations"][name] = {"overrides": overrides, "metrics": r["metrics"], "ci95": r["ci95"],
                                      "stats": r["reinvoke"]["stats"]}
        log(f"{catalog.name} ablation {name}: " + _fmt(r["metrics"]))
    for name, overrides in ablations.items():
        base = baseline_of(name, dict(overrides or {}))
        if base in per_query and name != base:
            summary["ablations"][name]["vs_baseline"] = {
                m: {**paired_test(per_query[name][m], per_query[base][m], method="randomization", seed=13),
                    "baseline": base} for m in per_query[name]}

    if synthetic:
        dense = DenseRetriever(ev.dense_config)
        dense.encode = lambda texts, show_progress=False: ev.encoder.encode(texts)  # the shared memo
        dense.index(catalog.tool_ids, catalog.docs("original"))
        n = ev.base.n_queries
        summary["round_trip"] = {"backbone": "dense", "docs": "original", "n_queries_per_tool": n,
                                 **round_trip_consistency(synthetic, dense, (1, 5, 10), n)}
        summary["synthetic_queries"] = status_counts(synthetic)
    if intents:
        summary["intents"] = {**status_counts(intents),
                              "mean_intents": float(np.mean([len(r["intents"]) for r in intents]))}
    if hyde:
        summary["hyde"] = status_counts(hyde)
    write_json(out_root / "reinvoke-ablations" / "summary.json", summary)
    return summary


def _fmt(metrics: dict[str, float]) -> str:
    return " ".join(f"{m}={metrics[m]:.4f}" for m in ("ndcg@5", "recall@5", "comp@5") if m in metrics)
