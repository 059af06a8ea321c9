"""`toolret` command line: thin commands over the library (also the commands DVC stages run), and the
subcommands registered methods contribute (``Method.cli``)."""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from toolret.adapt import GeneratorSpec, adapt, resolve_index
from toolret.atomic import atomic_directory, claim_output_dir, write_json, write_text
from toolret.catalog.cleanup import clean_catalog
from toolret.catalog.datasets import DATASETS, load_dataset
from toolret.catalog.folds import kfold_split
from toolret.catalog.importers.mcp import import_mcp
from toolret.catalog.importers.openapi import import_openapi
from toolret.catalog.io import load_catalog, save_catalog
from toolret.catalog.select import select_queries
from toolret.llm.synthetic_catalog import sample_tools, stored_group_queries, stored_tool_queries, synthesize
from toolret.catalog.validation import validate_catalog
from toolret.config import apply_overrides, load_params, params_source
from toolret.errors import CatalogError, ToolretError
from toolret.evaluation import (commit_record_run, evaluate_retriever, grid_summary, provenance, record_fields,
                                run_path_for, write_result)
from toolret.adapt.promote_cli import add_commands as promote_commands
from toolret.feedback.cli import add_commands as feedback_commands
from toolret.gateway.cli import add_commands as gateway_commands
from toolret.jsonl_artifacts import write_rewrites
from toolret.llm.engines import build_generator
from toolret.llm.server import serve_llm
from toolret.llm.shards import git_commit, record_generations, run_durable
from toolret.paths import data_dir, project_dir
from toolret.out_folders import OUTPUT_NOUNS, PIPELINE_FILE, output_made_by
from toolret.pipeline import Pipeline, build_pipeline
from toolret.provenance import sha256_tree
from toolret.registry import (BuildContext, build_component, cli_commands, component, components, generation_job,
                              parse_spec, pipelines, report_hook)
from toolret.reproduce import add_arguments as reproduce_arguments
from toolret.reproduce import run
from toolret.retrieval.models import resolve_encoder
from toolret.roles import Corpus
from toolret.serve import serve
from toolret.serving.mcp_server import run_stdio
from toolret.serving.service import Limits
from toolret.stages import render_dvc_yaml, write_dvc_yaml
from toolret.tracking.comparison import compare_results, headline_metrics
from toolret.tracking.reproduction import log_reproduction_matrix
from toolret.tracking.runs import find_result_files
from toolret.tracking.training_steps import install as install_mlflow_training_logger


def _params(args: argparse.Namespace):
    """The validated ``params.yaml`` (``--params``) with ``--set section.key=value`` overrides."""

    return load_params(getattr(args, "params", None), getattr(args, "set", None))


def _load_named(name_or_path: str, params):
    return load_dataset(name_or_path, root=params.source.root, beir=params.source.beir,
                        dev_fraction=params.catalog.dev_fraction, seed=params.catalog.seed,
                        project_dir=project_dir())


def _catalog(args: argparse.Namespace, params, components: list[str] | tuple[str, ...] = ()):
    """``--catalog DIR`` (a curated catalog) or ``--dataset NAME|BEIR_DIR`` (loaded from the sources),
    folded for ``components`` (see :func:`_folded`)."""
    if getattr(args, "catalog", None):

        return _folded(load_catalog(args.catalog), params, components)
    return _folded(_load_named(args.dataset, params), params, components)


def _folded(catalog, params, components: list[str] | tuple[str, ...] = ()):
    """The catalog a command works on: fold ``catalog.fold`` of ``catalog.folds`` when ``folds`` is set;
    else, for components that learn (``Component.trains``) on a dataset without a train split, fold
    ``catalog.fold`` of ``catalog.auto_folds`` (never test on what was trained on); else ``catalog``."""
    cfg = params.catalog
    folds = cfg.folds
    if not folds and cfg.auto_folds and components and not catalog.split("train"):

        if any(component(c).learns_from(catalog.name, params) for c in components):
            folds = cfg.auto_folds
    if not folds:
        return catalog

    return kfold_split(catalog, folds, cfg.fold, cfg.seed)


def _spec(method: str, params):
    """The command's pipeline spec, parsed once (templates resolved against ``params``) and passed down."""

    return parse_spec(method, params=params)


def _claim_out(args: argparse.Namespace, command: str, replace_own: bool = True) -> None:
    """``--out`` under the one rule of :func:`toolret.atomic.claim_output_dir` (before any work)."""
    claim_output_dir(args.out, command, force=getattr(args, "force", False), made_by=output_made_by,
                     replace_own=replace_own, nouns=OUTPUT_NOUNS)


def cmd_catalog_build(args: argparse.Namespace) -> None:
    _claim_out(args, "catalog build")
    catalog = _load_named(args.dataset, _params(args))
    report = validate_catalog(catalog)
    if not report.success:
        raise CatalogError(f"dataset {args.dataset!r} failed validation; nothing written:\n{report.summary()}")
    save_catalog(catalog, args.out)
    print(json.dumps(catalog.stats()))


def cmd_catalog_clean(args: argparse.Namespace) -> None:
    _claim_out(args, "catalog clean")
    params = _params(args)
    catalog = load_catalog(args.catalog)
    cleaned, report = clean_catalog(catalog, **_cleanup_kwargs(params))
    cleaned.provenance = {**cleaned.provenance, "cleanup": report}
    save_catalog(cleaned, args.out)
    print(json.dumps({k: v for k, v in report.items() if not isinstance(v, (list, dict))}))


