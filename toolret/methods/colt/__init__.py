"""COLT (Qu et al., CIKM 2024): completeness-oriented tool retrieval -- a semantic stage (the project's
``dense-ft``) followed by dual-view LightGCN collaborative learning over query-tool, query-scene and
scene-tool graphs built from the train split.

Its :data:`METHOD` (see :mod:`toolret.registry`) holds:

- the retriever component ``colt`` (also the pipeline name): :class:`components.ColtRetriever`;
- the ``colt:`` params section (:class:`config.ColtSection`: the authors' ToolLens defaults, the semantic
  encoder, the ablation grid) and ``colt_datasets``;
- its stages: ``colt`` (training, costly: it needs dense-ft), ``index_colt`` / ``evaluate_colt``, and
  ``colt_ablations`` (``toolret evaluate-grid --grid colt.ablations``, costly: one model per row);
- the report ``toolret report-ablations --method colt`` (:mod:`report`, through :mod:`toolret.grid_report`).

Importing this package is cheap (no torch): the model loads on use.
"""

from __future__ import annotations

from pathlib import Path

from toolret.methods.colt.components import ColtRetriever
from toolret.methods.colt.config import ColtSection
from toolret.registry import (BuildContext, Component, Method, NamedPipeline, Section, StageTemplate, in_git, loads,
                              register_method)
from toolret.retrieval.dense import DenseRetriever
from toolret.retrieval.finetuned import FinetunedDenseRetriever
from toolret.stage_templates import ablation_grid, index_and_evaluate


def semantic_encoder(ctx: BuildContext, spec: str):
    """The semantic stage named by ``colt.encoder``: ``dense-ft`` (this catalog's fine-tune artifact,
    trained by its ``fit`` when absent), ``dense`` (the frozen ``params.dense`` encoder), or a folder (a
    dense-ft artifact, i.e. one with ``model/`` inside, or a sentence-transformers encoder)."""

    finetune = ctx.params.finetune.resolved(ctx.params.dense)
    if spec == "dense-ft":
        return FinetunedDenseRetriever(ctx.artifact_dir("models") / "dense-ft", finetune, ctx.params.dense)
    if spec == "dense":
        return DenseRetriever(ctx.params.dense)
    folder = Path(spec)
    if (folder / "model").is_dir():
        return FinetunedDenseRetriever(folder, finetune, ctx.params.dense)
    return DenseRetriever(ctx.params.dense.replace(model=spec))


def _colt(ctx: BuildContext):
    """``ctx.model`` (default ``data/models/<dataset>/<colt.model_name>``) is the COLT artifact folder."""

    cfg = ctx.params.colt.component_config()
    artifact = Path(ctx.model) if ctx.model else ctx.artifact_dir("models") / cfg.model_name
    return ColtRetriever(cfg, semantic_encoder(ctx, cfg.encoder), artifact)


_MODEL = "data/models/${item}/colt"

METHOD = register_method(Method(
    name="colt",
    description="COLT: completeness-oriented tool retrieval (dense-ft + dual-view LightGCN)",
    sections=(Section("colt", ColtSection, staged=True),),
    components=(Component("colt", "retriever", _colt, loads("toolret.methods.colt.components:ColtRetriever"), ("colt", "dense", "finetune"),
                          "COLT: dense-ft + dual-view LightGCN collaborative learning (query-tool, query-scene, "
                          "scene-tool graphs from the train split), dev-selected", trains=True),),
    pipelines=(NamedPipeline("colt", "colt", "COLT (semantic stage colt.encoder, default dense-ft, + collaborative "
                                             "learning)"),),
    stages=(
        StageTemplate(
            name="colt", order=35, costly=True, trains=True, foreach="${colt_datasets}",
            desc="COLT collaborative stage trained on the train split over the dense-ft encoder, dev-selected "
                 "(tool representations + report)",
            cmd="toolret fit --component colt --catalog data/curated/${item} --out " + _MODEL,
            entry="toolret.cli:cmd_fit", components=("colt",),
            deps=("data/curated/${item}", "data/models/${item}/dense-ft"), params=("colt", "dense", "finetune"),
            outs=in_git(_MODEL),
        ),
        *index_and_evaluate(
            "colt", foreach="${colt_datasets}", names=("index_colt", "evaluate_colt"), orders=(52, 62),
            index_desc="COLT index: the learned tool representations with the semantic encoder (colt.docs documents)",
            evaluate_desc="COLT evaluated on the test split (metrics, bootstrap CIs, per-query table)",
            options=" --model " + _MODEL + " --docs original", deps=(_MODEL, "data/models/${item}/dense-ft"),
            params=("colt", "dense", "finetune"),
        ),
        ablation_grid(
            "colt", grid="colt.ablations", order=63, costly=True,
            desc="COLT ablations (no collaborative stage, one view, no contrastive term, 0/1/2 layers, frozen "
                 "encoder) as grid rows, each paired-tested against its baseline row",
            components=("colt", "dense-ft", "dense"), deps=(_MODEL, "data/models/${item}/dense-ft"),
            params=("colt", "dense", "finetune", "evaluation"), outs=("data/models/${item}/colt-ablations",),
        ),
    ),
    report="toolret.methods.colt.report:write_report",
))
