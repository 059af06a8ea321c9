"""ToolRerank's margin over the best Rerank-m, per cross-encoder artifact: does it grow with the reranker's quality?

The must-show of issue 26 asks `toolrerank` to beat the best of Rerank-10/30/50 (the paper: +4 R@5). Every trained
artifact of ``params.yaml: toolrerank.ablations`` (the registered one and each row that names another training
catalog or artifact: ``toolrerank.train_dataset`` / ``toolrerank.artifact`` in its ``set``) gets, with the same
settings, a ``toolrerank`` row (its dev-selected settings), a ``toolrerank_paper`` row (the same with ``ce_weight``
1.0: truncation and hierarchy over the reranked order alone, no fusion with the first stage -- the paper's method)
and ``rerank-10/30/50`` rows (the reranked order alone, as the stage grid's Rerank-m); ``evaluate-grid`` runs them on
a test group; the report pairs both ToolRerank rows of each artifact with its best Rerank-m (randomization test,
:func:`toolret.grid_report.paired`) and correlates the margins with that best Rerank-m, the reranker's quality. An
analysis of test results: nothing is selected from it.

Usage:
  .venv/bin/python tools/rerank_margin.py params OUT.yaml        # params.yaml with these rows as the ablation grid
  toolret --params OUT.yaml evaluate-grid --catalog data/curated/<group> --grid toolrerank.ablations --out RUNS/<group>
  .venv/bin/python tools/rerank_margin.py report RUNS <group> ... # the table (markdown) and the rank correlation
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
METRIC = "recall@5"
DEPTHS = (10, 30, 50)
TRAINING_KEYS = ("toolrerank.train_dataset", "toolrerank.artifact", "toolrerank.mix_datasets", "toolrerank.seed")


def artifacts(ablations: dict) -> dict[str, dict]:
    """``name -> set`` of every trained artifact the ablation rows read: ``registered`` ({}) and each toolrerank row
    whose ``set`` changes only which artifact is read (rows that also change inference settings are left out)."""
    out: dict[str, dict] = {"registered": {}}
    for name, row in ablations.items():
        changes = row.get("set") or {}
        if row.get("method") == "toolrerank" and changes and set(changes) <= set(TRAINING_KEYS):
            if dict(changes) not in out.values():
                out[name] = dict(changes)
    return out


def write_params(out: Path) -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    rows: dict[str, dict] = {"bm25": {"method": "bm25"}, "hybrid": {"method": "hybrid"}}
    for name, changes in artifacts(params["toolrerank"]["ablations"]).items():
        rows[f"{name}__toolrerank"] = {"method": "toolrerank", **({"set": changes} if changes else {})}
        rows[f"{name}__toolrerank_paper"] = {"method": "toolrerank", "set": {**changes, "toolrerank.ce_weight": 1.0},
                                             "baseline": f"{name}__toolrerank"}
        for m in DEPTHS:
            rows[f"{name}__rerank-{m}"] = {"method": f"rerank-{m}", "set": {**changes, "toolrerank.ce_weight": 1.0},
                                           "baseline": f"{name}__toolrerank"}
    params["toolrerank"]["ablations"] = rows
    out.write_text(yaml.safe_dump(params, sort_keys=False, width=4096), encoding="utf-8")
    print(f"wrote {out}: {len(rows)} rows")


def report(runs: Path, groups: list[str]) -> None:
    from scipy.stats import spearmanr

    from toolret.grid_report import format_p, paired, per_query, read_variants

    print("| artifact | group | Rerank-10 / 30 / 50 | best Rerank-m | ToolRerank | margin (p) "
          "| ce_weight 1.0 | margin (p) |")
    print("|---|---|---|---|---|---|---|---|")
    quality: list[float] = []
    margin: dict[str, list[float]] = {"toolrerank": [], "toolrerank_paper": []}
    cells: list[str] = []  # the group of each (artifact, group) cell
    for group in groups:
        variants = read_variants(runs / group) or {}
        pq = {row: per_query(runs / group, row) for row in variants}
        mean = lambda row: float(np.mean([r[METRIC] for r in pq[row].values()]))  # noqa: E731
        for name in dict.fromkeys(row.split("__")[0] for row in variants if "__" in row):
            rerank = [f"{name}__rerank-{m}" for m in DEPTHS]
            if not all(f"{name}__{r}" in pq for r in [*margin, *(f"rerank-{m}" for m in DEPTHS)]):
                continue
            best = max(rerank, key=mean)
            quality.append(mean(best))
            cells.append(group)
            shown = []
            for row, out in margin.items():
                test = paired(pq[f"{name}__{row}"], pq[best], METRIC)
                out.append(test["mean_diff"])
                shown.append(f"{mean(f'{name}__{row}'):.3f} | {test['mean_diff']:+.3f} ({format_p(test['p_value'])})")
            print(f"| {name} | {group} | {' / '.join(f'{mean(r):.3f}' for r in rerank)} | {mean(best):.3f} | "
                  + " | ".join(shown) + " |")
    if len(quality) > 2:
        for row, out in margin.items():
            rho = spearmanr(quality, out)
            # within groups: each group's cells centred on the group's means (group difficulty moves both)
            centred = [np.asarray(v, dtype=float) - [np.mean([x for x, c in zip(v, cells) if c == g]) for g in cells]
                       for v in (quality, out)]
            within = spearmanr(*centred)
            by_group = {g: [[x for x, c in zip(v, cells) if c == g] for v in (quality, out)]
                        for g in dict.fromkeys(cells)}
            per_group = ", ".join(f"{g} {spearmanr(*xy).statistic:+.2f}"
                                  for g, xy in by_group.items() if len(xy[0]) > 2)
            print(f"\nSpearman(best Rerank-m, {row}'s margin) over {len(quality)} artifact x group cells: "
                  f"{rho.statistic:+.2f} (p {rho.pvalue:.3g}); within groups {within.statistic:+.2f} "
                  f"(p {within.pvalue:.3g}; {per_group}); mean margin {np.mean(out):+.3f}")


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "params":
        write_params(Path(argv[1]))
    elif len(argv) >= 3 and argv[0] == "report":
        report(Path(argv[1]), argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
