"""BM25 tokenization on every dataset's dev split (carved from train; never test): no stemming, the
English Snowball stemmer, identifier splitting (``searchBooks`` -> ``search Books``), and both, each
paired-tested against the plain tokenizer. Prints and writes JSON (``--out``); the choice in
``params.yaml: bm25`` is read from it.

    .venv/bin/python tools/bm25_tokenization_dev.py --out benchmarks/results/bm25_tokenization_dev.json
"""

from __future__ import annotations

import argparse
import json
import sys

from tqdm import tqdm

VARIANTS = {"plain": {}, "stem": {"stemmer": "english"}, "split": {"split_identifiers": True},
            "stem+split": {"stemmer": "english", "split_identifiers": True}}
METRICS = ("ndcg@5", "recall@5")


def main(argv=None) -> int:
    from toolret.catalog.datasets import load_dataset
    from toolret.config import load_params
    from toolret.evaluation import evaluate_retriever
    from toolret.metrics import paired_test
    from toolret.roles import Corpus
    from toolret.retrieval.bm25 import BM25Config, BM25Retriever

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", help="default: params.yaml datasets with a dev split")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    params = load_params()
    base = params.bm25.model_dump()
    out = {"split": "dev", "variants": VARIANTS, "baseline": "plain", "datasets": {}}
    for name in tqdm(args.datasets or params.datasets, desc="datasets"):
        catalog = load_dataset(name, root=params.source.root, beir=params.source.beir,
                               dev_fraction=params.catalog.dev_fraction, seed=params.catalog.seed)
        if not catalog.split("dev"):
            out["datasets"][name] = {"skipped": "no dev split"}
            continue
        corpus = Corpus.from_catalog(catalog)
        rows = {}
        res = {}
        for variant, changes in VARIANTS.items():
            r = BM25Retriever(BM25Config(**{**base, **changes}))
            r.index(corpus.tool_ids, corpus.documents)
            result, per_query = evaluate_retriever(r, catalog, method=f"bm25-{variant}", docs="original", ks=[5],
                                                   k_max=10, split="dev", bootstrap_samples=1000,
                                                   measure_latency=False)
            res[variant], rows[variant] = result, per_query
        import numpy as np

        entry = {"n_dev": len(catalog.split("dev")), "n_tools": len(catalog.tools)}
        for variant in VARIANTS:
            e = {m: round(res[variant]["metrics"][m], 4) for m in METRICS}
            if variant != "plain":
                for m in METRICS:
                    a = np.array([q[m] for q in rows[variant]])
                    b = np.array([q[m] for q in rows["plain"]])
                    e[f"p_{m}"] = round(paired_test(a, b, method="randomization", seed=13)["p_value"], 4)
            entry[variant] = e
        out["datasets"][name] = entry
        print(json.dumps({name: entry}), flush=True)
    if args.out:
        from toolret.atomic import write_json

        write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
