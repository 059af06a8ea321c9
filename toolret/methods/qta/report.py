"""The QTA report (``docs/qta_results.md``): every run of ``qta.runs`` (one fold each) and the mean over the
folds of each dataset, next to the paper's Table 2.

Reads ``<runs>/<run>/qta/summary.json`` (``toolret evaluate-grid --grid qta.grid``), the preference-data
meta ``data/qta/<run>/preferences.meta.json`` and the adapters' ``qta.json`` (+ run-info timings). The
paper's numbers come from ``results/matrix/qta.yaml: papers`` (no dataset names in this code; :mod:`toolret.grid_report`). Mean over folds: the mean
of the per-fold means, with a t-interval over folds (shown from 2 folds on); p: the paired randomization
test of each fold's grid row against its baseline (dense) on that fold's test queries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolret.evaluation import load_run_info
from toolret.grid_report import (ci_cell, format_p, mean_ci, p_value, paired, paper_numbers, per_query, read_json,
                                 read_variants, write_report_file)
from toolret.jsonl_artifacts import read_jsonl
from toolret.methods.qta.changes import change_counts, change_rows
from toolret.paths import data_dir

METRICS = ("comp@5", "comp@10", "ndcg@5")


def _copies(components: dict[str, Any]) -> str:
    """``"copies / rewritten"`` from a row's rewriter stats (``-``: the row has no rewriter, or predates the count)."""
    stats = next((v for v in components.values() if isinstance(v, dict) and "copies_query" in v), None)
    return f"{stats['copies_query']} / {stats['rewritten_queries']}" if stats else "-"


def run_section(runs: Path, run: str, artifacts: Path, models: Path) -> tuple[list[str], dict[str, Any]]:
    """One run of ``qta.runs``: its grid, preference data and adapters."""
    return grid_section(f"### {run}", runs / run / "qta", artifacts / run, models / run / "qta")


def grid_section(title: str, grid: Path, preferences: Path | None = None,
                 adapters: Path | None = None) -> tuple[list[str], dict[str, Any]]:
    """A grid's table (``grid``: its ``evaluate-grid`` folder), then the preference data (in ``preferences``)
    and the adapters (under ``adapters``) its trained rows use (each left out when ``None``)."""
    variants = read_variants(grid)
    lines = [title, "", "| row | n | " + " | ".join(f"{m} [95% CI]" for m in METRICS)
             + " | Δ comp@5 vs dense | p comp@5 | p ndcg@5 | test rewrites copying q |",
             "|---|---|" + "---|" * len(METRICS) + "---|---|---|---|"]
    data: dict[str, Any] = {"variants": {}}
    for name, row in variants.items():
        cells = [ci_cell(row["metrics"], row["ci95"], m) for m in METRICS]
        base = variants.get(row.get("baseline") or "", {}).get("metrics", {})
        delta = f"{row['metrics']['comp@5'] - base['comp@5']:+.3f}" if base and name != row.get("baseline") else "-"
        n = row.get("components", {})
        result = read_json(grid / f"{name}.json") or {}
        lines.append(f"| {name} | {result.get('n_queries', '')} | " + " | ".join(cells)
                     + f" | {delta} | {format_p(p_value(row, 'comp@5'))} | {format_p(p_value(row, 'ndcg@5'))} | "
                     + f"{_copies(n)} |")
        data["variants"][name] = {"metrics": {m: row["metrics"].get(m) for m in METRICS},
                                  "p_comp@5": p_value(row, "comp@5"), "p_ndcg@5": p_value(row, "ndcg@5"),
                                  "components": n}
    prefs = read_json(preferences / "preferences.meta.json") if preferences is not None else None
    if prefs:
        c = prefs.get("counts", {})
        lines += ["", f"Preference data: {c.get('records')} rounds, {c.get('pairs')} pairs "
                      f"({c.get('ties')} ties skipped); "
                      f"chosen {c.get('chosen')}; samples beating the original query: "
                      f"{c.get('samples_beating_query')}."]
        data["preferences"] = c
    for adapter in sorted(adapters.glob("m*/qta.json")) if adapters is not None and adapters.is_dir() else []:
        rep = json.loads(adapter.read_text(encoding="utf-8"))

        info = load_run_info(adapter)
        last = rep["history"][-1] if rep.get("history") else {}
        lines.append(f"Adapter {adapter.parent.name}: {rep['n_pairs']} pairs, {rep['steps']} DPO steps"
                     + (f", {info['train_seconds'] / 60:.1f} min ({info['seconds_per_step']} s/step)"
                        if info.get("train_seconds") else "")
                     + (f"; last step loss {last.get('loss', float('nan')):.3f}, reward margin "
                        f"{last.get('rewards/margins', float('nan')):.3f}, "
                        f"accuracy {last.get('rewards/accuracies', float('nan')):.2f}"
                        if last else "") + ".")
        data.setdefault("adapters", {})[adapter.parent.name] = {"n_pairs": rep["n_pairs"], "steps": rep["steps"],
                                                                "train_seconds": info.get("train_seconds")}
    return lines + [""], data


