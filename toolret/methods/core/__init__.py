"""The core stages, one :class:`~toolret.registry.Method` like any other: catalog build, cleaning and
synthetic training catalogs per dataset, index / evaluate of every ``params.methods`` pipeline on every
dataset, and dense-ft's index / evaluate per ``trained_on`` entry (the baseline components themselves:
:mod:`toolret.methods.baselines`).
"""

from __future__ import annotations

from typing import Any

from toolret.registry import Method, StageTemplate, register_method
from toolret.stage_templates import index_and_evaluate, param_value


def evaluated(params: Any, catalog: str) -> bool:
    """A ``trained_on`` entry gets dense-ft's index / evaluate unless it names a training catalog
    (``synthetic``: no test split; its entry only says which dense-ft its rerankers' first stage reads)."""
    return catalog not in (param_value(params, "synthetic") or {})


def catalog_source_deps(params: Any, dataset: str) -> tuple[str, ...]:
    """The raw data a dataset's catalog is built from, as DVC deps: a registered dataset's source
    folders under ``${source.root}`` (``toolbench-env-*``: two), a ``source.beir`` catalog's directory,
    else the name itself (a BEIR directory given as the dataset)."""
    import importlib

    # Only `toolret stages` calls this, no stage command does: importlib keeps the dataset registry (and
    # every loader) out of the import graph the other stages' code deps are read from.
    registry = importlib.import_module("toolret.catalog.datasets")
    if dataset in registry.DATASETS:
        return tuple(f"${{source.root}}/{d}" for d in registry.source_dirs(dataset))
    beir = param_value(params, "source.beir") or {}
    return (str(beir[dataset]),) if dataset in beir else (dataset,)


def synthetic_source_deps(params: Any, name: str) -> tuple[str, ...]:
    """What a synthetic training catalog is made from, as DVC deps: its source's curated catalog where the
    source is among ``datasets``, else the source's raw folders (a corpus the stage loads and cleans itself),
    and the committed shards of the generator(s) it reads (``data/generations/<model slug>``: a shard another
    generator writes does not make it stale)."""
    import importlib

    spec = param_value(params, "synthetic")[name]
    spec = spec if isinstance(spec, dict) else spec.model_dump()
    source = spec["source"]
    deps = (f"data/curated/{source}",) if source in (param_value(params, "datasets") or []) \
        else catalog_source_deps(params, source)
    default = param_value(params, "reinvoke.llm_model")
    models = [spec.get("llm_model") or default]
    if (spec.get("multi_tool_groups") or 0) + (spec.get("multi_category_groups") or 0) > 0:
        models.append(spec.get("multi_llm_model") or default)
    # importlib: as in catalog_source_deps, only `toolret stages` calls this
    slug = importlib.import_module("toolret.llm.models").model_slug
    return deps + tuple(dict.fromkeys(f"data/generations/{slug(m)}" for m in models))


METHOD = register_method(Method(
    name="core",
    description="the core stages: catalogs, cleaning, synthetic training catalogs, params.methods and dense-ft "
                "index / evaluate",
    stages=(
        StageTemplate(
            name="catalog", order=10, foreach="${datasets}",
            desc="Curated catalog: raw files verified against MANIFEST.tsv, dev split carved from train, "
                 "GX-validated",
            cmd="toolret catalog build --dataset ${key} --out data/catalogs/${key}",
            entry="toolret.cli:cmd_catalog_build", item_deps=catalog_source_deps,
            params=("source", "catalog"), outs=("data/catalogs/${key}",),
        ),
        StageTemplate(
            name="clean", order=20, foreach="${datasets}",
            desc="Catalog with the MTRB-style cleaned document variant added",
            cmd="toolret catalog clean --catalog data/catalogs/${item} --out data/curated/${item}",
            entry="toolret.cli:cmd_catalog_clean",
            deps=("data/catalogs/${item}",), params=("cleanup",), outs=("data/curated/${item}",),
        ),
        StageTemplate(
            name="synthesize", order=25, foreach="${synthetic}", only_if="synthetic",
            desc="Training catalog of LLM-written queries from a curated catalog's committed per-tool "
                 "generations (held-out categories and tools for unseen dev queries; no LLM runs, no test query "
                 "is read)",
            cmd="toolret catalog synthesize --name ${key} --out data/curated/${key}",
            entry="toolret.cli:cmd_catalog_synthesize", item_deps=synthetic_source_deps,
            params=("synthetic", "source", "cleanup"), outs=("data/curated/${key}",),
        ),
        StageTemplate(
            name="select", order=27, foreach="${selections}", only_if="selections",
            desc="Evaluation catalog sliced from another's judged queries (e.g. a training catalog's multi-API "
                 "dev requests: a dev set shaped like a benchmark, built without reading its test queries)",
            cmd="toolret catalog select --catalog data/curated/${item.source} --split ${item.split} "
                "--min-gold ${item.min_gold} --sample ${item.sample} --seed ${item.seed} --name ${key} "
                "--out data/curated/${key}",
            entry="toolret.cli:cmd_catalog_select", deps=("data/curated/${item.source}",),
            params=("selections",), outs=("data/curated/${key}",),
        ),
        *index_and_evaluate(
            "${item.method}", matrix={"dataset": "${datasets}", "method": "${methods}"}, dataset="${item.dataset}",
            components_param="methods", names=("index", "evaluate"), orders=(50, 60),
            index_desc="Saved pipeline (index) of one method for every document variant of the catalog",
            evaluate_desc="Evaluation on the test split: metrics, bootstrap CIs and per-query table per document "
                          "variant",
            params=("bm25", "dense", "hybrid"),
        ),
        *index_and_evaluate(
            "dense-ft", foreach="${trained_on}", dataset="${key}", names=("index_ft", "evaluate_ft"), orders=(51, 61),
            index_desc="dense-ft index: the encoder fine-tuned on the dataset's training catalog (trained_on) over "
                       "every document variant",
            evaluate_desc="dense-ft evaluation on the test split (metrics, bootstrap CIs, per-query table)",
            options=" --model data/models/${item}/dense-ft",
            # loading the model checks its key against the catalog it was trained on
            deps=("data/models/${item}/dense-ft", "data/curated/${item}"),
            params=("dense", "finetune"), keep=evaluated,
        ),
    ),
))
