"""What Re-Invoke's query generator costs on a real catalog, and where the time goes.

Takes ``--bands`` blocks of ``--per-band`` tools that are neighbours in prompt length (centred on
evenly spaced quantiles; the backend sorts by length too, so a block is one batch as in a real run),
generates ``--n`` synthetic queries each with the production prompt and sampling settings (no
cache), and extrapolates: each block stands for an equal share of the catalog. The same
sample runs twice in one process: with toolret's preallocated KV-cache layers and with transformers'
stock ``DynamicLayer`` (``torch.cat`` per step), so the ratio is the backend's own gain; outputs must
be identical. A cProfile pass over every ~6th sampled tool splits the time into matmuls (``linear``),
attention (``scaled_dot_product_attention``) and top-p sampling (``sort`` + ``multinomial``).
Prints JSON.

    .venv/bin/python benchmarks/reinvoke_generation_cost.py --catalog data/curated/toolbench-g1-instruction \\
        [--bands 4] [--per-band 13] [--n 5] [--threads N]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import os
import platform
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", required=True, help="curated catalog directory")
    ap.add_argument("--bands", type=int, default=4, help="length quantile bands")
    ap.add_argument("--per-band", type=int, default=13, help="neighbouring tools per band (13 x 5 samples ~ one batch)")
    ap.add_argument("--n", type=int, default=5, help="synthetic queries per tool")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()

    import torch

    import toolret.llm.transformers_backend as tb
    from toolret.catalog.io import load_catalog
    from toolret.llm.base import generate_generations
    from toolret.llm.prompts import QUERY_GEN_PARAMS, query_generation_prompt

    catalog = load_catalog(args.catalog)
    gen = tb.TransformersGenerator(num_threads=args.threads, progress=False, batch_size=args.batch_size)
    prompts = [query_generation_prompt(d) for d in catalog.docs("original")]
    lengths = [len(gen._encode(gen.render(p))) for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: lengths[i])
    picked = []
    for b in range(args.bands):
        centre = int((b + 0.5) * len(order) / args.bands)
        start = max(0, min(len(order) - args.per_band, centre - args.per_band // 2))
        picked.extend(order[start : start + args.per_band])
    sample = [prompts[i] for i in picked]
    params = dataclasses.replace(QUERY_GEN_PARAMS, n=args.n)

    def run(label: str, preallocate: bool) -> tuple[dict, list[str]]:
        gen.config = dataclasses.replace(gen.config, preallocate_kv_cache=preallocate)
        t0 = time.perf_counter()
        outs = generate_generations(gen, sample, params)
        dt = time.perf_counter() - t0
        toks = sum(o.n_tokens for o in outs)
        row = {"backend": label, "seconds": round(dt, 1), "samples_per_s": round(len(outs) / dt, 3),
               "generated_tokens_per_s": round(toks / dt, 1),
               "extrapolated_catalog_minutes": round(dt * len(prompts) / len(sample) / 60, 1)}
        print(json.dumps(row), file=sys.stderr, flush=True)
        return row, [o.text for o in outs]

    def time_split(prompts_: list) -> dict:
        """Share of the generation time per kind of work (cProfile self-time of torch built-ins)."""
        prof = cProfile.Profile()
        prof.enable()
        generate_generations(gen, prompts_, params)
        prof.disable()
        stats = pstats.Stats(prof).stats
        total = sum(v[2] for v in stats.values())
        parts = {"linear": "linear", "attention": "scaled_dot_product_attention", "top_p_sort": "torch.sort",
                 "multinomial": "torch.multinomial"}
        return {name: round(sum(v[2] for (f, _, fn), v in stats.items() if f == "~" and key in fn) / total, 3)
                for name, key in parts.items()}

    result = {
        "catalog": catalog.name, "tools": len(prompts), "sample": len(sample), "bands": args.bands, "queries_per_tool": args.n,
        "prompt_tokens": {"sample_mean": round(sum(lengths[i] for i in picked) / len(picked), 1),
                          "catalog_mean": round(sum(lengths) / len(lengths), 1)},
        "model": gen.model_id, "revision": gen.revision, "device": gen.device, "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "python": platform.python_version(),
        "torch": torch.__version__, "batch_size": args.batch_size,
    }
    ours, texts_ours = run("toolret (preallocated KV layers)", preallocate=True)
    stock, texts_stock = run("transformers DynamicLayer", preallocate=False)  # torch.cat per step
    gen.config = dataclasses.replace(gen.config, preallocate_kv_cache=True)
    result["runs"] = [ours, stock]
    result["ratio_toolret_over_stock_seconds"] = round(ours["seconds"] / stock["seconds"], 3)
    result["identical_outputs"] = texts_ours == texts_stock
    result["time_split_toolret"] = time_split(sample[:: max(1, len(sample) // 6)])
    result["loadavg_end"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