def cmd_catalog_synthesize(args: argparse.Namespace) -> None:
    """A training catalog from its source's tools and their committed per-tool generations (``synthetic.<name>``):
    the source is a dataset's curated catalog (``data/curated/<source>``) or, outside ``datasets``, a named
    dataset loaded from its sources and cleaned."""

    _claim_out(args, "catalog synthesize")
    params = _params(args)
    if args.name not in params.synthetic:
        raise CatalogError(f"no synthetic catalog {args.name!r} in params.yaml (has {sorted(params.synthetic)})")
    spec = params.synthetic[args.name]
    if spec.source in params.datasets:

        source = load_catalog(data_dir() / "curated" / spec.source)
    else:  # a corpus outside `datasets`: from its sources, cleaned over the whole corpus as its evaluations are

        source, _ = clean_catalog(_load_named(spec.source, params), **_cleanup_kwargs(params))
    if spec.sample_tools:

        source = sample_tools(source, spec.sample_tools, spec.seed)
    per_tool, job = stored_tool_queries(source, params, spec)
    catalog = synthesize(source, per_tool, spec, args.name, job, stored_group_queries(source, params, spec))
    report = validate_catalog(catalog)
    if not report.success:
        raise CatalogError(f"synthetic catalog {args.name!r} failed validation; nothing written:\n{report.summary()}")
    save_catalog(catalog, args.out)
    print(json.dumps({k: v for k, v in catalog.provenance["synthetic"].items() if not isinstance(v, list)}))


def cmd_catalog_select(args: argparse.Namespace) -> None:
    """A catalog whose test split is a slice of another's judged queries (toolret.catalog.select)."""

    _claim_out(args, "catalog select")
    catalog = select_queries(load_catalog(args.catalog), args.split, min_gold=args.min_gold, name=args.name,
                             sample=args.sample, seed=args.seed)
    report = validate_catalog(catalog)
    if not report.success:
        raise CatalogError(f"selected catalog {args.name!r} failed validation; nothing written:\n{report.summary()}")
    save_catalog(catalog, args.out)
    print(json.dumps({**catalog.provenance["selection"], "out": args.out}))


def cmd_import_openapi(args: argparse.Namespace) -> None:
    """A curated catalog of an OpenAPI 3 file: one tool per operation (toolret.catalog.importers.openapi)."""

    _claim_out(args, "import-openapi", replace_own=False)  # a re-import would drop an evaluation catalog's queries
    catalog = import_openapi(args.spec, name=args.name, queries=args.queries)
    save_catalog(catalog, args.out)
    print(json.dumps({**catalog.stats(), "purpose": catalog.provenance["purpose"], "out": args.out}))


def cmd_import_mcp(args: argparse.Namespace) -> None:
    """A curated catalog of a running MCP server's tools (toolret.catalog.importers.mcp)."""

    _claim_out(args, "import-mcp", replace_own=False)
    catalog = import_mcp(args.server_command, args.url, name=args.name, queries=args.queries, timeout_s=args.timeout)
    save_catalog(catalog, args.out)
    print(json.dumps({**catalog.stats(), "purpose": catalog.provenance["purpose"], "out": args.out}))


def _cleanup_kwargs(params) -> dict[str, Any]:
    from transformers import AutoTokenizer

    return {"tokenizer": AutoTokenizer.from_pretrained(str(resolve_encoder(params.cleanup.tokenizer))),
            "target_length": params.cleanup.target_length}


def cmd_fit(args: argparse.Namespace) -> None:
    """Fit one component on a catalog; its learned artifact is written to ``--out``."""

    if args.record_generations:

        record_generations(args.record_generations)
    params = _params(args)
    catalog = _catalog(args, params, [args.component])
    comp = build_component(args.component, BuildContext(catalog, params, model=args.out))
    comp.fit(catalog)
    print(json.dumps({"dataset": catalog.name, "component": args.component, "out": args.out}))


def cmd_rewrite(args: argparse.Namespace) -> None:
    """Rewrite every judged query of a split with a rewriter; the outputs are written to ``--out``
    (:func:`toolret.jsonl_artifacts.write_rewrites`)."""

    params = _params(args)
    if component(args.component).role != "rewriter":
        raise CatalogError(f"{args.component!r} is a {component(args.component).role}, not a rewriter")
    catalog = _catalog(args, params, [args.component])
    meta = write_rewrites(build_component(args.component, BuildContext(catalog, params)), catalog, args.split, args.out)
    print(json.dumps({"dataset": catalog.name, "component": args.component, "counts": meta.get("counts")}))


def _doc_variants(catalog, requested: list[str] | None) -> list[str]:
    have = catalog.doc_variants()
    if not requested:
        return have
    missing = [d for d in requested if d not in have]
    if missing:
        raise CatalogError(f"catalog {catalog.name!r} has no {missing} documents (has {have})")
    return list(requested)


def cmd_index(args: argparse.Namespace) -> None:
    """Build (fitting what is absent) and save a pipeline per document variant."""
    from tqdm import tqdm

    _claim_out(args, "index")
    params = _params(args)
    spec = _spec(args.method, params)
    catalog = _folded(load_catalog(args.catalog), params, spec.components)
    with atomic_directory(args.out) as tmp:
        for docs in tqdm(_doc_variants(catalog, args.docs), desc=f"index {catalog.name}/{args.method}"):
            pipeline = build_pipeline(spec, catalog, params, args.model)
            pipeline.fit(catalog)
            pipeline.index(Corpus.from_catalog(catalog, docs))
            pipeline.save(tmp / docs)


def _provenance(catalog, params, spec, artifacts: dict[str, str] | None = None) -> dict[str, Any]:
    """Provenance with only the params sections the pipeline (``spec``: a PipelineSpec or a name) and the
    evaluation read."""

    spec = _spec(spec, params) if isinstance(spec, str) else spec
    sections = ["evaluation", *spec.sections()]
    dumped = params.model_dump(mode="json")
    return {**provenance(catalog, {s: dumped[s] for s in sections if s in dumped}, artifacts),
            "params_file": params_source(params)}


