"""The baseline retrievers: ``bm25`` (bm25s), ``dense`` (zero-shot bi-encoder + faiss) and ``dense-ft``
(the same encoder fine-tuned with in-batch negatives on the catalogue's train split).

Implementations live in :mod:`toolret.retrieval` (other methods build on them); this package registers
them, their ``params.yaml`` sections (``bm25``, ``dense``, ``finetune``) and dense-ft's training stage.
"""

from __future__ import annotations

from pathlib import Path

from toolret.registry import (BuildContext, Component, StageTemplate, in_git, register_component, register_section,
                              register_stage)
from toolret.retrieval.bm25 import BM25Config
from toolret.retrieval.dense import DenseConfig
from toolret.retrieval.finetune import FinetuneConfig

register_section("bm25", BM25Config)
register_section("dense", DenseConfig)
register_section("finetune", FinetuneConfig)


def _bm25(ctx: BuildContext):
    from toolret.retrieval.bm25 import BM25Retriever

    return BM25Retriever(ctx.params.bm25)


def _load_bm25(path: Path):
    from toolret.retrieval.bm25 import BM25Retriever

    return BM25Retriever.load(path)


def _dense(ctx: BuildContext):
    from toolret.retrieval.dense import DenseRetriever

    config = ctx.params.dense if ctx.model is None else ctx.params.dense.replace(model=ctx.model)
    return DenseRetriever(config)


def _load_dense(path: Path):
    from toolret.retrieval.dense import DenseRetriever

    return DenseRetriever.load(path)


def _dense_ft(ctx: BuildContext):
    """``ctx.model`` (default ``data/models/<dataset>/dense-ft``) is the fine-tune artifact folder; ``fit``
    trains it on the catalogue's train split when absent and never modifies it when present."""
    from toolret.retrieval.finetuned import FinetunedDenseRetriever

    folder = Path(ctx.model) if ctx.model else ctx.artifact_dir("models") / "dense-ft"
    return FinetunedDenseRetriever(folder, ctx.params.finetune.resolved(ctx.params.dense), ctx.params.dense)


def _load_dense_ft(path: Path):
    from toolret.retrieval.dense import DenseRetriever

    return DenseRetriever.load(path)  # its config names the fine-tuned model folder


register_component(Component("bm25", "retriever", _bm25, _load_bm25, ("bm25",),
                             "BM25 (bm25s, Lucene variant, k1=1.2, b=0.75)"))
register_component(Component("dense", "retriever", _dense, _load_dense, ("dense",),
                             "zero-shot bi-encoder (all-MiniLM-L6-v2) over a faiss inner-product index"))
register_component(Component("dense-ft", "retriever", _dense_ft, _load_dense_ft, ("dense", "finetune"),
                             "the dense encoder fine-tuned on the train split (in-batch negatives, dev-selected)",
                             trains=True))

register_stage(StageTemplate(
    name="finetune", order=30, costly=True, trains=True, foreach="${finetune_datasets}",
    desc="dense-ft encoder fine-tuned on the dataset's train split (MNRL, in-batch negatives), the step "
         "with the best dev recall@5 kept",
    cmd="toolret fit --method dense-ft --catalog data/curated/${item} --out data/models/${item}/dense-ft",
    entry="toolret.cli:cmd_fit", components=("dense-ft",),
    deps=("data/curated/${item}",), params=("finetune", "dense"),
    outs=in_git("data/models/${item}/dense-ft"),
))
