"""ToolRerank (Zheng et al., LREC-COLING 2024): adaptive truncation + a trained cross-encoder +
hierarchy-aware reranking; and the Rerank-m baselines.

Its :data:`METHOD` (see :mod:`toolret.registry`) holds:

- components ``toolrerank-ce`` (reranker: ToolRerank) and ``ce-top10`` / ``ce-top30`` / ``ce-top50``
  (rerankers: Rerank-m, the same cross-encoder over the first stage's top m);
- pipelines ``toolrerank`` = ``<first stage>+toolrerank-ce`` and ``rerank-10`` / ``rerank-30`` /
  ``rerank-50`` = ``<first stage>+ce-topM``, the first stage being ``toolrerank.first_stage`` (the
  retriever that mined the training negatives and fed the dev grid; ``--set toolrerank.first_stage=bm25``
  changes all three);
- the ``toolrerank:`` params section (:class:`config.ToolRerankSection`) and its stages: training on each
  catalog of ``toolrerank.train_datasets`` (costly; the artifacts are kept in git; ``train_dataset`` picks
  the one the pipelines read), and on every dataset of
  ``toolrerank_datasets`` the ``toolrerank`` pipeline's index / evaluation and the evaluation grid
  (``toolrerank.ablations``, costly: ``make paper``);
- the subcommand ``toolret reranker-separation`` (:mod:`diagnostics`: does the trained cross-encoder separate
  gold from hard / random dev APIs).

The trained artifact lives in ``data/models/<train dataset>/toolrerank``; every component trains it
when it is absent (``fit``), so ``toolret evaluate --dataset D --method toolrerank`` works from a fresh
clone. Importing this package is cheap (no torch / sentence-transformers).
"""

from __future__ import annotations

from pathlib import Path

from toolret.catalog.datasets import load_dataset_for
from toolret.methods.toolrerank.components import ToolRerankReranker
from toolret.methods.toolrerank.config import ToolRerankSection, TrainingConfig
from toolret.methods.toolrerank.hierarchy import is_multi_tool
from toolret.methods.toolrerank.training import artifact_key, train_artifact
from toolret.paths import model_dir, project_path
from toolret.registry import (BuildContext, CliCommand, Component, Method, NamedPipeline, Section, StageTemplate,
                              in_git, loads, register_method)
from toolret.stage_templates import ablation_grid, dense_ft_deps, index_and_evaluate, model_dep

RERANK_M = (10, 30, 50)


def artifact_path(section, catalog_name: str = "") -> Path:
    """Where the ToolRerank artifact a ``toolrerank`` section reads lives: ``toolrerank.artifact`` (an ablation's
    artifact), else ``data/models/<toolrerank.train_dataset>/toolrerank`` (``catalog_name`` when no training
    dataset is configured)."""

    if section.artifact:
        return project_path(section.artifact)
    return model_dir(section.train_dataset or catalog_name, "toolrerank")


def artifact_dir(ctx: BuildContext) -> Path:
    """``--model`` if given, else :func:`artifact_path`."""
    return Path(ctx.model) if ctx.model else artifact_path(ctx.params.toolrerank, ctx.catalog.name)


def _trainer(ctx: BuildContext, artifact: Path):
    def train() -> None:
        cfg = ctx.params.toolrerank.component_config()
        name = cfg.train_dataset
        if name is None or name == ctx.catalog.name:
            catalog = ctx.catalog
        else:

            catalog = load_dataset_for(name, ctx.params)
        train_artifact(catalog, cfg, ctx.params, artifact)

    return train


def _build(plain_m: int | None):
    def build(ctx: BuildContext):
        cfg = ctx.params.toolrerank.component_config()
        oracle = None
        if plain_m is None and cfg.hierarchy == "oracle":  # evaluation-only ablation: the gold query types

            oracle = {q.text: is_multi_tool(ctx.catalog, q.id) for q in ctx.catalog.queries if ctx.catalog.gold(q.id)}

        artifact = artifact_dir(ctx)
        key = artifact_key(cfg, ctx.params, cfg.train_dataset or ctx.catalog.name)
        return ToolRerankReranker(cfg, artifact, plain_m=plain_m, dense_config=ctx.params.dense,
                                  trainer=_trainer(ctx, artifact), oracle=oracle, expected_key=key)

    return build


def _train_dataset(params) -> str | None:
    return params.toolrerank.train_dataset


