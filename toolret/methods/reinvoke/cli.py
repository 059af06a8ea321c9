"""``toolret reinvoke ...`` commands (what the Re-Invoke DVC stages run).

Hook into ``toolret/cli.py``'s ``build_parser`` (after ``sub = p.add_subparsers(...)``)::

    from toolret.methods.reinvoke.cli import add_subcommands; add_subcommands(sub)

Commands:
    synth-queries  --catalog DIR | --dataset NAME  --out FILE   synthetic queries (JSONL + .meta.json)
    intents        --catalog DIR | --dataset NAME  --out FILE   intents of the test queries
    hyde           --catalog DIR | --dataset NAME  --out FILE   HyDE hypothetical documents
    evaluate       --catalog DIR | --dataset NAME  --artifacts DIR --out DIR   all methods + ablations
    report         --runs DIR --datasets A B ... --out FILE.md   ablation table (markdown + JSON)
Every command takes ``--set key=value`` overrides of ``params.reinvoke`` (e.g. ``--set n_queries=3``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _params(args: argparse.Namespace) -> dict[str, Any]:
    from toolret.config import load_params
    from toolret.methods.reinvoke.config import parse_overrides

    params = load_params(getattr(args, "params", None))
    overrides = parse_overrides(getattr(args, "set", None))
    if overrides:
        params = {**params, "reinvoke": {**(params.get("reinvoke", {}) or {}), **overrides}}
    return params


def _catalog(args: argparse.Namespace, params: dict[str, Any]):
    if args.catalog:
        from toolret.catalog.io import load_catalog

        return load_catalog(args.catalog)
    from toolret.cli import _load_named

    return _load_named(args.dataset, params)


def _config(params: dict[str, Any], catalog):
    from toolret.methods.reinvoke.config import ReInvokeConfig

    return ReInvokeConfig.from_params(params, dataset=catalog.name)


def cmd_synth_queries(args: argparse.Namespace) -> None:
    from toolret.methods.reinvoke.artifacts import build_synthetic_queries

    params = _params(args)
    catalog = _catalog(args, params)
    _, meta = build_synthetic_queries(catalog, _config(params, catalog), args.out, docs=args.docs)
    print(json.dumps({k: meta[k] for k in ("dataset", "counts", "llm_calls", "seconds")}))


def _cmd_per_query(builder_name: str, keys: tuple[str, ...]):
    def cmd(args: argparse.Namespace) -> None:
        from toolret.methods.reinvoke import artifacts

        params = _params(args)
        catalog = _catalog(args, params)
        _, meta = getattr(artifacts, builder_name)(catalog, _config(params, catalog), args.out, split=args.split)
        print(json.dumps({k: meta[k] for k in keys}))

    return cmd


cmd_intents = _cmd_per_query("build_intents", ("dataset", "counts", "llm_calls", "seconds", "mean_intents"))
cmd_hyde = _cmd_per_query("build_hyde", ("dataset", "counts", "llm_calls", "seconds"))


def cmd_evaluate(args: argparse.Namespace) -> None:
    from toolret.methods.reinvoke.artifacts import read_jsonl
    from toolret.methods.reinvoke.experiment import run

    params = _params(args)
    catalog = _catalog(args, params)
    art = Path(args.artifacts)

    def opt(name: str):
        return read_jsonl(art / name) if (art / name).is_file() else None

    docs = args.docs or (params.get("reinvoke", {}) or {}).get("eval_docs") or ["original"]
    docs = [d for d in docs if d in catalog.doc_variants()]
    ablations = {} if args.no_ablations else None
    run(catalog, params, args.out, synthetic=read_jsonl(art / "synthetic_queries.jsonl"),
        intents=read_jsonl(art / "intents.jsonl"), hyde=opt("hyde.jsonl"), docs=docs, ablations=ablations,
        split=args.split, log=lambda s: print(s, flush=True))


def cmd_report(args: argparse.Namespace) -> None:
    from toolret.methods.reinvoke.report import write_report

    out = write_report(Path(args.runs), args.datasets, Path(args.out), notes=args.notes)
    print(f"wrote {out}")


def add_subcommands(subparsers) -> None:
    """Add ``toolret reinvoke <command>`` to the main CLI's sub-parsers."""
    p = subparsers.add_parser("reinvoke", help="Re-Invoke: generate synthetic queries / intents, evaluate, report")
    sub = p.add_subparsers(dest="reinvoke_command", required=True)

    def common(sp, out_help: str):
        src = sp.add_mutually_exclusive_group(required=True)
        src.add_argument("--catalog", help="curated catalogue directory")
        src.add_argument("--dataset", help="dataset name (loaded from the sources)")
        sp.add_argument("--out", required=True, help=out_help)
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override params.reinvoke.KEY")

    s = sub.add_parser("synth-queries", help="generate synthetic queries for every tool")
    common(s, "JSONL file")
    s.add_argument("--docs", default="original", help="document variant the queries are generated from")
    s.set_defaults(func=cmd_synth_queries)
    for name, fn, hlp in (("intents", cmd_intents, "extract intents of a split's queries"),
                          ("hyde", cmd_hyde, "write HyDE hypothetical documents for a split's queries")):
        s = sub.add_parser(name, help=hlp)
        common(s, "JSONL file")
        s.add_argument("--split", default="test")
        s.set_defaults(func=fn)
    e = sub.add_parser("evaluate", help="evaluate reinvoke, reinvoke-bm25, hyde and the ablations from artifacts")
    common(e, "runs directory of the dataset (data/runs/<ds>)")
    e.add_argument("--artifacts", required=True, help="directory with synthetic_queries/intents/hyde .jsonl")
    e.add_argument("--docs", nargs="*", help="document variants (default params.reinvoke.eval_docs)")
    e.add_argument("--split", default="test")
    e.add_argument("--no-ablations", action="store_true")
    e.set_defaults(func=cmd_evaluate)
    r = sub.add_parser("report", help="write the ablation table (markdown with an embedded JSON block)")
    r.add_argument("--runs", default="data/runs")
    r.add_argument("--datasets", nargs="+", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--notes", help="a markdown file whose text is appended to the report")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help=argparse.SUPPRESS)
    r.set_defaults(func=cmd_report)
