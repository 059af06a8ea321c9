"""Every LLM engine on the real Re-Invoke prompt mix, in one run: samples/s, tokens/s and the speed-up of
the best engine over the transformers backend (same prompts, same sampling settings, same sample count).

Prompt mix as ``reinvoke_generation_cost.py``: ``--bands`` blocks of ``--per-band`` tools neighbouring in
prompt length (centred on evenly spaced quantiles of the catalog), the production query-generation
prompt and sampling (temperature 0.7, top-p 0.95, ``--n`` samples per tool), no cache. Prints JSON
(also written to ``--out``).

    .venv/bin/python benchmarks/llm_engines.py --catalog data/curated/toolbench-g1-instruction \\
        [--bands 4] [--per-band 13] [--n 5] [--out benchmarks/results/llm_engines.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def pick_mix(lengths: list[int], bands: int, per_band: int) -> list[int]:
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    picked: list[int] = []
    for b in range(bands):
        centre = int((b + 0.5) * len(order) / bands)
        start = max(0, min(len(order) - per_band, centre - per_band // 2))
        picked.extend(order[start:start + per_band])
    return picked


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", required=True, help="curated catalog directory")
    ap.add_argument("--bands", type=int, default=4)
    ap.add_argument("--per-band", type=int, default=13)
    ap.add_argument("--n", type=int, default=5, help="samples per tool")
    ap.add_argument("--engines", default="transformers,llama.cpp")
    ap.add_argument("--out")
    args = ap.parse_args()

    from toolret.catalog.io import load_catalog
    from toolret.llm.base import generate_generations
    from toolret.llm.engines import build_generator
    from toolret.llm.prompts import QUERY_GEN_PARAMS, query_generation_prompt

    catalog = load_catalog(args.catalog)
    prompts = [query_generation_prompt(d) for d in catalog.docs("original")]
    params = dataclasses.replace(QUERY_GEN_PARAMS, n=args.n)
    result: dict = {"catalog": catalog.name, "tools": len(prompts), "queries_per_tool": args.n,
                    "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "python": platform.python_version(),
                    "engines": {}}
    sample = None
    for engine in args.engines.split(","):
        try:
            gen = build_generator(engine, progress=False)
        except ImportError as e:  # an optional engine that is not installed
            result["engines"][engine] = {"error": str(e)}
            continue
        if sample is None:  # the mix, by this engine's token counts of the rendered prompts
            lengths = [len(gen.tokenize(gen.render(p))) for p in prompts]
            picked = pick_mix(lengths, args.bands, args.per_band)
            sample = [prompts[i] for i in picked]
            result["sample"] = len(sample)
            result["prompt_tokens_mean"] = round(sum(lengths[i] for i in picked) / len(picked), 1)
        t0 = time.perf_counter()
        outs = generate_generations(gen, sample, params)
        dt = time.perf_counter() - t0
        toks = sum(o.n_tokens for o in outs)
        row = {"model": gen.model_id, "revision": gen.revision, "seconds": round(dt, 1), "samples": len(outs),
               "samples_per_s": round(len(outs) / dt, 3), "generated_tokens_per_s": round(toks / dt, 1),
               "mean_tokens_per_sample": round(toks / len(outs), 1),
               "parsed_share": round(sum(1 for o in outs if o.text.strip()) / len(outs), 3)}
        result["engines"][engine] = row
        print(json.dumps({engine: row}), file=sys.stderr, flush=True)
        del gen
    base = result["engines"].get("transformers")
    if base:
        ran = {k: v for k, v in result["engines"].items() if "samples_per_s" in v}
        best = max(ran.items(), key=lambda kv: kv[1]["samples_per_s"])
        result["best_engine"] = best[0]
        result["speedup_vs_transformers"] = round(best[1]["samples_per_s"] / base["samples_per_s"], 2)
    result["loadavg_end"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