def _separation_arguments(parser) -> None:
    parser.add_argument("--artifact", required=True, help="a ToolRerank artifact, e.g. data/models/toollens/toolrerank")
    parser.add_argument("--queries", type=int, default=200, help="dev queries sampled (seeded)")
    parser.add_argument("--seed", type=int, default=99)


def _grid_arguments(parser) -> None:
    parser.add_argument("--artifact", required=True, help="a ToolRerank artifact, e.g. data/models/<name>/toolrerank")
    parser.add_argument("--split", default="dev", help="the catalog split whose queries select (never a test split "
                        "of a benchmark; a dev selection keeps its queries as `test`)")
    parser.add_argument("--queries", type=int, default=300, help="queries sampled (seeded; 0: all)")
    parser.add_argument("--seed", type=int, default=13)


# what the trained artifact depends on (inference-only keys and the ablation grid do not retrain it)
_TRAIN_PARAMS = tuple(f"toolrerank.{k}" for k in TrainingConfig.model_fields) + (
    "toolrerank.candidates", "toolrerank.seen_level", "toolrerank.extend_unseen", "toolrerank.extend_seen", "dense")
_ARTIFACT = "data/models/${toolrerank.train_dataset}/toolrerank"
# the grids compose the reranker with hybrid-ft and Re-Invoke's intents (committed generations) beside bm25 / dense
_GRID_COMPONENTS = ("toolrerank", "toolrerank-intents", *(f"rerank-{m}" for m in RERANK_M), "bm25")
_GRID_DEPS = (_ARTIFACT, "data/generations/${reinvoke.llm_model}/reinvoke-intents")


def _first_stage_models(params) -> tuple[str, ...]:
    """The dense-ft models the first stage (hybrid-ft) reads on the evaluated datasets (their ``trained_on``),
    with the catalogs they were trained on."""
    return tuple(dict.fromkeys(p for d in params.toolrerank_datasets for p in dense_ft_deps(params, d)))


def _row_artifacts(rows) -> tuple[str, ...]:
    """The other rerankers a grid's rows read: a row setting ``toolrerank.artifact`` (an ablation trained with
    other settings) reads that folder, one setting ``toolrerank.train_dataset`` (the filtering and out-of-domain
    ablations) that catalog's."""
    paths = (r.set["toolrerank.artifact"] if "toolrerank.artifact" in r.set
             else model_dep(r.set["toolrerank.train_dataset"], "toolrerank")
             for r in rows.values() if "toolrerank.artifact" in r.set or "toolrerank.train_dataset" in r.set)
    return tuple(dict.fromkeys(paths))


def _grid_models(params) -> tuple[str, ...]:
    return _first_stage_models(params) + _row_artifacts(params.toolrerank.ablations)


def _dev_selection_models(params) -> tuple[str, ...]:
    return (*dense_ft_deps(params, params.toolrerank.dev_selection_dataset),
            *_row_artifacts(params.toolrerank.dev_selection))


def _training_first_stage(params, item: str) -> tuple[str, ...]:
    """The dense-ft a training catalog's first stage mines hard negatives with (its ``trained_on`` entry: a
    filtered catalog reads the unfiltered one's, and that catalog)."""
    return dense_ft_deps(params, item)


_GRID_PARAMS = ("toolrerank", "dense", "bm25", "hybrid", "finetune", "trained_on", "reinvoke", "evaluation")

