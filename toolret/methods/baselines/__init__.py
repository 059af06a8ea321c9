"""The baseline retrievers: ``bm25`` (bm25s), ``dense`` (zero-shot bi-encoder + faiss), ``dense-ft``
(the same encoder fine-tuned with in-batch negatives on the catalog's train split) and ``hybrid`` (two
of them fused by reciprocal rank or normalised score, the weight selected on dev).

Implementations live in :mod:`toolret.retrieval` (other methods build on them); this package's
:data:`METHOD` holds them, their ``params.yaml`` sections (``bm25``, ``dense``, ``finetune``, ``hybrid``) and
dense-ft's training stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from toolret.catalog.datasets import load_dataset_for
from toolret.paths import model_dir
from toolret.registry import (BuildContext, Component, Method, Section, StageTemplate, build_component, in_git, loads,
                              register_method)
from toolret.retrieval.bm25 import BM25Config, BM25Retriever
from toolret.retrieval.dense import DenseConfig, DenseRetriever
from toolret.retrieval.finetune import FinetuneConfig
from toolret.retrieval.finetuned import FinetunedDenseRetriever
from toolret.retrieval.hybrid import HybridConfig, HybridRetriever

if TYPE_CHECKING:
    from toolret.catalog.model import Catalog

def _bm25(ctx: BuildContext):
    return BM25Retriever(ctx.params.bm25)


def _dense(ctx: BuildContext):
    config = ctx.params.dense if ctx.model is None else ctx.params.dense.replace(model=ctx.model)
    return DenseRetriever(config)


def _dense_ft(ctx: BuildContext):
    """``ctx.model`` (default ``data/models/<training dataset>/dense-ft``, the training dataset being
    ``params.trained_on[dataset]`` or the dataset) is the fine-tune artifact folder; ``fit`` trains it on the
    training dataset's train split when absent and never modifies it when present."""

    folder = Path(ctx.model) if ctx.model else model_dir(ctx.training_name, "dense-ft")
    training = None
    if ctx.training_name != ctx.catalog.name:

        def training() -> Catalog:
            return load_dataset_for(ctx.training_name, ctx.params)
    return FinetunedDenseRetriever(folder, ctx.params.finetune.resolved(ctx.params.dense), ctx.params.dense,
                                   training_catalog=training)


def _hybrid(ctx: BuildContext, fine_tuned: bool = False):
    """Each side is built like the registered retriever it names (``dense-ft`` loads its artifact);
    ``fine_tuned`` (``hybrid-ft``): a ``dense`` side becomes ``dense-ft`` (the catalog's ``trained_on``)."""

    config = ctx.params.hybrid
    if fine_tuned:
        config = config.model_copy(update={"sides": [s.model_copy(update={"component": "dense-ft"})
                                                     if s.component == "dense" else s for s in config.sides]})
    side_ctx = BuildContext(ctx.catalog, ctx.params)
    dev_catalog = None
    if config.dev_dataset and config.select_on_dev:

        dev_catalog = load_dataset_for(config.dev_dataset, ctx.params)
    return HybridRetriever([build_component(s.component, side_ctx) for s in config.sides], config,
                           dev_catalog=dev_catalog)


def _hybrid_docs(params) -> tuple[str, ...]:
    return tuple(s.docs for s in params.hybrid.sides if s.docs)


def _hybrid_catalogs(params) -> tuple[str, ...]:
    config = params.hybrid
    return (config.dev_dataset,) if config.dev_dataset and config.select_on_dev else ()


METHOD = register_method(Method(
    name="baselines",
    description="BM25, zero-shot and fine-tuned dense retrieval, and their hybrid",
    sections=(Section("bm25", BM25Config), Section("dense", DenseConfig), Section("finetune", FinetuneConfig),
              Section("hybrid", HybridConfig)),
    components=(
        Component("bm25", "retriever", _bm25, loads("toolret.retrieval.bm25:BM25Retriever"), ("bm25",), "BM25 (bm25s, Lucene variant, k1=1.2, b=0.75)"),
        Component("dense", "retriever", _dense, loads("toolret.retrieval.dense:DenseRetriever"), ("dense",),
                  "zero-shot bi-encoder (all-MiniLM-L6-v2) over a faiss inner-product index"),
        Component("dense-ft", "retriever", _dense_ft, loads("toolret.retrieval.dense:DenseRetriever"), ("dense", "finetune"),
                  "the dense encoder fine-tuned on the train split (in-batch negatives, dev-selected)", trains=True),
        Component("hybrid", "retriever", _hybrid, loads("toolret.retrieval.hybrid:HybridRetriever"), ("hybrid", "bm25", "dense", "finetune"),
                  "two retrievers fused (default bm25 on the evaluated docs + dense on cleaned docs, reciprocal-rank "
                  "fusion; the weight selected on dev where there is one)", reads_docs=_hybrid_docs,
                  reads_catalogs=_hybrid_catalogs),
        Component("hybrid-ft", "retriever", lambda ctx: _hybrid(ctx, fine_tuned=True), loads("toolret.retrieval.hybrid:HybridRetriever"),
                  ("hybrid", "bm25", "dense", "finetune"),
                  "hybrid with its dense side fine-tuned: dense-ft of the dataset's training catalog (trained_on)",
                  trains=True, reads_docs=_hybrid_docs, reads_catalogs=_hybrid_catalogs),
    ),
    stages=(StageTemplate(
        name="finetune", order=30, costly=True, trains=True, foreach="${finetune_datasets}",
        desc="dense-ft encoder fine-tuned on the dataset's train split (MNRL, in-batch negatives), the step "
             "with the best dev recall@5 kept",
        cmd="toolret fit --component dense-ft --catalog data/curated/${item} --out data/models/${item}/dense-ft",
        entry="toolret.cli:cmd_fit", components=("dense-ft",),
        deps=("data/curated/${item}",), params=("finetune", "dense"),
        outs=in_git("data/models/${item}/dense-ft"),
    ),),
))
