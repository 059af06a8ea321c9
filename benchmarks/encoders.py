"""Bi-encoders side by side on a catalog's dev split (carved from train; never test): quality, encoding
time per 1,000 tool documents and size on disk, measured in the same run.

Prints and writes JSON (``--out``): per encoder dev Recall@5 / nDCG@5 / COMP@5, seconds to encode 1,000
documents (batch ``dense.batch_size``, ``finetune.max_seq_length`` as the trained encoders see them),
parameters and MB of weights. Usage: ``python benchmarks/encoders.py --dataset toollens
--encoders all-MiniLM-L6-v2 all-mpnet-base-v2 data/models/toollens/dense-ft/model``
(``all-mpnet-base-v2`` needs ``make setup-large-encoder``). The first encoder's ``load_s`` includes importing
torch and sentence-transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _weight_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*.safetensors"))


def measure(name: str, catalog, docs: str, batch_size: int, max_seq_length: int, n_docs: int) -> dict:
    from toolret.retrieval.finetune import dev_recall
    from toolret.retrieval.models import encoder_refs, load_sentence_transformer

    t0 = time.perf_counter()
    model = load_sentence_transformer(name, "cpu", max_seq_length)
    load_s = time.perf_counter() - t0
    texts = catalog.docs(docs)
    sample = (texts * (n_docs // max(len(texts), 1) + 1))[:n_docs]
    model.encode(sample[:batch_size], batch_size=batch_size)  # warm-up
    t0 = time.perf_counter()
    model.encode(sample, batch_size=batch_size)
    encode_s = time.perf_counter() - t0
    dev = dev_recall(catalog, model, docs)
    folders = {Path(ref["folder"]) for ref in encoder_refs(name)}
    return {"encoder": name, "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
            "dim": model.get_embedding_dimension(), "load_s": round(load_s, 2),
            "encode_s_per_1000_docs": round(encode_s * 1000 / n_docs, 2),
            "weights_mb": round(sum(_weight_bytes(f) for f in folders) / 2**20, 1), "dev": dev}


def main() -> None:
    from toolret.catalog.datasets import load_dataset_for
    from toolret.config import load_params

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="toollens")
    ap.add_argument("--encoders", nargs="+", default=["all-MiniLM-L6-v2", "all-mpnet-base-v2"])
    ap.add_argument("--docs", default=None, help="document field (default: finetune.docs)")
    ap.add_argument("--n-docs", type=int, default=1000)
    ap.add_argument("--out", default="benchmarks/results/encoders.json")
    args = ap.parse_args()
    params = load_params()
    catalog = load_dataset_for(args.dataset, params)
    docs = args.docs or params.finetune.docs
    rows = [measure(e, catalog, docs, params.dense.batch_size, params.finetune.max_seq_length, args.n_docs)
            for e in args.encoders]
    base = rows[0]["encode_s_per_1000_docs"]
    for row in rows:
        row["encode_time_vs_first"] = round(row["encode_s_per_1000_docs"] / base, 2)
    out = {"command": "python benchmarks/encoders.py " + " ".join(sys.argv[1:]),
           "dataset": args.dataset, "split": "dev", "docs": docs, "n_tools": len(catalog.tool_ids),
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}, "encoders": rows}
    text = json.dumps(out, indent=2) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
