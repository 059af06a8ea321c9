"""`toolret` command line: thin commands over the library (also the commands DVC stages run)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from toolret.catalog.model import CatalogError


def _params(args: argparse.Namespace) -> dict[str, Any]:
    from toolret.config import load_params

    return load_params(getattr(args, "params", None))


def _load_named(name_or_path: str, params: dict[str, Any]):
    from toolret.catalog.registry import load_dataset
    from toolret.config import project_dir

    src, cat = params.get("source", {}), params.get("catalog", {})
    return load_dataset(name_or_path, root=src.get("root"), beir=src.get("beir"),
                        dev_fraction=cat.get("dev_fraction", 0.05), seed=cat.get("seed", 13),
                        project_dir=project_dir())


def cmd_catalog_build(args: argparse.Namespace) -> None:
    from toolret.catalog.io import save_catalog
    from toolret.catalog.validation import validate_catalog

    catalog = _load_named(args.dataset, _params(args))
    report = validate_catalog(catalog)
    if not report.success:
        raise CatalogError(f"dataset {args.dataset!r} failed validation; nothing written:\n{report.message}")
    save_catalog(catalog, args.out)
    print(json.dumps(catalog.stats()))


def cmd_catalog_clean(args: argparse.Namespace) -> None:
    from toolret.catalog.cleanup import clean_catalog
    from toolret.catalog.io import load_catalog, save_catalog

    params = _params(args)
    catalog = load_catalog(args.catalog)
    cleaned, report = clean_catalog(catalog, **_cleanup_kwargs(params))
    cleaned.provenance = {**cleaned.provenance, "cleanup": report}
    save_catalog(cleaned, args.out)
    print(json.dumps({k: v for k, v in report.items() if not isinstance(v, (list, dict))}))


def _cleanup_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    from toolret.retrieval.models import resolve_encoder

    p = params.get("cleanup", {})
    model = params.get("dense", {}).get("model", "all-MiniLM-L6-v2")
    from transformers import AutoTokenizer

    return {"tokenizer": AutoTokenizer.from_pretrained(str(resolve_encoder(model))),
            "target_length": p.get("target_length", "median")}


def cmd_finetune(args: argparse.Namespace) -> None:
    from toolret.catalog.io import load_catalog
    from toolret.retrieval.finetune import finetune
    from toolret.retrieval.registry import finetune_config

    report = finetune(load_catalog(args.catalog), args.out, finetune_config(_params(args)))
    print(json.dumps(report, default=str))


def cmd_index(args: argparse.Namespace) -> None:
    from tqdm import tqdm

    from toolret.atomic import atomic_directory
    from toolret.catalog.io import load_catalog
    from toolret.retrieval.registry import build_retriever

    params = _params(args)
    catalog = load_catalog(args.catalog)
    with atomic_directory(args.out) as tmp:
        for docs in tqdm(catalog.doc_variants(), desc=f"index {catalog.name}/{args.method}"):
            retriever = build_retriever(args.method, catalog, params, args.model)
            retriever.index(catalog.tool_ids, catalog.docs(docs))
            retriever.save(tmp / docs)


def cmd_evaluate_index(args: argparse.Namespace) -> None:
    from toolret.atomic import atomic_directory
    from toolret.catalog.io import load_catalog
    from toolret.evaluation import evaluate_retriever, provenance, write_result
    from toolret.retrieval.registry import load_index
    from toolret.tracking.provenance import sha256_tree

    params = _params(args)
    ev = params.get("evaluation", {})
    catalog = load_catalog(args.catalog)
    with atomic_directory(args.out) as tmp:
        for variant_dir in sorted(p for p in Path(args.index).iterdir() if p.is_dir()):
            retriever = load_index(variant_dir)
            prov = provenance(catalog, params, {"catalog": sha256_tree(args.catalog), "index": sha256_tree(variant_dir)})
            result, rows = evaluate_retriever(retriever, catalog, method=retriever.name, docs=variant_dir.name,
                                              ks=ev.get("ks", [1, 3, 5, 10]), k_max=ev.get("k_max", 100),
                                              bootstrap_samples=ev.get("bootstrap_samples", 1000),
                                              seed=ev.get("seed", 13), provenance=prov)
            write_result(result, rows, tmp / f"{variant_dir.name}.json")
            print(json.dumps({"dataset": catalog.name, "method": retriever.name, "docs": variant_dir.name,
                              **{m: round(v, 4) for m, v in result["metrics"].items() if m.endswith("@5")}}))


def cmd_evaluate(args: argparse.Namespace) -> None:
    from toolret.evaluation import evaluate_retriever, provenance, write_result
    from toolret.retrieval.registry import build_retriever

    params = _params(args)
    ev = params.get("evaluation", {})
    ks = [int(k) for k in args.k.split(",")] if args.k else ev.get("ks", [1, 3, 5, 10])
    catalog = _load_named(args.dataset, params)
    if args.docs == "cleaned":
        from toolret.catalog.cleanup import clean_catalog

        catalog, _ = clean_catalog(catalog, **_cleanup_kwargs(params))
    documents = catalog.docs(args.docs)
    t0 = time.perf_counter()
    retriever = build_retriever(args.method, catalog, params, args.model)
    retriever.index(catalog.tool_ids, documents)
    index_s = time.perf_counter() - t0
    result, rows = evaluate_retriever(retriever, catalog, method=args.method, docs=args.docs, ks=ks,
                                      k_max=ev.get("k_max", 100), split=args.split,
                                      bootstrap_samples=ev.get("bootstrap_samples", 1000), seed=ev.get("seed", 13),
                                      provenance=provenance(catalog, params))
    result["index_build_s"] = index_s
    out, per_query = write_result(result, rows, args.output)
    print(json.dumps({"dataset": result["dataset"], "method": args.method, "docs": args.docs,
                      "n_queries": result["n_queries"],
                      "metrics": {m: round(v, 4) for m, v in result["metrics"].items()}, "output": str(out)}, indent=1))


def cmd_report(args: argparse.Namespace) -> None:
    """Markdown comparison tables (mean [CI], paired test vs the strongest baseline) for every dataset."""
    from toolret.atomic import write_text
    from toolret.tracking.comparison import compare_results, headline_metrics

    runs = Path(args.runs)
    sections = []
    for dataset_dir in sorted(p for p in runs.iterdir() if p.is_dir()):
        results = {p: json.loads(p.read_text(encoding="utf-8")) for p in sorted(dataset_dir.glob("*/*.json"))}
        paths = [p for p, r in results.items() if "metrics" in r]  # skips e.g. ablation summaries
        if not paths:
            continue
        first = results[paths[0]]
        metrics = headline_metrics(sorted(first["metrics"]), k=args.k)
        sections.append(compare_results(dataset_dir.name, paths, metrics=metrics).markdown())
    text = "\n".join(sections)
    if args.out:
        write_text(args.out, text)
    print(text)


def cmd_datasets(args: argparse.Namespace) -> None:
    from toolret.catalog.registry import DATASETS
    from toolret.retrieval.registry import available_methods

    print(json.dumps({"datasets": DATASETS, "methods": available_methods()}, indent=1))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="toolret", description=__doc__)
    p.add_argument("--params", help="params.yaml to use (default: the project's)")
    sub = p.add_subparsers(dest="command", required=True)

    cat = sub.add_parser("catalog", help="build / clean curated catalogs").add_subparsers(dest="action", required=True)
    b = cat.add_parser("build", help="import + verify + validate a dataset into a curated catalog")
    b.add_argument("--dataset", required=True, help="dataset name or BEIR directory")
    b.add_argument("--out", required=True)
    b.set_defaults(func=cmd_catalog_build)
    c = cat.add_parser("clean", help="add the MTRB-style cleaned document variant")
    c.add_argument("--catalog", required=True)
    c.add_argument("--out", required=True)
    c.set_defaults(func=cmd_catalog_clean)

    f = sub.add_parser("finetune", help="fine-tune the dense encoder on a catalog's train split")
    f.add_argument("--catalog", required=True)
    f.add_argument("--out", required=True)
    f.set_defaults(func=cmd_finetune)

    i = sub.add_parser("index", help="build a method's index for every document variant of a catalog")
    i.add_argument("--catalog", required=True)
    i.add_argument("--method", required=True)
    i.add_argument("--model", help="dense: encoder name or folder; dense-ft: the fine-tune artifact directory")
    i.add_argument("--out", required=True)
    i.set_defaults(func=cmd_index)

    e = sub.add_parser("evaluate-index", help="evaluate saved indexes (one JSON per document variant)")
    e.add_argument("--catalog", required=True)
    e.add_argument("--index", required=True)
    e.add_argument("--out", required=True)
    e.set_defaults(func=cmd_evaluate_index)

    ev = sub.add_parser("evaluate", help="evaluate one method on one dataset end to end")
    ev.add_argument("--dataset", required=True, help="dataset name or BEIR directory")
    ev.add_argument("--method", required=True)
    ev.add_argument("--k", help="comma-separated cutoffs, e.g. 1,3,5,10")
    ev.add_argument("--docs", default="original", choices=["original", "cleaned", "human"])
    ev.add_argument("--split", default="test")
    ev.add_argument("--model", help="dense: encoder name or folder; dense-ft: fine-tune artifact directory "
                    "(default data/models/<dataset>/dense-ft, trained if absent)")
    ev.add_argument("--output", required=True)
    ev.set_defaults(func=cmd_evaluate)

    from toolret.methods.reinvoke.cli import add_subcommands as add_reinvoke

    add_reinvoke(sub)

    r = sub.add_parser("report", help="markdown comparison tables of every evaluated dataset")
    r.add_argument("--runs", default="data/runs")
    r.add_argument("--k", type=int, default=5)
    r.add_argument("--out")
    r.set_defaults(func=cmd_report)

    d = sub.add_parser("datasets", help="list dataset and method names")
    d.set_defaults(func=cmd_datasets)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except CatalogError as e:
        print(f"toolret: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