def _evaluate(pipeline, catalog, params, *, method: str, docs: str, split: str = "test",
              ks: list[int] | None = None, artifacts: dict[str, str] | None = None, spec=None, output=None):
    """Evaluate a built pipeline; ``spec`` (its PipelineSpec; default: ``method`` parsed) names its components
    for provenance; with ``output`` (the result JSON's path) its TREC run file is written beside it."""

    ev = params.evaluation
    result, rows = evaluate_retriever(pipeline, catalog, method=method, docs=docs, ks=ks or ev.ks, k_max=ev.k_max,
                                      split=split, bootstrap_samples=ev.bootstrap_samples, seed=ev.seed,
                                      provenance=_provenance(catalog, params, spec or method, artifacts),
                                      run_path=None if output is None else run_path_for(output))
    stats = {c.name: c.stats for c in pipeline.components if getattr(c, "stats", None)}
    if stats:
        result["components"] = stats
    return result, rows


def cmd_evaluate_index(args: argparse.Namespace) -> None:
    _claim_out(args, "evaluate-index")
    params = _params(args)
    base = load_catalog(args.catalog)
    out = Path(args.out)
    with atomic_directory(out) as tmp:
        for variant_dir in sorted(p for p in Path(args.index).iterdir() if p.is_dir()):
            pipeline = Pipeline.load(variant_dir)
            catalog = _folded(base, params, [c.name for c in pipeline.components])
            name = f"{variant_dir.name}.json"
            result, rows = _evaluate(pipeline, catalog, params, method=pipeline.name, docs=variant_dir.name,
                                     artifacts={"catalog": sha256_tree(args.catalog), "index": sha256_tree(variant_dir)},
                                     output=tmp / name)
            write_result(result, rows, tmp / name, run_info_to=out / name)
            print(json.dumps({"dataset": catalog.name, "method": pipeline.name, "docs": variant_dir.name,
                              **{m: round(v, 4) for m, v in result["metrics"].items() if m.endswith("@5")}}))


def cmd_evaluate(args: argparse.Namespace) -> None:
    """One pipeline on one dataset end to end (fitting what is absent)."""

    params = _params(args)
    gates = _parse_gates(args.fail_under)  # malformed gates fail before the (long) evaluation
    ks = [int(k) for k in args.k.split(",")] if args.k else None
    spec = _spec(args.method, params)
    catalog = _folded(_load_named(args.dataset, params), params, spec.components)
    # the cleaned documents, where the evaluation or a component (hybrid's dense side) reads them
    if "cleaned" in {args.docs} | spec.reads_docs(params) and "cleaned" not in catalog.doc_variants():

        catalog, _ = clean_catalog(catalog, **_cleanup_kwargs(params))
    t0 = time.perf_counter()
    pipeline = build_pipeline(spec, catalog, params, args.model)
    pipeline.fit(catalog)
    pipeline.index(Corpus.from_catalog(catalog, args.docs))
    index_s = time.perf_counter() - t0
    result, rows = _evaluate(pipeline, catalog, params, method=args.method, docs=args.docs, split=args.split, ks=ks,
                             spec=spec, output=args.output)
    result["index_build_s"] = index_s
    if args.record:  # the record's condition (spec, params hash, models) and what produced it (commit, cost)

        result.update(record_fields(args.method, spec, params, pipeline.components,
                                    seconds=time.perf_counter() - t0))
        # a record in git names each query by its id: the texts are the dataset's, which stays in ../shared
        rows = [{k: v for k, v in r.items() if k != "query"} for r in rows]
    out, _ = write_result(result, rows, args.output, run_info_to=args.output if args.record else None)
    if args.record:  # the run file committed beside the record: <stem>.run.trec.gz

        commit_record_run(args.output)
    print(json.dumps({"dataset": result["dataset"], "method": args.method, "docs": args.docs,
                      "n_queries": result["n_queries"],
                      "metrics": {m: round(v, 4) for m, v in result["metrics"].items()}, "output": str(out)}, indent=1))
    if gates:
        _check_gates(gates, result["metrics"], out)


FAIL_UNDER_EXIT = 3  # `toolret evaluate --fail-under`: a metric fell short (2: usage / data errors)


def _parse_gates(specs: list[str] | None) -> dict[str, float]:
    """``--fail-under recall@5=0.8`` (repeatable, or comma-separated) -> ``{"recall@5": 0.8}``."""
    gates: dict[str, float] = {}
    for spec in specs or []:
        for item in filter(None, (part.strip() for part in spec.split(","))):
            name, sep, value = item.partition("=")
            try:
                if not sep or not name.strip():
                    raise ValueError
                gates[name.strip()] = float(value)
            except ValueError:
                raise CatalogError(f"--fail-under {item!r}: expected METRIC=VALUE, e.g. recall@5=0.8") from None
    return gates


def _check_gates(gates: dict[str, float], metrics: dict[str, float], output) -> None:
    """Exit :data:`FAIL_UNDER_EXIT` naming every metric below its gate (the result is already written)."""
    unknown = sorted(set(gates) - set(metrics))
    if unknown:
        raise CatalogError(f"--fail-under: no metric {unknown} in the result (has {sorted(metrics)}; "
                           "--k sets the cutoffs); result written to " + str(output))
    short = {m: (metrics[m], floor) for m, floor in gates.items() if metrics[m] < floor}
    if short:
        names = ", ".join(f"{m} = {v:.4f} < {floor:g}" for m, (v, floor) in short.items())
        print(f"toolret: regression gate failed: {names} (result written to {output})", file=sys.stderr)
        raise SystemExit(FAIL_UNDER_EXIT)
    print("toolret: regression gate passed: " + ", ".join(f"{m} = {metrics[m]:.4f} >= {floor:g}"
                                                          for m, floor in gates.items()), file=sys.stderr)


