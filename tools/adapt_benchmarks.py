"""`toolret adapt` on the benchmarks treated as catalogs without queries: adapt reads each dataset's tool
documents only; its test queries are the labelled queries that score the result (never used to choose).

Writes ``benchmarks/results/adapt/<dataset>.json`` (the adapt report and the table row) and renders
``docs/ADAPT.md`` from all of them; the adapt output (generation shards included) is ``data/adapt/<dataset>``.

    .venv/bin/python tools/adapt_benchmarks.py --datasets mtrb-metatool [--budget fast]
    .venv/bin/python tools/adapt_benchmarks.py --render   # docs/ADAPT.md from the stored results only
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "adapt"
DATASETS = ("mtrb-metatool", "mtrb-restbench", "toollens", "toolbench-g1-instruction")
# each benchmark's own main metric (MTRB: Sufficiency@5 = comp@5; ToolLens: recall@5; ToolBench: nDCG@5)
MAIN = {"mtrb-metatool": "comp@5", "mtrb-restbench": "comp@5", "toollens": "recall@5",
        "toolbench-g1-instruction": "ndcg@5"}
BASELINES = ("bm25", "dense", "hybrid")


def prepare(dataset: str, work: Path) -> tuple[Path, Path]:
    """The dataset's tools as a catalog without queries, and its test queries as a labelled file."""
    from toolret.catalog.io import save_catalog
    from toolret.catalog.model import Catalog
    from toolret.catalog.datasets import load_dataset

    full = load_dataset(dataset)
    tools = Catalog(dataset, list(full.tools), [], {}, {"source": dataset, "purpose": "serving"})
    catalog = save_catalog(tools, work / "catalog")
    labelled = work / "labelled-test.jsonl"
    labelled.write_text("".join(json.dumps({"_id": q.id, "text": q.text, "gold": sorted(full.gold(q.id))}) + "\n"
                                for q in full.split("test")), encoding="utf-8")
    return catalog, labelled


def row(dataset: str, report: dict) -> dict:
    """The table row: every candidate's labelled main metric with its CI, p against the best untrained."""
    main = MAIN[dataset]
    lab = report["labelled"]
    best_untrained = max(BASELINES, key=lambda b: lab[b]["metrics"][main])
    cells = {}
    for name, r in lab.items():
        cells[name] = {"value": r["metrics"][main], "ci95": r["ci95"][main],
                       "p_vs_best_untrained": None if name == best_untrained else r["vs"][best_untrained][main]}
    return {"dataset": dataset, "metric": main, "best_untrained": best_untrained,
            "champion": report["selection"]["champion"], "why": report["selection"]["why"], "cells": cells,
            "seconds": report["seconds"], "generation": report["generation"], "n_tools": report["catalog"]["n_tools"],
            "n_test": lab["bm25"]["n_queries"]}


def _cost(previous: Path, report: dict) -> dict:
    """What adapting the dataset costs: this run's time, unless it took its requests from the shards an earlier
    run generated (its generation not repeated) -- then that earlier run's, which paid for them."""
    this = {"seconds": report["seconds"], "generation": report["generation"]}
    if report["generation"]["generated_this_run"] or not previous.is_file():
        return this
    old = json.loads(previous.read_text(encoding="utf-8"))["row"]
    old_cost = old.get("cost") or {"seconds": old["seconds"], "generation": old["generation"]}
    if not old_cost["generation"]["generated_this_run"]:
        return this
    cost = {"seconds": old_cost["seconds"], "generation": dict(old_cost["generation"])}
    for part in ("goal", "multi"):  # requests the earlier run did not write: its cost plus this run's for them
        new = report["generation"].get(part) or {}
        if new.get("generated_this_run") and not (old_cost["generation"].get(part) or {}).get("generated_this_run"):
            cost["seconds"] = round(cost["seconds"] + new["seconds"], 1)
            cost["generation"][part] = new
    return cost