def pooled_rows(runs: Path, members: Sequence[str], metric: str = "comp@5", grid: str = "qta") -> list[dict[str, Any]]:
    """Each row of the grid (``<runs>/<run>/<grid>``) against its baseline pooled over ``members`` (runs): one pair
    per (run, test query), so a query that is a test query of several folds counts once per fold. The paired
    randomization test runs on the pooled pairs; ``n`` is their number."""
    rows: list[dict[str, Any]] = []
    variants = {run: read_variants(runs / run / grid) or {} for run in members}
    read: dict[str, dict[str, dict[str, Any]]] = {}  # row -> "<run>/<query>" -> record; each file read once

    def pooled(row: str) -> dict[str, dict[str, Any]]:
        if row not in read:
            read[row] = {f"{run}/{q}": r for run in members if row in variants[run]
                         for q, r in per_query(runs / run / grid, row).items()}
        return read[row]

    for name in sorted({name for v in variants.values() for name in v}):
        base = next((v[name].get("baseline") for v in variants.values() if name in v), None)
        if not base or base == name:
            continue
        a, b = pooled(name), pooled(base)
        test = paired(a, b, metric)
        if test is None:
            continue
        keys = [k for k in a if k in b]
        rows.append({"row": name, "baseline": base, "n": len(keys), "metric": metric,
                     "mean": sum(a[k][metric] for k in keys) / len(keys),
                     "baseline_mean": sum(b[k][metric] for k in keys) / len(keys), "p_value": test["p_value"]})
    return rows


