"""Generation throughput of toolret.llm's batched backend vs a naive one-prompt-at-a-time loop.

Prints JSON. Aggregate generated tokens/s = generated tokens (excluding the prompt) / wall time,
prompt prefill included. The naive baseline is plain ``model.generate`` on one prompt at a time
(greedy, same model, same threads), measured in the same run.

    .venv/bin/python benchmarks/llm_throughput.py [--prompts 64] [--naive-prompts 8] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOOLS = [
    ("WeatherTool", "Get current weather conditions and a 7-day forecast for any city or coordinates."),
    ("FlightSearch", "Search flights between two airports for given dates, cabin class and number of passengers."),
    ("StockQuote", "Return the latest price, daily change and volume for a stock ticker symbol."),
    ("RecipeFinder", "Find cooking recipes by ingredients, cuisine, diet restrictions and preparation time."),
    ("TranslateText", "Translate text between more than 100 languages and detect the source language."),
    ("MovieInfo", "Look up movies by title: cast, plot summary, ratings and where to stream them."),
    ("CurrencyConverter", "Convert an amount between currencies using real-time exchange rates."),
    ("JobSearch", "Search job openings by title, location, salary range and remote options."),
]
VERBS = ["Write a user query for this tool", "Write a question a user could ask with this tool",
         "Write a request that needs this tool", "Write a realistic user message for this tool",
         "Give one example question this tool answers", "Write a task a user wants done with this tool",
         "Write a user query (one sentence) for this tool", "Write what a user would type to use this tool"]


def make_prompts(n: int) -> list:
    out = []
    for i in range(n):
        name, desc = TOOLS[i % len(TOOLS)]
        verb = VERBS[(i // len(TOOLS)) % len(VERBS)]
        out.append([{"role": "user", "content": f"{verb}.\nTool: {name}\nDescription: {desc}"}])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--naive-prompts", type=int, default=16, help="naive loop runs on the first N prompts")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--batch-sizes", default="1,8,32,64")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    import torch

    from toolret.llm.base import SamplingParams, generate_generations
    from toolret.llm.transformers_backend import TransformersGenerator

    gen = TransformersGenerator(device=args.device, num_threads=args.threads, progress=False, batch_size=1)
    prompts = make_prompts(args.prompts)
    params = SamplingParams(max_new_tokens=args.max_new_tokens)  # greedy, like the naive loop
    tok, model = gen.tokenizer, gen.model
    result = {
        "model": gen.model_id, "revision": gen.revision, "device": gen.device, "dtype": str(gen.dtype),
        "threads": torch.get_num_threads(), "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
        "python": platform.python_version(), "torch": torch.__version__, "max_new_tokens": args.max_new_tokens,
        "prompt_tokens_mean": sum(len(tok(gen.render(p), add_special_tokens=False)["input_ids"]) for p in prompts) / len(prompts),
    }

    # Naive baseline: one prompt at a time, plain model.generate.
    naive = prompts[: args.naive_prompts]
    n_tok, t0 = 0, time.perf_counter()
    with torch.inference_mode():
        for p in naive:
            enc = tok(gen.render(p), return_tensors="pt", add_special_tokens=False).to(gen.device)
            out = model.generate(**enc, max_new_tokens=args.max_new_tokens, do_sample=False, pad_token_id=gen.pad_id)
            n_tok += out.shape[1] - enc["input_ids"].shape[1]
    dt = time.perf_counter() - t0
    result["naive"] = {"prompts": len(naive), "generated_tokens": n_tok, "seconds": round(dt, 2), "tokens_per_s": round(n_tok / dt, 2)}

    rows = []
    for bs in [int(x) for x in args.batch_sizes.split(",")]:
        gen.config = type(gen.config)(**{**gen.config.__dict__, "batch_size": bs})
        sub = prompts if bs > 1 else prompts[: args.naive_prompts]
        t0 = time.perf_counter()
        gens = generate_generations(gen, sub, params)
        dt = time.perf_counter() - t0
        n = sum(g.n_tokens + (g.finish_reason == "stop") for g in gens)  # count the EOS like generate does
        rows.append({"batch_size": bs, "prompts": len(sub), "generated_tokens": n, "seconds": round(dt, 2),
                     "tokens_per_s": round(n / dt, 2), "speedup_vs_naive": round((n / dt) / result["naive"]["tokens_per_s"], 2)})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    result["batched"] = rows
    result["loadavg_end"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
