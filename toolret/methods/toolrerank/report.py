"""The ToolRerank report (``docs/toolrerank_results.md``): paper-shaped tables from the evaluation grids.

Reads ``<runs>/<ds>/toolrerank-ablations/summary.json`` and the rows' ``*.per_query.jsonl`` (written by ``toolret
evaluate-grid --grid toolrerank.ablations``), the artifact's ``seen.json`` / ``toolrerank.json`` and the
catalogs (for each query's gold APIs and type). Which column of the paper a dataset is compared with
is ``params.toolrerank.paper_columns``, the paper's numbers ``results/matrix/toolrerank.yaml: papers`` (no dataset names or
paper numbers here; :mod:`toolret.grid_report`). Writes:

- the main table (paper Table 3 shape): NDCG@5 / Recall@5 of BM25, the first stage, Rerank-10/30/50 and
  ToolRerank per dataset, with the paper's numbers;
- the target check: ToolRerank vs the best of BM25 / first stage / Rerank-m per dataset (paired
  randomization test on per-query Recall@5);
- seen / unseen / mixed breakdown (a query is seen when all its gold APIs occur in the training data);
- every ablation row (hierarchy: Table 6, extended list: Table 7, truncation: Table 5) with its paired test;
- the query-type classifier's accuracy per dataset and the artifact's dev selection;
- a fenced JSON block with every number shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.catalog.datasets import load_dataset
from toolret.grid_report import (format_p, markdown_table, paired, paper_numbers, per_query, read_variants,
                                 write_report_file)
from toolret.methods.toolrerank import artifact_path
from toolret.methods.toolrerank.classifier import QueryTypeClassifier
from toolret.methods.toolrerank.hierarchy import is_multi_tool
from toolret.methods.toolrerank.training import artifact_complete, read_report, read_seen
from toolret.paths import project_dir

MAIN_ROWS = [("bm25", "BM25"), ("dense", "dense (MiniLM zero-shot)"), ("hybrid", "hybrid (BM25 + dense)"),
             ("first_stage", "first stage (toolrerank.first_stage)"), ("rerank-10", "Rerank-10"),
             ("rerank-30", "Rerank-30"), ("rerank-50", "Rerank-50"), ("toolrerank", "**ToolRerank**")]
# the target: ToolRerank above the best untrained retriever and the best Rerank-m (rows absent from a grid are skipped)
BASELINES = ("bm25", "dense", "hybrid", "rerank-10", "rerank-30", "rerank-50")
ABLATIONS = [("toolrerank_paper", "reranked order alone (ce_weight 1.0, the paper)"),
             ("intent_views", "cross-encoder scores the query's Re-Invoke intents (max over query + intents)"),
             ("rerank-10_intent_views", "Rerank-10 over the query's intents (vs Rerank-10)"),
             ("out_of_domain", "cross-encoder trained on ToolLens (out of domain)"),
             ("composed_toollens_mixed", "ToolLens train queries mixed into the composed training"),
             ("generator_1_5b", "single-API training queries by the 1.5B generator (multi-API: the 0.5B's)"),
             *((f"generator_1_5b_rerank-{m}", f"Rerank-{m} with the 1.5B-trained cross-encoder (vs Rerank-{m})")
               for m in (10, 30, 50)),
             ("not_composed", "no composed requests in training (the filtered catalog alone)"),
             ("not_composed_intent_views", "no composed requests, scoring the intents (vs no composed requests)"),
             ("unfiltered", "no composed requests, training queries not filtered (vs no composed requests)"),
             ("unfiltered_intent_views", "no composed requests, not filtered, intents (vs the same, filtered)"),
             ("toollens_mixed", "no composed requests, ToolLens train queries mixed in (vs no composed requests)"),
             ("untrained_first_stage", "no composed requests, untrained hybrid first stage (vs no composed requests)"),
             ("hier_none", "hierarchy: none (truncation + cross-encoder)"),
             ("hier_single", "hierarchy: Alg. 1 for all"),
             ("hier_multi", "hierarchy: Alg. 2 for all"), ("hier_oracle", "hierarchy: oracle query type"),
             ("ext_none", "extended list: off"), ("ext_both", "extended list: seen and unseen tools"),
             ("ext_seen_only", "extended list: seen tools only"),
             ("trunc_10_10", "m_s = m_u = 10"), ("trunc_30_30", "m_s = m_u = 30"), ("trunc_50_50", "m_s = m_u = 50"),
             ("trunc_10_30", "m_s 10, m_u 30"), ("trunc_30_50", "m_s 30, m_u 50"), ("trunc_50_10", "m_s 50 > m_u 10")]
ABLATION_ROWS = {row for row, _ in ABLATIONS}


def _query_groups(catalog, seen) -> dict[str, str]:
    """Query id -> ``seen`` (every gold API seen), ``unseen`` (none) or ``mixed``."""
    out = {}
    for q in catalog.split("test"):
        flags = [seen.api_seen(catalog.tools[catalog.tool_position(t)]) for t in catalog.gold(q.id)]
        out[q.id] = "seen" if all(flags) else ("unseen" if not any(flags) else "mixed")
    return out


def dataset_data(runs: Path, ds: str, catalog, seen, classifier) -> dict[str, Any] | None:
    run_dir = runs / ds / "toolrerank-ablations"
    variants = read_variants(run_dir)
    if variants is None:
        return None
    pq = {row: per_query(run_dir, row) for row in variants}
    groups = _query_groups(catalog, seen)
    data: dict[str, Any] = {"rows": {}, "groups": {g: sum(v == g for v in groups.values()) for g in ("seen", "unseen", "mixed")}}
    for row, v in variants.items():
        by_group = {}
        for g in ("seen", "unseen", "mixed"):
            vals = [r["recall@5"] for q, r in pq[row].items() if groups.get(q) == g]
            by_group[g] = float(np.mean(vals)) if vals else None
        data["rows"][row] = {"metrics": {m: v["metrics"].get(m) for m in ("ndcg@5", "recall@5", "comp@5")},
                             "ci95": {m: v["ci95"].get(m) for m in ("ndcg@5", "recall@5")}, "recall@5_by_group": by_group,
                             "vs_baseline": {m: v["vs_baseline"][m] for m in ("recall@5", "ndcg@5")
                                             if v.get("vs_baseline", {}).get(m)} or None,
                             "components": v.get("components")}
    present = [b for b in BASELINES if b in data["rows"]]
    if "toolrerank" in data["rows"] and present:
        best = max(present, key=lambda b: data["rows"][b]["metrics"]["recall@5"])
        test = paired(pq["toolrerank"], pq[best], "recall@5")
        data["target"] = {"best_baseline": best, "toolrerank": data["rows"]["toolrerank"]["metrics"]["recall@5"],
                          "baseline": data["rows"][best]["metrics"]["recall@5"], "test": test}
    if classifier is not None:
        qs = catalog.split("test")
        pred = classifier.predict_multi([q.text for q in qs])
        gold = np.array([is_multi_tool(catalog, q.id) for q in qs])
        data["classifier"] = {"accuracy": float((pred == gold).mean()), "multi_fraction_gold": float(gold.mean()),
                              "multi_fraction_predicted": float(pred.mean())}
    return data


def _main_table(data: dict[str, Any], columns: dict[str, str], paper: dict[str, dict[str, Any]]) -> list[str]:
    def cell(ds: str, row: str) -> str:
        r = data[ds]["rows"].get(row)
        out = f"{100 * r['metrics']['ndcg@5']:.1f} / {100 * r['metrics']['recall@5']:.1f}" if r else "-"
        col = paper.get(columns.get(ds, ""), {})
        pn, pr = col.get(f"{row}.ndcg@5"), col.get(f"{row}.recall@5")
        return out + (f" (paper {pn:.1f} / {pr:.1f})" if pn is not None and pr is not None else "")

    return markdown_table(["method", *(f"{ds} ({columns.get(ds, '-')}) N@5 / R@5" for ds in data)],
                          ([label, *(cell(ds, row) for ds in data)] for row, label in MAIN_ROWS))


def write_report(runs: Path, datasets: Sequence[str], out: Path, *, params, notes: str | None = None) -> Path:
    section = params.toolrerank
    artifact = artifact_path(section)
    seen = read_seen(artifact, section.seen_level)
    classifier = QueryTypeClassifier.load(artifact) if artifact_complete(artifact) else None
    p = params
    data: dict[str, Any] = {}
    for ds in datasets:
        catalog = load_dataset(ds, root=p.source.root, beir=p.source.beir, dev_fraction=p.catalog.dev_fraction,
                               seed=p.catalog.seed, project_dir=project_dir())
        d = dataset_data(Path(runs), ds, catalog, seen, classifier)
        if d is not None:
            data[ds] = d
    columns = dict(section.paper_columns)
    paper = paper_numbers("toolrerank")
    art = read_report(artifact)
    shown = artifact.relative_to(project_dir()) if artifact.is_relative_to(project_dir()) else artifact
    lines = ["# ToolRerank results", "",
             f"Generated by `toolret report-ablations --method toolrerank` from `data/runs/<ds>/toolrerank-ablations/` "
             f"(`toolret evaluate-grid --grid toolrerank.ablations`). Numbers in %. Artifact: `{shown}` "
             f"(trained on {art['train_dataset']}: {art['n_train_queries']} training queries, "
             f"{art['cross_encoder']['n_examples']} training rows ({art['cross_encoder']['loss']} loss); dev grid on "
             f"{art['n_dev_queries']} dev queries; selected "
             f"{art['selected']}, paper best 10 / 50 / 0.85 / 0.7 / 3).", ""]
    missing = [ds for ds in datasets if ds not in data]
    if missing:  # a group whose grid has not run against this artifact here: named, not shown with older numbers
        lines += [f"Not run against this artifact yet: {', '.join(missing)} (`dvc repro -s "
                  f"toolrerank_ablations@<group>`); their ToolRerank rows are in the records "
                  f"`results/records/<group>/toolrerank.json`.", ""]
    lines += ["## Main table (paper Table 3 shape)", "", *_main_table(data, columns, paper), ""]
    targets = [(ds, d["target"]) for ds, d in data.items() if d.get("target")]
    lines += ["## Target: ToolRerank vs the best of BM25, dense, hybrid and Rerank-m (Recall@5, paired randomization test)",
              "", *markdown_table(
                  ["dataset", "best baseline", "its R@5", "ToolRerank R@5", "Δ", "p"],
                  ([ds, t["best_baseline"], f"{100 * t['baseline']:.1f}", f"{100 * t['toolrerank']:.1f}",
                    f"{100 * (t['toolrerank'] - t['baseline']):+.1f}", format_p(t["test"]["p_value"])]
                   for ds, t in targets))]

    def group_cells(d: dict[str, Any], g: str) -> list[str]:
        values = [(d["rows"].get(row) or {}).get("recall@5_by_group", {}).get(g) for row, _ in MAIN_ROWS]
        return [f"{100 * v:.1f}" if v is not None else "-" for v in values]

    lines += ["", "## Seen / unseen (Recall@5 by query group; seen = every gold API occurs in the training data)", "",
              *markdown_table(["dataset (query group)", "queries", *(lab for _, lab in MAIN_ROWS)],
                              ([f"{ds} ({g})", d["groups"][g], *group_cells(d, g)]
                               for ds, d in data.items() for g in ("seen", "unseen", "mixed") if d["groups"][g]))]

    def ablation_cell(row: str, ds: str) -> str:
        r = data[ds]["rows"].get(row)
        if not r:
            return "-"
        c = f"{100 * r['metrics']['recall@5']:.1f}"
        vb = (r.get("vs_baseline") or {}).get("recall@5")
        if vb and row != "toolrerank":
            c += f" (p {format_p(vb['p_value'])})"
        pv = paper.get(columns.get(ds, ""), {}).get(f"{row}.recall@5") if row in ABLATION_ROWS else None
        return c + (f" [paper {pv:.1f}]" if pv is not None else "")

    ran = [(row, label) for row, label in
           [("toolrerank", "ToolRerank (classifier, extended list for unseen tools, dev-selected m)"), *ABLATIONS]
           if any(row in d["rows"] for d in data.values())]  # rows of the grid that were run
    lines += ["", "## Ablations (Recall@5; p: paired randomization test vs the row's baseline -- ToolRerank unless the "
              "label says; paper: Tables 5-7)", "",
              *markdown_table(["variant", *data], ([label, *(ablation_cell(row, ds) for ds in data)]
                                                   for row, label in ran))]
    classified = [(ds, d["classifier"]) for ds, d in data.items() if d.get("classifier")]
    lines += ["", "## Query-type classifier (test queries; multi-tool = gold APIs from more than one tool)", "",
              *markdown_table(["dataset", "accuracy", "gold multi-tool", "predicted multi-tool"],
                              ([ds, f"{100 * c['accuracy']:.1f}", f"{100 * c['multi_fraction_gold']:.1f}",
                                f"{100 * c['multi_fraction_predicted']:.1f}"] for ds, c in classified))]
    lines += dev_selection_lines(art["selected"], art["grid"].get("dev_baselines") or {})
    data = {**data, "dev_selection": {"selected": art["selected"], "dev": art["grid"].get("dev_baselines"),
                                      "by_truncation": art["grid"].get("by_truncation"),
                                      "classifier": art["classifier"], "cross_encoder": art["cross_encoder"],
                                      "seen": art["seen"]}}
    return write_report_file(out, "\n".join(lines), data, notes)


def dev_selection_lines(selected: dict, dev: dict) -> list[str]:
    """The dev grid's choice and the dev Recall@5 of each row as two small tables (the whole grid, the
    classifier and the cross-encoder's settings are in the report's JSON record, ``dev_selection``)."""
    return ["", "## Dev selection (the artifact's grid; never the test split)", "",
            *markdown_table(list(selected), [[str(v) for v in selected.values()]]), "",
            *markdown_table(["dev row", "Recall@5"], ([k, f"{100 * v:.1f}"] for k, v in dev.items())), ""]


__all__ = ["dataset_data", "dev_selection_lines", "write_report"]