def write_report(runs: Path, datasets: Sequence[str], out: Path, *, params, notes: str | None = None) -> Path:
    """``datasets``: the run keys (``qta.runs`` keys, e.g. ``mtrb-restbench-fold0of9``) to report."""

    section = params.qta
    papers = paper_numbers("qta")
    sections, data, by_base = [], {}, {}
    for run in datasets:
        if not (runs / run / "qta" / "summary.json").is_file():
            continue
        lines, d = run_section(runs, run, data_dir() / "qta", data_dir() / "models")
        sections += lines
        data[run] = d
        cfg = section.runs.get(run)
        by_base.setdefault(cfg.dataset if cfg else run, []).append(run)
    mean_lines = ["## Mean over folds", "",
                  "| dataset | row | folds | " + " | ".join(f"{m} mean [t 95% CI]" for m in METRICS) + " | paper "
                  + " / ".join(METRICS) + " |", "|---|---|---|" + "---|" * len(METRICS) + "---|"]
    for base, members in by_base.items():
        rows = sorted({r for m in members for r in data[m]["variants"]})
        paper = papers.get(base, {})
        for row in rows:
            vals = {m: [data[k]["variants"][row]["metrics"][m] for k in members if row in data[k]["variants"]]
                    for m in METRICS}
            cells = []
            for m in METRICS:
                mean, lo, hi = mean_ci(vals[m])
                cells.append(f"{mean:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""))
            pv = " / ".join(f"{paper[f'{row}.{m}']:.3f}" if f"{row}.{m}" in paper else "-" for m in METRICS)
            mean_lines.append(f"| {base} | {row} | {len(vals['comp@5'])} | " + " | ".join(cells) + f" | {pv} |")
    claim = [r for r in data if not (section.runs.get(r) and section.runs[r].selection)]
    pooled = pooled_rows(runs, claim) if claim else []
    pooled_lines = ["## Pooled over the runs not used for selection", "",
                    f"Runs: {', '.join(claim) or '-'} (selection runs left out: "
                    f"{', '.join(r for r in data if r not in claim) or 'none'}). One pair per (run, test query); "
                    "paired randomization test against the row's baseline.", "", *pooled_table(pooled)]
    data_pooled = {"pooled": {"runs": claim, "rows": pooled}}
    head = ["# QTA results (generated)", "",
            "Generated by `toolret report-ablations --method qta --datasets <runs>` from "
            "`data/runs/<run>/qta/summary.json`; do not edit the tables by hand. Retriever: frozen all-MiniLM-L6-v2 "
            f"(`dense`); rewriter LLM: `{section.llm_model}` with a LoRA adapter trained by DPO (trl); m = {section.m} "
            f"DPO rounds per training query, s = {section.s} sampled tool documents, reward cutoff n = {section.n}. "
            "CIs per fold: percentile bootstrap over that fold's test queries; p: paired randomization test against "
            "dense on the same queries. Paper: QTA Table 2 (Mistral-7B, m = 100, 3 epochs).", ""]
    synthetic_lines, data_synthetic = synthetic_sections(runs, section)
    larger_lines, data_larger = larger_sections(runs, section)
    finetune_lines, data_finetune = finetune_sections(runs, section, datasets)
    body = "\n".join(head + mean_lines + [""] + pooled_lines + [""] + synthetic_lines + larger_lines + finetune_lines
                     + ["## Per run", ""] + sections)
    return write_report_file(out, body, {**data, **data_pooled, **data_synthetic, **data_larger, **data_finetune},
                             notes)


def pooled_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The lines of ``pooled_rows``' table (header first)."""
    return (["| row | baseline | pairs | comp@5 | baseline comp@5 | Δ | p |", "|---|---|---|---|---|---|---|"]
            + [f"| {r['row']} | {r['baseline']} | {r['n']} | {r['mean']:.3f} | {r['baseline_mean']:.3f} | "
               f"{r['mean'] - r['baseline_mean']:+.3f} | {format_p(r['p_value'])} |" for r in rows])


FINETUNE_GRID = "qta-syn-ft"  # <runs>/<run>/qta-syn-ft: qta.synthetic.finetune.grid on a fold (its evaluate stage)


def finetune_sections(runs: Path, section, members: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """``qta.synthetic.finetune``: its grid pooled over the fold runs not used for selection, then per run (with
    the fold's preference data and the adapter trained on top of the synthetic one)."""

    done = [run for run in members if (runs / run / FINETUNE_GRID / "summary.json").is_file()]
    if not done:
        return [], {}
    claim = [r for r in done if not (section.runs.get(r) and section.runs[r].selection)]
    pooled = pooled_rows(runs, claim, grid=FINETUNE_GRID) if claim else []
    cfg = section.finetune_config()
    lines = ["## Synthetic, then the fold's labelled queries", "",
             "`qta-syn-ft`: the synthetic rewriter above trained further by DPO on each fold's labelled preference "
             "pairs (the `qta` rows' data: a LoRA adapter on top of the synthetic one, which is merged in first and "
             f"is DPO's reference); m = {cfg.m}, pair rule {cfg.pair_rule}, {cfg.epochs:g} epochs"
             f"{', bf16 autocast' if cfg.bf16 else ''}. Pooled over the runs not used for selection "
             f"({', '.join(claim) or '-'}; left out: {', '.join(r for r in done if r not in claim) or 'none'}); one "
             "pair per (run, test query), paired randomization test against the row's baseline.", "",
             *pooled_table(pooled), ""]
    data: dict[str, Any] = {"pooled": {"runs": claim, "rows": pooled}, "runs": {}}
    for run in done:
        sec, d = grid_section(f"### {run} (qta-syn-ft)", runs / run / FINETUNE_GRID, data_dir() / "qta" / run,
                              data_dir() / "models" / run / FINETUNE_GRID)
        lines += sec
        data["runs"][run] = d
    return lines, {"synthetic_finetune": data}


DEV_GRID = "qta-synthetic-dev"  # <runs>/<training catalog>/qta-synthetic-dev: qta.synthetic.dev_grid (stage qta_syn_dev)
LARGER_GRID = "qta-synthetic-large"  # <runs>/<benchmark>/qta-synthetic-large: qta.synthetic.larger.grid


def larger_sections(runs: Path, section) -> tuple[list[str], dict[str, Any]]:
    """``qta.synthetic.larger``: per benchmark, its grid on every test query (``<runs>/<benchmark>/<LARGER_GRID>``)
    with the larger rewriter's preference data (``data/qta/<catalog>/<model>/``), adapter and test rewrites."""

    cfg = section.larger_config()
    lines, data = [], {}
    for bench, run in section.synthetic.runs.items():
        grid = runs / bench / LARGER_GRID
        if not (grid / "summary.json").is_file():
            continue
        own = data_dir() / "qta" / run.catalog / cfg.llm_model
        sec, d = grid_section(f"### {bench} (trained on {run.catalog}, {cfg.llm_model})", grid, own,
                              data_dir() / "models" / run.catalog / "qta-large")
        changes, d["changes"] = change_section(own / f"{bench}.test-rewrites.jsonl")
        lines += sec + changes
        data[bench] = d
    if not lines:
        return [], {}
    head = ["## A larger rewriter, trained on the same synthetic requests", "",
            f"`qta-syn-large`: the synthetic training above with `{cfg.llm_model}` as the rewriter (its own preference "
            f"samples and LoRA adapter; `params.yaml: qta.synthetic.larger`); m = {cfg.m}, pair rule {cfg.pair_rule}, "
            f"{cfg.epochs:g} epochs{', bf16 autocast' if cfg.bf16 else ''}. Every test query counts (no benchmark "
            "query is read before the test); p: paired randomization test against dense on the same queries.", ""]
    return head + lines, {"synthetic_larger": data}


def change_section(rewrites: Path, sample: int = 8) -> tuple[list[str], dict[str, Any] | None]:
    """What the rewriter changes in the test requests (``toolret rewrite`` output): counts over all of them and
    the first ``sample`` (by query id) with the constraints kept and dropped (:mod:`toolret.methods.qta.changes`)."""

    if not rewrites.is_file():
        return [], None
    rows = sorted(read_jsonl(rewrites), key=lambda r: (len(str(r["query_id"])), str(r["query_id"])))
    counts = change_counts(rows)
    sample_rows = change_rows(rows, sample)
    lines = [f"Test rewrites: {counts['copies']} of {counts['rewrites']} copy the request, {counts['fallbacks']} "
             f"fall back to it; constraints (numbers, quoted strings, names) kept {counts['kept']} of "
             f"{counts['constraints']}, dropped {counts['dropped']} (in {counts['with_constraints']} requests).", "",
             "| request | rewrite | kept | dropped |", "|---|---|---|---|"]

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines += [f"| {cell(r['request'])} | {cell(r['rewrite'])} | {', '.join(r['kept']) or '-'} | "
              f"{', '.join(r['dropped']) or '-'} |" for r in sample_rows]
    return lines + [""], {"counts": counts, "sample": sample_rows}


def synthetic_sections(runs: Path, section) -> tuple[list[str], dict[str, Any]]:
    """``qta.synthetic``: per benchmark, the grid on every test query (``<runs>/<benchmark>/qta-synthetic``) of the
    rewriter trained on its synthetic training catalog, with that catalog's preference data and adapter."""

    lines, data = [], {}
    for bench, run in section.synthetic.runs.items():
        grid = runs / bench / "qta-synthetic"
        if not (grid / "summary.json").is_file():
            continue
        sec, d = grid_section(f"### {bench} (trained on {run.catalog})", grid, data_dir() / "qta" / run.catalog,
                              data_dir() / "models" / run.catalog / "qta")
        changes, d["changes"] = change_section(data_dir() / "qta" / run.catalog / f"{bench}.test-rewrites.jsonl")
        lines += sec + changes
        data[bench] = d
    for catalog in dict.fromkeys(run.catalog for run in section.synthetic.runs.values()):
        grid = runs / catalog / DEV_GRID
        if (grid / "summary.json").is_file():  # no preference data / adapter lines: the tables above have them
            sec, d = grid_section(f"### {catalog}, dev split (where the search settings are chosen)", grid)
            lines += sec
            data.setdefault("dev", {})[catalog] = d
    if not lines:
        return [], {}
    cfg = section.synthetic_config()
    head = ["## Trained on synthetic requests (no labelled query)", "",
            "`qta-syn`: the rewriter trained by DPO on the benchmark's synthetic training catalog (LLM-written "
            "requests from the tool documents, their source tools as gold; `params.yaml: synthetic`), with the same "
            f"eq. 4 rewards from the same frozen dense; m = {cfg.m} round(s) per request, pair rule {cfg.pair_rule}, "
            f"{cfg.epochs:g} epochs{', bf16 autocast' if cfg.bf16 else ''}. No query of the benchmark is read before "
            "the test, so every test query counts (no fold is left out); p: paired randomization test against dense "
            "on the same queries. Rows `r<k>_w<w>` of the dev table: k rewrites per request (the greedy one, then "
            "sampled ones, each with its own tool sample) fused by RRF with the request, whose ranking weighs w %; "
            "`qta_synthetic_sampled` is its best row on the test queries.", ""]
    return head + lines, {"synthetic": data}


__all__ = ["DEV_GRID", "FINETUNE_GRID", "LARGER_GRID", "change_section", "finetune_sections", "grid_section",
           "larger_sections", "pooled_rows", "pooled_table", "run_section", "synthetic_sections", "write_report"]