def cmd_evaluate_grid(args: argparse.Namespace) -> None:
    """Every row of a params grid (``section.key`` -> {name: {method, set, baseline}}), paired tests vs baselines."""

    _claim_out(args, "evaluate-grid")
    if args.record_generations:

        record_generations(args.record_generations)
    params = _params(args)
    grid = params
    for part in args.grid.split("."):
        grid = getattr(grid, part, None)
        if grid is None:
            raise CatalogError(f"--grid {args.grid!r}: no such params key")
    rows_params = {name: apply_overrides(params, v.set) if v.set else params for name, v in grid.items()}
    specs = {name: _spec(v.method, rows_params[name]) for name, v in grid.items()}  # each row's spec, parsed once
    catalog = _folded(load_catalog(args.catalog), params, [c for spec in specs.values() for c in spec.components])
    out = Path(args.out)
    results: dict[str, tuple[dict, list]] = {}
    with atomic_directory(out) as tmp:
        for name, variant in grid.items():
            p = rows_params[name]
            pipeline = build_pipeline(specs[name], catalog, p)
            pipeline.fit(catalog)  # learns what is absent (as `index` and `evaluate` do); no-op where stored
            pipeline.index(Corpus.from_catalog(catalog, args.docs))
            result, rows = _evaluate(pipeline, catalog, p, method=f"{variant.method}[{name}]", docs=args.docs,
                                     split=args.split, spec=specs[name], output=tmp / f"{name}.json")
            result["grid"] = {"name": name, **variant.model_dump()}
            write_result(result, rows, tmp / f"{name}.json", run_info_to=out / f"{name}.json")
            results[name] = (result, rows)
            print(json.dumps({"dataset": catalog.name, "variant": name,
                              **{m: round(v, 4) for m, v in result["metrics"].items() if m.endswith("@5")}}), flush=True)

        write_json(tmp / "summary.json", grid_summary(catalog.name, args.grid, grid, results))


def cmd_report(args: argparse.Namespace) -> None:
    """Markdown comparison tables (mean [CI], paired test vs the strongest baseline) for every dataset."""

    runs = Path(args.runs)
    sections = []
    for dataset_dir in sorted(p for p in runs.iterdir() if p.is_dir()):
        paths = [f for method_dir in sorted(dataset_dir.iterdir()) for f in find_result_files(method_dir)]
        if not paths:
            continue
        first = json.loads(paths[0].read_text(encoding="utf-8"))
        metrics = headline_metrics(sorted(first["metrics"]), k=args.k)
        sections.append(compare_results(dataset_dir.name, paths, metrics=metrics).markdown())
    text = "\n".join(sections)
    if args.out:
        write_text(args.out, text)
    print(text)


def cmd_reproduce(args: argparse.Namespace) -> None:
    """Check the reproduction matrix against the records (after rerunning its commands unless
    ``--from-records``) and / or render the README's headline table; exit 1 when a cell fails."""

    root = project_dir()  # a malformed matrix: MatrixError, printed by main (exit 2)
    status = run(args, root, log_results=lambda results: log_reproduction_matrix(results, project_dir=root))
    if status:
        raise SystemExit(status)


def cmd_report_ablations(args: argparse.Namespace) -> None:
    """The ablation report of a grid (``docs/<method>_ablations.md``), written by the method's report hook."""

    params = _params(args)
    out = report_hook(args.method)(Path(args.runs), args.datasets, Path(args.out), params=params, notes=args.notes)
    print(f"wrote {out}")


def method_command(command):
    """The function running a method's subcommand (:class:`toolret.registry.CliCommand`): its ``run`` target
    called with the args, the params and, where the command takes ``--catalog`` / ``--dataset``, the catalog."""
    def run(args: argparse.Namespace) -> None:
        import importlib

        params = _params(args)
        module, _, func = command.run.partition(":")
        getattr(importlib.import_module(module), func)(args, params, _catalog(args, params) if command.source else None)

    return run


def cmd_generate_shards(args: argparse.Namespace) -> None:
    """Advance a durable LLM job by committed-size shards (``toolret.llm.shards``); ``--commit`` commits
    each finished shard to git as it lands."""

    params = _params(args)
    catalog = _catalog(args, params)
    sample: dict = {}
    if args.sample_tools:  # recorded in the shard meta: the shard-store test re-derives the prompts from it

        catalog = sample_tools(catalog, args.sample_tools, args.sample_seed)
        sample = {"source_catalog": catalog.provenance["source"], "sample_tools": catalog.provenance["sample_tools"]}
    prompts, sampling, llm, provenance = generation_job(args.job)(catalog, params, args.n)
    provenance = {**provenance, **sample}
    gen = llm.generator
    store = gen.store

    def committed(path, meta):
        if args.commit:
            rate = meta["run_info"]["samples_per_s"]
            git_commit([path, path.with_suffix(".meta.json")], f"generations: {args.job} {path.name} "
                       f"({meta['n_records']} samples, {rate} samples/s)", project_dir())

    summary = run_durable(store, args.job, prompts, sampling, gen, provenance, shard_prompts=args.shard_prompts,
                          on_shard=committed, max_shards=args.max_shards)
    print(json.dumps(summary))


def cmd_adapt(args: argparse.Namespace) -> None:
    """A trained, selected, registered and servable retriever for a catalog (toolret.adapt)."""

    _claim_out(args, "adapt")  # its own previous run is resumed (generations kept), never swapped
    params = _params(args)
    settings = params.adapt  # params.yaml's adapt section; a flag given overrides it
    base_url = args.llm_base_url or settings.llm_base_url
    spec = GeneratorSpec(model=args.llm_model or settings.llm_model, base_url=base_url,
                         engine="openai" if base_url else args.llm_engine or settings.llm_engine)
    report = adapt(args.catalog, args.out, queries=args.queries, budget=args.budget, generator=spec, n=args.n,
                   params=params, register=not args.no_register, retrain=args.retrain,
                   shard_prompts=args.shard_prompts, feedback=args.feedback,
                   only=[c.strip() for c in args.candidates.split(",") if c.strip()] if args.candidates else None,
                   say=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps({"champion": report["selection"]["champion"], "why": report["selection"]["why"],
                      "role": report.get("role", "champion"),
                      "index": str(Path(args.out) / report.get("role", "champion")), "seconds": report["seconds"],
                      "generated_this_run": report["generation"]["generated_this_run"],
                      **({"registered": report["mlflow"]["uri"]} if report.get("mlflow") else {})}, indent=1))