def render() -> str:
    rows = [json.loads(p.read_text())["row"] for p in sorted(RESULTS.glob("*.json")) if not p.name.startswith("incremental-")]
    cols = ["bm25", "dense", "hybrid", "bm25-stem", "dense-ft", "hybrid-ft", "bm25-exp", "dense-exp", "hybrid-exp",
            "hybrid-exp-ft"]
    out = ["# `toolret adapt` on the benchmarks, as catalogs without queries", "",
           "adapt reads each dataset's tool documents only (requests written by the default 0.5B generator, "
           "budget `fast`: 5 per tool, and one request needing every tool of each of up to 200 groups of 2-3 "
           "related tools); the champion is chosen on the synthetic dev split's goal-style requests "
           "of held-out tools (a second prompt: the user's goal in everyday words, a style no candidate trained on; "
           "`toolret/adapt/synthetic.py`), a fused candidate preferred to a single-side best it ties with "
           "(`toolret.adapt.run.choose_champion`); the dataset's test "
           "queries only score the result. Each cell: the benchmark's main metric on its test queries [95% "
           "bootstrap CI]; p: paired randomization test against the best untrained of bm25 / dense / hybrid. "
           "Rendered by `tools/adapt_benchmarks.py --render` from `benchmarks/results/adapt/*.json`.", "",
           "| dataset | metric | " + " | ".join(cols) + " | champion |", "|---" * (len(cols) + 3) + "|"]
    for r in rows:
        cells = []
        for c in cols:
            cell = r["cells"].get(c)
            if cell is None:
                cells.append("-")
                continue
            p = cell["p_vs_best_untrained"]
            cells.append(f"{cell['value']:.3f} [{cell['ci95'][0]:.3f}, {cell['ci95'][1]:.3f}]"
                         + ("" if p is None else f" p={p:.3g}"))
        champ = r["cells"][r["champion"]]
        p = champ["p_vs_best_untrained"]
        out.append(f"| {r['dataset']} ({r['n_tools']} tools, {r['n_test']} test) | {r['metric']} | " + " | ".join(cells)
                   + f" | **{r['champion']}** {champ['value']:.3f}" + ("" if p is None else f" (p={p:.3g})") + " |")
    out += ["", "A `-` cell: a candidate added after that row was run (`tools/adapt_benchmarks.py --datasets <dataset>` "
            "reruns it from the committed generation shards).", "", "## Cost (2 CPU cores)", "",
            "Measured on a shared box (the session's other jobs ran beside each adapt: a 10-minute `dvc commit` beside "
            "MetaTool, `make test` beside RestBench and the incremental re-adapt); the 0.5B generator alone writes "
            "~1.7 samples/s, so the generation share of these times is ~1.7x what an idle box needs. Per 1,000 tools "
            "is the time per tool scaled, fixed costs (loading the generator, encoding) included.", "",
            "| dataset | tools | adapt, all in | per 1,000 tools | generated samples (this run) | generation | "
            "samples/s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        cost = r.get("cost") or r  # the run that generated its requests (a rerun from the shards keeps its cost)
        g = cost["generation"]
        goal, multi = g.get("goal") or {}, g.get("multi") or {}
        out.append(f"| {r['dataset']} | {r['n_tools']} | {cost['seconds'] / 60:.1f} min | "
                   f"{cost['seconds'] / 60 / r['n_tools'] * 1000:.0f} min | {g['generated_this_run']}"
                   + (f" + {goal['generated_this_run']} goal-style" if goal.get("generated_this_run") else "")
                   + (f" + {multi['generated_this_run']} multi-tool" if multi.get("generated_this_run") else "")
                   + f" | {(g['seconds'] + (goal.get('seconds') or 0) + (multi.get('seconds') or 0)) / 60:.1f} min | "
                   f"{g['samples_per_s'] or '- (from committed shards)'} |")
    for path in sorted(RESULTS.glob("incremental-*.json")):
        inc = json.loads(path.read_text())
        goal = f" and {inc['goal_generated_this_run']} goal-style ones" if inc.get("goal_generated_this_run") else ""
        first = f" ({inc['first_adapt']}, {inc['first_generated']} requests generated)" if inc.get("first_adapt") else ""
        out += ["", f"**Incremental**: {inc['added']} tools of {inc['from']} added to the adapted {inc['base']}: the "
                f"re-adapt generated {inc['generated_this_run']} requests for {inc['tools_generated_this_run']} tools"
                f"{goal} (changes {inc['changes']}), {'kept' if inc['adapter_reused'] else 'retrained'} the adapter, "
                f"and took {inc['seconds'] / 60:.1f} min = {inc['ratio']:.0%} of the first adapt's "
                f"{inc['first_adapt_seconds'] / 60:.1f} min{first} (`{inc['command']}`)."]
    out += ["", "Why each champion: " + "; ".join(f"{r['dataset']}: {r['why']}" for r in rows), ""]
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--budget", default="fast")
    parser.add_argument("--render", action="store_true", help="only render docs/ADAPT.md from stored results")
    args = parser.parse_args(argv)
    if not args.render:
        from toolret.adapt import adapt
        from toolret.atomic import write_json

        for dataset in args.datasets:
            work = ROOT / "data" / "adapt" / dataset
            catalog, labelled = prepare(dataset, work)
            t0 = time.perf_counter()
            report = adapt(catalog, work, queries=labelled, budget=args.budget)
            report["wall_seconds"] = round(time.perf_counter() - t0, 1)
            new = row(dataset, report)
            new["cost"] = _cost(RESULTS / f"{dataset}.json", report)
            write_json(RESULTS / f"{dataset}.json", {"report": report, "row": new,
                                                     "command": f"tools/adapt_benchmarks.py --datasets {dataset} "
                                                                f"--budget {args.budget}"})
    (ROOT / "docs" / "ADAPT.md").write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