METHOD = register_method(Method(
    name="toolrerank",
    description="ToolRerank: adaptive truncation + trained cross-encoder + hierarchy-aware reranking; Rerank-m",
    sections=(Section("toolrerank", ToolRerankSection, staged=True),),
    components=(
        Component("toolrerank-ce", "reranker", _build(None), loads("toolret.methods.toolrerank.components:ToolRerankReranker"), ("toolrerank", "dense"),
                  "ToolRerank: adaptive truncation + trained cross-encoder + hierarchy-aware reranking",
                  trains=True, train_dataset=_train_dataset),
        *(Component(f"ce-top{m}", "reranker", _build(m), loads("toolret.methods.toolrerank.components:ToolRerankReranker"), ("toolrerank", "dense"),
                    f"Rerank-{m}: the ToolRerank cross-encoder over the first stage's top {m}",
                    trains=True, train_dataset=_train_dataset) for m in RERANK_M),
    ),
    pipelines=(
        *(NamedPipeline(f"rerank-{m}", "${toolrerank.first_stage}+" + f"ce-top{m}",
                        f"Rerank-{m} baseline over the first stage toolrerank.first_stage") for m in RERANK_M),
        NamedPipeline("toolrerank", "${toolrerank.first_stage}+toolrerank-ce",
                      "ToolRerank over the first stage toolrerank.first_stage (the one that mined its training "
                      "negatives)"),
        NamedPipeline("toolrerank-intents", "reinvoke-intents+${toolrerank.first_stage}+toolrerank-ce",
                      "ToolRerank scoring each request of a query: an API's cross-encoder score is the max over "
                      "the query and its Re-Invoke intents; the first stage ranks the query",
                      settings=(("reinvoke.intent_ranking", "query"), ("toolrerank.score_views", "rewrites"))),
    ),
    report="toolret.methods.toolrerank.report:write_report",
    cli=(CliCommand("reranker-separation",
                    "does a trained ToolRerank cross-encoder separate gold from hard / random dev APIs",
                    run="toolret.methods.toolrerank.diagnostics:separation_command",
                    arguments=_separation_arguments, source=True),
         CliCommand("toolrerank-grid",
                    "select a trained ToolRerank artifact's m_s/m_u/tau_s/tau_m/n and fusion weight on a catalog's "
                    "split (paper Table 2), beside the setting it selected on its own dev split",
                    run="toolret.methods.toolrerank.training:grid_command", arguments=_grid_arguments, source=True)),
    stages=(
        StageTemplate(
            name="toolrerank_train", order=32, costly=True, trains=True, foreach="${toolrerank.train_datasets}",
            only_if="toolrerank.train_datasets",
            desc="ToolRerank artifact of one training catalog: cross-encoder trained on its train split (gold + "
                 "first-stage hard negatives + in-batch or random negatives), query-type classifier, "
                 "m_s/m_u/tau_s/tau_m/n selected on its dev split",
            cmd="toolret fit --component toolrerank-ce --catalog data/curated/${key} --out data/models/${key}/toolrerank "
                "--set toolrerank.train_dataset=${key}",
            entry="toolret.cli:cmd_fit", components=("toolrerank",),
            deps=("data/curated/${key}",), item_deps=_training_first_stage,
            params=tuple(p for p in _TRAIN_PARAMS if p != "toolrerank.train_dataset"),
            outs=in_git("data/models/${key}/toolrerank"),
        ),
        *index_and_evaluate(
            "toolrerank", foreach="${toolrerank_datasets}", names=("index_toolrerank", "evaluate_toolrerank"),
            orders=(53, 62),
            index_desc="ToolRerank saved pipeline (dense first stage + the trained reranker, original documents)",
            evaluate_desc="ToolRerank evaluated on the test split (metrics, bootstrap CIs, per-query table)",
            options=" --docs original", deps=(_ARTIFACT,), params=("toolrerank", "dense"),
            params_deps=_first_stage_models,
        ),
        ablation_grid(
            "toolrerank", grid="toolrerank.ablations", order=63, costly=True,
            desc="ToolRerank, Rerank-10/30/50, the first stage, BM25 and every ablation on the test split "
                 "(toolrerank.ablations, paired tests vs their baselines; cross-encoder scores shared by the rows)",
            components=_GRID_COMPONENTS, deps=_GRID_DEPS, params=_GRID_PARAMS, params_deps=_grid_models,
        ),
        StageTemplate(
            name="toolrerank_dev_selection", order=33, costly=True, only_if="toolrerank.dev_selection_dataset",
            desc="ToolRerank's dev selection on a dev catalog shaped like the target (toolrerank.dev_selection "
                 "rows: score_views, at the artifact's dev-selected settings; never a test split)",
            cmd="toolret evaluate-grid --catalog data/curated/${toolrerank.dev_selection_dataset} --grid "
                "toolrerank.dev_selection --out data/runs/${toolrerank.dev_selection_dataset}/toolrerank-dev-selection",
            entry="toolret.cli:cmd_evaluate_grid", components=_GRID_COMPONENTS,
            deps=("data/curated/${toolrerank.dev_selection_dataset}", *_GRID_DEPS), params=_GRID_PARAMS,
            params_deps=_dev_selection_models,
            outs=("data/runs/${toolrerank.dev_selection_dataset}/toolrerank-dev-selection",),
        ),
    ),
))