def _serving_limits(args: argparse.Namespace):
    return Limits(max_queries=args.max_queries, max_query_chars=args.max_query_chars, max_k=args.max_k,
                  max_body_bytes=args.max_body_bytes, max_in_flight=args.max_in_flight, workers=args.workers,
                  timeout_s=args.timeout, torch_threads=args.torch_threads, batching=not args.no_batching,
                  batch_max_queries=args.batch_max_queries, batch_wait_ms=args.batch_wait_ms,
                  batch_parallel=args.batch_parallel)


def _saved_pipeline(index: str) -> str:
    index = resolve_index(index)  # a registry URI (models:/adapt-<catalog>@champion) -> its folder
    if not (Path(index) / PIPELINE_FILE).is_file():
        raise CatalogError(f"--index {index}: not a saved pipeline (no {PIPELINE_FILE}; "
                           "one document variant of `toolret index`, e.g. data/indexes/<ds>/<method>/original)")
    return index


def cmd_serve(args: argparse.Namespace) -> None:
    """Serve a saved pipeline over HTTP: REST (``POST /search``) and MCP streamable HTTP (``/mcp``)."""
    import os

    serve(_saved_pipeline(args.index), host=args.host, port=args.port, catalog_dir=args.catalog,
          limits=_serving_limits(args), admin_token=args.admin_token or os.environ.get("TOOLRET_ADMIN_TOKEN"),
          extra_hosts=args.allowed_host)


def cmd_mcp(args: argparse.Namespace) -> None:
    """Serve a saved pipeline over MCP on stdio (the tool ``search_tools``), for desktop agents."""

    run_stdio(_saved_pipeline(args.index), catalog_dir=args.catalog, limits=_serving_limits(args))


def cmd_serve_llm(args: argparse.Namespace) -> None:
    """Serve a local LLM engine over the OpenAI API (``/v1/chat/completions``, ``/v1/completions``)."""

    if args.engine == "openai":
        raise CatalogError("serve-llm serves a local engine: --engine transformers or llama.cpp")
    gen = build_generator(args.engine, args.model, device=args.device, batch_size=args.batch_size,
                          num_threads=args.threads, progress=False)
    print(f"serving {gen.model_id} ({args.engine}) at http://{args.host}:{args.port}/v1", flush=True)
    serve_llm(gen, host=args.host, port=args.port, max_batch=args.batch_size, max_pending=args.max_pending)


def cmd_stages(args: argparse.Namespace) -> None:
    """Write ``dvc.yaml`` from the registry's stage templates (``--check``: fail if it is out of date)."""

    params = _params(args)
    if args.check:
        current = Path(args.out).read_text(encoding="utf-8") if Path(args.out).is_file() else ""
        if current != render_dvc_yaml(params):
            raise CatalogError(f"{args.out} is out of date with the registry / params.yaml: run `toolret stages`")
        print(f"{args.out} is up to date")
        return
    changed = write_dvc_yaml(args.out, params)
    print(f"{'wrote' if changed else 'unchanged'} {args.out}")


def cmd_datasets(args: argparse.Namespace) -> None:
    print(json.dumps({
        "datasets": DATASETS,
        "pipelines": {n: {"components": spec.components, "description": d}
                      for n, (spec, d) in pipelines(_params(args)).items()},
        "components": {role: [f"{c.name}: {c.description}" for c in components(role)]
                       for role in ("rewriter", "retriever", "reranker")},
        "compose": "[rewriter+]retriever[+reranker...], e.g. reinvoke-intents+bm25",
    }, indent=1))


# `toolret --help` lists the commands by what a user does; plumbing (what DVC stages and long jobs run) last
COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "Your tools": ("import-openapi", "import-mcp", "catalog", "adapt", "feedback", "promote"),
    "Search and serve": ("index", "serve", "mcp", "gateway", "receipts"),
    "Evaluate and compare": ("evaluate", "evaluate-grid", "report", "reproduce", "datasets"),
    "Plumbing (DVC stages, long jobs)": ("fit", "rewrite", "generate-shards", "evaluate-index", "report-ablations",
                                         "serve-llm", "stages"),
}
METHOD_GROUP = "Methods' own commands"


class _Commands:
    """The subcommands, each described on its own page; the top page lists them in :data:`COMMAND_GROUPS`
    (argparse's flat list is left out: a command is added without ``help``)."""

    def __init__(self, subparsers, parents: list[argparse.ArgumentParser] = ()) -> None:
        self.subparsers, self.helps, self.parents = subparsers, {}, list(parents)

    def add_parser(self, name: str, help: str, **kwargs) -> argparse.ArgumentParser:  # noqa: A002 - argparse's name
        self.helps[name] = help
        return self.subparsers.add_parser(name, description=help, parents=self.parents, **kwargs)

    def listing(self, method_commands: list[str]) -> str:
        import textwrap

        groups = {**COMMAND_GROUPS, METHOD_GROUP: tuple(method_commands)}
        grouped = [c for names in groups.values() for c in names]
        if sorted(grouped) != sorted(self.helps):
            raise AssertionError(f"commands not in exactly one group: {sorted(set(self.helps) ^ set(grouped))} "
                                 f"or repeated: {sorted({c for c in grouped if grouped.count(c) > 1})}")
        width = max(len(c) for c in self.helps) + 4
        lines = []
        for title, names in groups.items():
            lines += ["", f"{title}:"]
            for name in names:
                wrapped = textwrap.wrap(self.helps[name], 96 - width) or [""]
                lines.append(f"  {name:<{width - 2}}{wrapped[0]}")
                lines += [" " * width + more for more in wrapped[1:]]
        return "commands (toolret COMMAND --help for each):" + "\n".join(lines)


