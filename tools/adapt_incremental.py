"""Re-adapt after tools were added: the adapted catalog of ``--base`` (``tools/adapt_benchmarks.py`` output)
grows by ``--add`` tools taken from ``--from`` (another dataset's tools, so they are new to it); the re-adapt
must generate requests for those tools only and cost a fraction of the first adapt.

    .venv/bin/python tools/adapt_incremental.py --base mtrb-metatool --from mtrb-restbench --add 10 [--fresh]

With ``--fresh`` the first adapt runs here too, from an empty output folder (every request generated: the cost
from an empty cache), so that both times are measured on the same box in the same conditions; without it the
first adapt's time is the cost ``tools/adapt_benchmarks.py`` recorded for ``--base``.

Writes ``benchmarks/results/adapt/incremental-<base>.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    from toolret.adapt import adapt
    from toolret.atomic import write_json
    from toolret.catalog.io import load_catalog, save_catalog
    from toolret.catalog.model import Catalog, Tool
    from toolret.catalog.datasets import load_dataset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="mtrb-metatool")
    parser.add_argument("--from", dest="source", default="mtrb-restbench")
    parser.add_argument("--add", type=int, default=10)
    parser.add_argument("--fresh", action="store_true", help="run (and time) the first adapt too, from empty")
    args = parser.parse_args(argv)
    base = ROOT / "data" / "adapt" / args.base
    stored = json.loads((ROOT / "benchmarks" / "results" / "adapt" / f"{args.base}.json").read_text())
    first = stored["report"]
    work = ROOT / "data" / "adapt" / f"{args.base}-plus{args.add}"
    shutil.rmtree(work, ignore_errors=True)
    if args.fresh:
        work.mkdir(parents=True)
        t0 = time.perf_counter()
        first = adapt(base / "catalog", work, budget=first["budget"], register=False)
        first_seconds, first_how = time.perf_counter() - t0, "measured here, from an empty output folder"
    else:
        shutil.copytree(base, work, ignore=shutil.ignore_patterns("catalog", "labelled-test.jsonl"))
        cost = stored["row"].get("cost") or {"seconds": first["seconds"]}
        first_seconds, first_how = cost["seconds"], "the recorded cost of the adapt that generated its requests"
    old = load_catalog(base / "catalog")
    new = [Tool(f"added-{t.id}", t.name, {"original": t.text}, t.tool, t.category)
           for t in load_dataset(args.source).tools[: args.add]]
    grown = save_catalog(Catalog(old.name, [*old.tools, *new], [], {}, old.provenance), work / "catalog")
    t0 = time.perf_counter()
    report = adapt(grown, work, budget=first["budget"], register=False)
    seconds = time.perf_counter() - t0
    out = {"base": args.base, "added": args.add, "from": args.source, "changes": report["changes"],
           "generated_this_run": report["generation"]["generated_this_run"],
           "tools_generated_this_run": report["generation"]["tools_generated_this_run"],
           "adapter_reused": report["adapter_reused"], "seconds": round(seconds, 1),
           "goal_generated_this_run": report["generation"]["goal"]["generated_this_run"],
           "first_adapt_seconds": round(first_seconds, 1), "first_adapt": first_how,
           "first_generated": first["generation"]["generated_this_run"] + first["generation"]["goal"]["generated_this_run"],
           "ratio": round(seconds / first_seconds, 3), "champion": report["selection"]["champion"],
           "command": f"tools/adapt_incremental.py --base {args.base} --from {args.source} --add {args.add}"
                      + (" --fresh" if args.fresh else "")}
    write_json(ROOT / "benchmarks" / "results" / "adapt" / f"incremental-{args.base}.json", out)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