def record_option(parser: argparse.ArgumentParser) -> None:
    """``--record-generations JOB`` (``fit``, ``evaluate-grid``)."""
    parser.add_argument("--record-generations", metavar="JOB",
                        help="write every LLM sample the committed shards lack (QTA's preference samples, its "
                             "rewrites) as shards of JOB beside them (data/generations/ or data/qta/generations/), "
                             "one per batch of prompts, to commit: a killed run, or a clone's, resumes from them")


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (``--timeout 0`` / ``-1`` are usage errors, exit 2)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def force_option(parser: argparse.ArgumentParser, help: str | None = None) -> None:  # noqa: A002 - argparse's
    """``--force``: replace a non-empty ``--out`` folder that is not this command's previous output
    (:func:`toolret.atomic.claim_output_dir`; without it such a folder is refused, exit 2)."""
    parser.add_argument("--force", action="store_true", help=help or "replace an --out folder holding anything "
                        "but this command's previous output (built beside it, swapped in on success)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="toolret", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--params", help="params.yaml to use (default: the project's)")
    # --params after the subcommand too (`toolret evaluate ... --params p.yaml`): every subcommand takes it;
    # SUPPRESS keeps one given before the subcommand when none follows it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--params", default=argparse.SUPPRESS, help="params.yaml to use (default: the project's)")
    sub = _Commands(p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       help="one of the commands listed below"), parents=[common])

    catalog_actions = sub.add_parser("catalog", help="build / clean curated catalogs").add_subparsers(
        dest="action", required=True)
    cat = SimpleNamespace(add_parser=functools.partial(catalog_actions.add_parser, parents=[common]))  # + --params
    b = cat.add_parser("build", help="import + verify + validate a dataset into a curated catalog")
    b.add_argument("--dataset", required=True, help="dataset name or BEIR directory")
    b.add_argument("--out", required=True)
    force_option(b)
    b.set_defaults(func=cmd_catalog_build)
    c = cat.add_parser("clean", help="add the MTRB-style cleaned document variant")
    c.add_argument("--catalog", required=True)
    c.add_argument("--out", required=True)
    force_option(c)
    c.set_defaults(func=cmd_catalog_clean)
    sy = cat.add_parser("synthesize", help="a training catalog of LLM-written queries from its source's committed "
                        "per-tool generations (params.yaml synthetic.<name>; no LLM is run)")
    sy.add_argument("--name", required=True, help="the synthetic.<name> entry of params.yaml")
    sy.add_argument("--out", required=True)
    force_option(sy)
    sy.set_defaults(func=cmd_catalog_synthesize)
    se = cat.add_parser("select", help="a catalog whose test split is a slice of another's judged queries (e.g. "
                        "the multi-API requests of a training catalog's dev split: --split dev --min-gold 2)")
    se.add_argument("--catalog", required=True, help="the source curated catalog")
    se.add_argument("--split", required=True, choices=["train", "dev", "test"])
    se.add_argument("--min-gold", type=int, default=1, help="keep queries with at least this many gold tools")
    se.add_argument("--sample", type=int, default=0, help="a seeded sample of that many selected queries (0: all)")
    se.add_argument("--seed", type=int, default=13, help="the sample's seed")
    se.add_argument("--name", required=True, help="the new catalog's name")
    se.add_argument("--out", required=True)
    force_option(se)
    se.set_defaults(func=cmd_catalog_select)
    queries_help = ("JSONL of judged queries, {\"_id\", \"text\", \"gold\": [tool ids]} per line: the test split "
                    "(without: a serving-only catalog, indexable and servable, not evaluable)")
    iop = sub.add_parser("import-openapi", help="a curated catalog of an OpenAPI 3 file (JSON or YAML): one tool "
                        "per operation, with its input schema")
    iop.add_argument("--spec", required=True, help="the OpenAPI 3 file")
    iop.add_argument("--out", required=True, help="the catalog directory to write")
    iop.add_argument("--name", help="catalog name (default: from info.title)")
    iop.add_argument("--queries", help=queries_help)
    iop.add_argument("--force", action="store_true", help="replace an existing catalog at --out")
    iop.set_defaults(func=cmd_import_openapi)
    im = sub.add_parser("import-mcp", help="a curated catalog of a running MCP server's tools (tools/list)")
    target = im.add_mutually_exclusive_group(required=True)
    target.add_argument("--command", dest="server_command", metavar="\"CMD ARGS\"",
                        help="launch this MCP server and speak to it over stdio")
    target.add_argument("--url", help="an MCP server's streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp")
    im.add_argument("--out", required=True, help="the catalog directory to write")
    im.add_argument("--name", help="catalog name (default: from the server's name)")
    im.add_argument("--queries", help=queries_help)
    im.add_argument("--timeout", type=positive_float, default=120, help="seconds to wait for the server's tool list")
    im.add_argument("--force", action="store_true", help="replace an existing catalog at --out")
    im.set_defaults(func=cmd_import_mcp)
    ad = sub.add_parser("adapt", help="train, select, register and write a servable retriever for a catalog "
                        "from its tool documents alone (LLM-written requests)")
    ad.add_argument("--catalog", required=True, help="the catalog folder (import-openapi / import-mcp / BEIR)")
    ad.add_argument("--out", required=True, help="where generations, models and the champion index go")
    ad.add_argument("--queries", help="labelled queries (JSONL: _id, text, gold): scored, never used to choose")
    ad.add_argument("--budget", choices=["fast", "full"], help="default: params.yaml adapt.budget (fast)")
    ad.add_argument("--n", type=int, help="requests per tool (default: adapt.n, else the budget's)")
    ad.add_argument("--llm-model", help="the generator (default: adapt.llm_model, qwen2.5-coder-0.5b-instruct)")
    ad.add_argument("--llm-engine", help="transformers | llama.cpp (default: adapt.llm_engine, transformers)")
    ad.add_argument("--llm-base-url", help="an OpenAI-compatible server writes the requests instead "
                    "(default: adapt.llm_base_url)")
    ad.add_argument("--shard-prompts", type=int, default=50, help="tools per generation shard (resume unit)")
    ad.add_argument("--retrain", action="store_true", help="retrain the adapter even if few tools changed")
    ad.add_argument("--feedback", metavar="DIR", help="a toolret feedback folder: its positives trained on "
                    "(inverse-propensity weighted, and unweighted as dense-ft-plain); its held-out queries choose "
                    "the champion where there are at least 50")
    ad.add_argument("--candidates", help="comma-separated: these candidates only (e.g. bm25,dense,dense-ft: a "
                    "quick run); at least one untrained, and a fused one's weight source (default: "
                    "adapt.candidates, all)")
    ad.add_argument("--no-register", action="store_true", help="do not log to MLflow / register the champion")
    force_option(ad, "write into an --out folder holding anything but a previous adapt run (nothing of it is "
                 "deleted; adapt adds generations/, work/, champion/, adapt_report.json)")
    ad.set_defaults(func=cmd_adapt)

    def overrides(sp):
        sp.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                        help="override a params.yaml value, e.g. --set bm25.k1=0.9 (repeatable)")

    overrides(sy)  # e.g. --set synthetic.<name>.multi_tool_groups=0 (the multi-API ablation)

    def source(sp, required=True):
        g = sp.add_mutually_exclusive_group(required=required)
        g.add_argument("--catalog", help="curated catalog directory")
        g.add_argument("--dataset", help="dataset name or BEIR directory (loaded from the sources)")

    f = sub.add_parser("fit", help="fit one component on a catalog (dense-ft training, Re-Invoke query generation ...)")
    source(f)
    f.add_argument("--component", required=True, help="component name (toolret datasets lists them)")
    f.add_argument("--out", required=True, help="the component's learned artifact")
    record_option(f)
    overrides(f)
    f.set_defaults(func=cmd_fit)

    w = sub.add_parser("rewrite", help="rewrite a split's queries with a rewriter and store the outputs")
    source(w)
    w.add_argument("--component", required=True, help="rewriter component name")
    w.add_argument("--split", default="test")
    w.add_argument("--out", required=True)
    overrides(w)
    w.set_defaults(func=cmd_rewrite)

    gs = sub.add_parser("generate-shards", help="advance a long LLM generation job in committed shards "
                        "(resumes from the shards a clone has and from this machine's LLM cache)")
    source(gs)
    gs.add_argument("--job", required=True, help="reinvoke-queries | reinvoke-intents")
    gs.add_argument("--n", type=int, help="samples per prompt (default: the job's setting)")
    gs.add_argument("--shard-prompts", type=int, default=100, help="prompts per shard")
    gs.add_argument("--max-shards", type=int, help="stop after this many shards")
    gs.add_argument("--commit", action="store_true", help="git-commit each shard as it is written")
    gs.add_argument("--sample-tools", type=int, help="only a seeded sample of this many tools (per-tool jobs on a "
                    "corpus too large to cover; synthetic.<name>.sample_tools reads the same sample)")
    gs.add_argument("--sample-seed", type=int, default=13, help="its seed (synthetic.<name>.seed)")
    overrides(gs)
    gs.set_defaults(func=cmd_generate_shards)

    method_help = "a pipeline or component name, or [rewriter+]retriever[+reranker...] (see `toolret datasets`)"
    i = sub.add_parser("index", help="build and save a pipeline for every document variant of a catalog")
    i.add_argument("--catalog", required=True)
    i.add_argument("--method", required=True, help=method_help)
    i.add_argument("--model", help="dense: encoder name or folder; dense-ft: the fine-tune artifact directory")
    i.add_argument("--docs", nargs="*", help="document variants (default: all the catalog has)")
    i.add_argument("--out", required=True)
    force_option(i)
    overrides(i)
    i.set_defaults(func=cmd_index)

    e = sub.add_parser("evaluate-index", help="evaluate saved pipelines (one JSON per document variant)")
    e.add_argument("--catalog", required=True)
    e.add_argument("--index", required=True)
    e.add_argument("--out", required=True)
    force_option(e)
    overrides(e)
    e.set_defaults(func=cmd_evaluate_index)

    ev = sub.add_parser("evaluate", help="evaluate one pipeline on one dataset end to end")
    ev.add_argument("--dataset", required=True, help="dataset name or BEIR directory")
    ev.add_argument("--method", required=True, help=method_help)
    ev.add_argument("--k", help="comma-separated cutoffs, e.g. 1,3,5,10")
    ev.add_argument("--docs", default="original", choices=["original", "cleaned", "human"])
    ev.add_argument("--split", default="test")
    ev.add_argument("--model", help="dense: encoder name or folder; dense-ft: fine-tune artifact directory "
                    "(default data/models/<dataset>/dense-ft, trained if absent)")
    ev.add_argument("--output", required=True)
    ev.add_argument("--record", action="store_true",
                    help="write a result record (results/records/<dataset>/<method>.json): the result with its "
                    "condition (spec, params sha256, models and revisions) and produced_by (git commit, toolret "
                    "version, seconds, device), the per-query JSONL and the TREC run as <stem>.run.trec.gz; "
                    "latency, the params dump and the params file go to the <stem>.run_info.json sidecar")
    ev.add_argument("--fail-under", action="append", metavar="METRIC=VALUE",
                    help="regression gate, e.g. recall@5=0.8 (repeatable or comma-separated): exit 3 naming "
                    "every metric below its value (the result JSON is written either way)")
    overrides(ev)
    ev.set_defaults(func=cmd_evaluate)

    g = sub.add_parser("evaluate-grid", help="evaluate every row of a params grid (e.g. reinvoke.ablations)")
    g.add_argument("--catalog", required=True)
    g.add_argument("--grid", required=True, help="params key of the grid, e.g. reinvoke.ablations")
    g.add_argument("--docs", default="original")
    g.add_argument("--split", default="test", help="the judged split evaluated (dev: a choice made before test)")
    g.add_argument("--out", required=True)
    force_option(g)
    record_option(g)
    overrides(g)
    g.set_defaults(func=cmd_evaluate_grid)

    ra = sub.add_parser("report-ablations", help="a method's ablation report from its grid runs")
    ra.add_argument("--method", required=True, help="method with a report hook, e.g. reinvoke")
    ra.add_argument("--runs", default="data/runs")
    ra.add_argument("--datasets", nargs="+", required=True)
    ra.add_argument("--out", required=True)
    ra.add_argument("--notes", help="a markdown file whose text is appended to the report")
    overrides(ra)  # the settings the grid ran with, e.g. --set reinvoke.n_queries=5
    ra.set_defaults(func=cmd_report_ablations)

    for command in cli_commands():  # the subcommands the registered methods contribute
        msub = sub.add_parser(command.name, help=command.help)
        if command.source:
            source(msub)
        if command.arguments is not None:
            command.arguments(msub)
        if command.overrides:
            overrides(msub)
        msub.set_defaults(func=method_command(command))

    def served(sp, http: bool):
        d = Limits()
        sp.add_argument("--index", required=True, help="a saved pipeline, e.g. data/indexes/<ds>/<method>/original")
        sp.add_argument("--catalog", help="curated catalog directory giving tool names / descriptions / schemas "
                        "to an index saved without tools.jsonl")
        sp.add_argument("--max-queries", type=int, default=d.max_queries, help="queries per request")
        sp.add_argument("--max-query-chars", type=int, default=d.max_query_chars, help="characters per query")
        sp.add_argument("--max-k", type=int, default=d.max_k, help="results per query")
        sp.add_argument("--workers", type=int, default=d.workers, help="threads running searches")
        sp.add_argument("--timeout", type=float, default=d.timeout_s, help="seconds a request waits for its search")
        sp.add_argument("--torch-threads", type=int, default=d.torch_threads,
                        help="torch intra-op threads for pipelines with a neural encoder (0: torch's default)")
        sp.add_argument("--no-batching", action="store_true",
                        help="run every request as its own search (default: concurrent requests for the same k "
                        "share one pipeline search)")
        sp.add_argument("--batch-max-queries", type=int, default=d.batch_max_queries,
                        help="queries gathered into one search at most")
        sp.add_argument("--batch-parallel", type=int, default=d.batch_parallel,
                        help="batches of one pipeline run at once before new requests gather behind them "
                        "(0: the CPU count)")
        sp.add_argument("--batch-wait-ms", type=float, default=d.batch_wait_ms,
                        help="how long a gathering batch waits at most for a running one to end (a pipeline "
                        "running fewer than --batch-parallel batches never waits)")
        if http:
            sp.add_argument("--max-in-flight", type=int, default=d.max_in_flight,
                            help="searches admitted at once (running + queued); beyond: 503 + Retry-After")
            sp.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes, help="request body limit")
        else:
            sp.set_defaults(max_in_flight=d.max_in_flight, max_body_bytes=d.max_body_bytes)

    sv = sub.add_parser("serve", help="serve a saved pipeline to agents over HTTP: REST POST /search and MCP "
                        "(streamable HTTP) at /mcp, on one port")
    served(sv, http=True)
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--admin-token", help="bearer token for POST /admin/reload (default $TOOLRET_ADMIN_TOKEN; "
                    "without one, reload is allowed from loopback only, and not at all on a --host beyond loopback)")
    sv.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                    help="a host name or address requests may name in Host / Origin besides the loopback names and "
                    "the bound one (a wildcard --host: this machine's name); repeatable; * allows any")
    sv.set_defaults(func=cmd_serve)

    mc = sub.add_parser("mcp", help="serve a saved pipeline over MCP on stdio (tool search_tools), for desktop agents")
    served(mc, http=False)
    mc.set_defaults(func=cmd_mcp)

    gateway_commands(sub)
    feedback_commands(sub)
    promote_commands(sub)

    sl = sub.add_parser("serve-llm", help="serve a local LLM engine over the OpenAI API (for llm_engine: openai)")
    sl.add_argument("--engine", default="transformers", choices=["transformers", "llama.cpp"])
    sl.add_argument("--model", default=None, help="default: toolret.llm.models.DEFAULT_MODEL")
    sl.add_argument("--device", default="cpu")
    sl.add_argument("--batch-size", type=int, default=64, help="most samples decoded together")
    sl.add_argument("--threads", type=int, default=None, help="CPU threads (default $TOOLRET_LLM_THREADS or all)")
    sl.add_argument("--max-pending", type=int, default=1024, help="requests in flight beyond this get 503")
    sl.add_argument("--host", default="127.0.0.1")
    sl.add_argument("--port", type=int, default=8080)
    sl.set_defaults(func=cmd_serve_llm)

    st = sub.add_parser("stages", help="write dvc.yaml from the registry's stage templates")
    st.add_argument("--out", default="dvc.yaml")
    st.add_argument("--check", action="store_true", help="fail if dvc.yaml is out of date")
    st.set_defaults(func=cmd_stages)

    r = sub.add_parser("report", help="markdown comparison tables of every evaluated dataset")
    r.add_argument("--runs", default="data/runs")
    r.add_argument("--k", type=int, default=5)
    r.add_argument("--out")
    r.set_defaults(func=cmd_report)

    rp = sub.add_parser("reproduce", help="the reproduction matrix (results/matrix): OK / FAIL per cell against the "
                        "committed records (--check [--from-records]); the README headline table (--render-readme)")

    reproduce_arguments(rp)
    rp.set_defaults(func=cmd_reproduce)

    d = sub.add_parser("datasets", help="list dataset and method names")
    d.set_defaults(func=cmd_datasets)
    p.epilog = sub.listing(method_commands=[c.name for c in cli_commands()])
    return p


def main(argv: list[str] | None = None) -> int:
    install_mlflow_training_logger()  # a training run from the CLI (or a stage) logs its steps to MLflow
    try:
        args = build_parser().parse_args(argv)  # the parser holds the methods' subcommands (plugins included)
        args.func(args)
    except ToolretError as e:  # every error toolret raises on purpose names what to fix: no traceback
        print(f"toolret: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
