"""Re-Invoke (Chen et al., 2024): unsupervised tool retrieval with LLM query generation, intent
extraction and multi-view ranking; plus the HyDE baseline.

Its :data:`METHOD` (see :mod:`toolret.registry`) holds:

- components ``reinvoke-qgen`` / ``reinvoke-qgen-bm25`` (retrievers: documents expanded with synthetic
  queries, dense / BM25 backbone), ``reinvoke-intents`` and ``hyde-docs`` (query rewriters);
- pipelines ``reinvoke`` = ``reinvoke-intents+reinvoke-qgen``, ``reinvoke-bm25`` =
  ``reinvoke-intents+reinvoke-qgen-bm25``, ``hyde`` = ``hyde-docs+dense``;
- the ``reinvoke:`` params section (:class:`config.ReInvokeSection`) and its stages: synthetic queries
  (fit), intents and HyDE documents (rewrite), index / evaluate of the three pipelines, and the Table 3
  ablation grid (``reinvoke.ablations``).

Importing this package is cheap (no torch / transformers): the heavy parts load on use.
"""

from __future__ import annotations

from pathlib import Path

from toolret.llm.models import generator_artifact_dir
from toolret.methods.reinvoke.artifacts import load_artifact
from toolret.methods.reinvoke.components import HydeRewriter, IntentRewriter, ReInvokeIndex
from toolret.methods.reinvoke.config import DEFAULT_LLM, ReInvokeSection
from toolret.methods.reinvoke.generation import LazyLLM
from toolret.methods.reinvoke.tool_vectors import tool_vectors_arguments
from toolret.registry import (BuildContext, CliCommand, Component, Method, NamedPipeline, Section, StageTemplate,
                              in_git, loads, register_method)
from toolret.stage_templates import ablation_grid

ARTIFACTS = "reinvoke"  # data/reinvoke/<dataset>/{synthetic_queries,intents,hyde}.jsonl


def _config(ctx: BuildContext):
    return ctx.params.reinvoke.component_config()


def _generated(ctx: BuildContext, cfg, name: str) -> Path:
    """``data/reinvoke/<dataset>/<name>.jsonl`` (``.../<model slug>/`` for a non-default generator)."""

    return generator_artifact_dir(ctx.artifact_dir(ARTIFACTS), cfg.llm_model, DEFAULT_LLM) / f"{name}.jsonl"


def _index(backbone: str):
    def build(ctx: BuildContext):
        cfg = _config(ctx)
        artifact = Path(ctx.model) if ctx.model else _generated(ctx, cfg, "synthetic_queries")
        # the round-trip diagnostic only where the fit stage names its artifact (``toolret fit --out``)
        return ReInvokeIndex(cfg, backbone, dense_config=ctx.params.dense, bm25_config=ctx.params.bm25,
                             llm=LazyLLM(cfg), artifact=artifact, round_trip=bool(ctx.model))

    return build


def _rewriter(kind: str):
    def build(ctx: BuildContext):
        cfg = _config(ctx)
        cls = IntentRewriter if kind == "intents" else HydeRewriter
        stored = load_artifact(_generated(ctx, cfg, kind), cfg)
        return cls(cfg, llm=LazyLLM(cfg), outputs=stored)

    return build


def _tool_vectors_arguments(parser) -> None:
    tool_vectors_arguments(parser)


PIPELINES = ("reinvoke", "reinvoke-bm25", "hyde")
_LLM = ("reinvoke",)
_GENERATED = ("data/reinvoke/${item.dataset}/synthetic_queries.jsonl", "data/reinvoke/${item.dataset}/intents.jsonl",
              "data/reinvoke/${item.dataset}/hyde.jsonl")


def _rewrite_stage(kind: str, component: str, what: str) -> StageTemplate:
    """The stage storing a rewriter's outputs for the test queries (``toolret rewrite``)."""
    return StageTemplate(
        name=kind, order=41, costly=True, foreach="${reinvoke_datasets}", desc=f"Re-Invoke: {what}",
        cmd=f"toolret rewrite --component {component} --catalog data/curated/${{item}} --split test "
            f"--out data/reinvoke/${{item}}/{kind}.jsonl",
        entry="toolret.cli:cmd_rewrite", components=(f"{component}+dense",), deps=("data/curated/${item}",),
        params=_LLM, outs=in_git(f"data/reinvoke/${{item}}/{kind}.jsonl", f"data/reinvoke/${{item}}/{kind}.meta.json"),
    )


METHOD = register_method(Method(
    name="reinvoke",
    description="Re-Invoke: LLM query generation, intent extraction and multi-view ranking; the HyDE baseline",
    sections=(Section("reinvoke", ReInvokeSection, staged=True),),
    components=(
        Component("reinvoke-qgen", "retriever", _index("dense"), loads("toolret.methods.reinvoke.components:ReInvokeIndex"), ("reinvoke", "dense"),
                  "tool documents expanded with LLM-written synthetic queries (dense backbone)"),
        Component("reinvoke-qgen-bm25", "retriever", _index("bm25"), loads("toolret.methods.reinvoke.components:ReInvokeIndex"), ("reinvoke", "bm25"),
                  "tool documents expanded with LLM-written synthetic queries (BM25 backbone)"),
        Component("reinvoke-intents", "rewriter", _rewriter("intents"), loads("toolret.methods.reinvoke.components:IntentRewriter"), ("reinvoke",),
                  "LLM intent extraction; intents merged by multi-view ranking"),
        Component("hyde-docs", "rewriter", _rewriter("hyde"), loads("toolret.methods.reinvoke.components:HydeRewriter"), ("reinvoke",),
                  "HyDE: an LLM-written hypothetical tool document per query"),
    ),
    pipelines=(
        NamedPipeline("reinvoke", "reinvoke-intents+reinvoke-qgen", "Re-Invoke (dense backbone)"),
        NamedPipeline("reinvoke-bm25", "reinvoke-intents+reinvoke-qgen-bm25", "Re-Invoke (BM25 backbone)"),
        NamedPipeline("hyde", "hyde-docs+dense", "HyDE baseline (dense)"),
    ),
    report="toolret.methods.reinvoke.report:write_report",
    cli=(CliCommand("reinvoke-tool-vectors",
                    "write every tool's mean expanded-copy vector (committed, a fresh clone then encodes no copy)",
                    run="toolret.methods.reinvoke.tool_vectors:tool_vectors_command",
                    arguments=_tool_vectors_arguments, source=True),),
    generation_jobs={
        "reinvoke-queries": "toolret.methods.reinvoke.generation:queries_job",
        "reinvoke-intents": "toolret.methods.reinvoke.generation:intents_job",
        # training requests for a synthetic catalog's multi-API groups, by the same generator (issue 26)
        "synthetic-multi-api": "toolret.methods.reinvoke.generation:multi_api_job",
    },
    stages=(
        StageTemplate(
            name="synth_queries", order=40, costly=True, foreach="${reinvoke_datasets}",
            desc="Re-Invoke synthetic queries: the LLM writes n queries per tool (original documents)",
            cmd="toolret fit --component reinvoke-qgen --catalog data/curated/${item} "
                "--out data/reinvoke/${item}/synthetic_queries.jsonl",
            entry="toolret.cli:cmd_fit", components=("reinvoke-qgen",), deps=("data/curated/${item}",), params=_LLM,
            outs=in_git("data/reinvoke/${item}/synthetic_queries.jsonl",
                        "data/reinvoke/${item}/synthetic_queries.meta.json"),
        ),
        StageTemplate(
            # no dep on the generation shards: the vectors are content-addressed (a tool whose copies changed
            # misses and is encoded at index time), and the shard folder grows with every other job's shards
            name="reinvoke_tool_vectors", order=45, costly=True, foreach="${reinvoke.tool_vector_datasets}",
            only_if="reinvoke.tool_vector_datasets",
            desc="Re-Invoke: every tool's mean expanded-copy vector (kept in git: a fresh clone encodes no copy)",
            cmd="toolret reinvoke-tool-vectors --catalog data/curated/${item} --out data/reinvoke/tool-vectors/${item}.npz",
            entry="toolret.methods.reinvoke.tool_vectors:tool_vectors_command", components=("reinvoke-qgen",),
            deps=("data/curated/${item}",), params=("reinvoke", "dense"),
            outs=in_git("data/reinvoke/tool-vectors/${item}.npz"),
        ),
        _rewrite_stage("intents", "reinvoke-intents", "intents the LLM extracts from each test query"),
        _rewrite_stage("hyde", "hyde-docs", "HyDE hypothetical tool documents of the test queries"),
        StageTemplate(
            name="index_reinvoke", order=50, matrix={"dataset": "${reinvoke_datasets}", "method": list(PIPELINES)},
            desc="Re-Invoke / HyDE pipeline indexed on the original documents (expanded copies, stored LLM outputs)",
            cmd="toolret index --catalog data/curated/${item.dataset} --method ${item.method} --docs original "
                "--out data/indexes/${item.dataset}/${item.method}",
            entry="toolret.cli:cmd_index", deps=("data/curated/${item.dataset}", *_GENERATED),
            params=("reinvoke", "dense", "bm25"), outs=("data/indexes/${item.dataset}/${item.method}",),
        ),
        StageTemplate(
            name="evaluate_reinvoke", order=60, matrix={"dataset": "${reinvoke_datasets}", "method": list(PIPELINES)},
            desc="Re-Invoke / HyDE evaluated on the test split (metrics, bootstrap CIs, per-query table)",
            cmd="toolret evaluate-index --catalog data/curated/${item.dataset} "
                "--index data/indexes/${item.dataset}/${item.method} --out data/runs/${item.dataset}/${item.method}",
            entry="toolret.cli:cmd_evaluate_index",
            deps=("data/curated/${item.dataset}", "data/indexes/${item.dataset}/${item.method}"),
            params=("evaluation",), outs=("data/runs/${item.dataset}/${item.method}",),
        ),
        ablation_grid(
            "reinvoke", grid="reinvoke.ablations", order=61,
            desc="Re-Invoke ablations (paper Table 3) as pipelines with overrides, paired-tested against their "
                 "baseline",
            components=("reinvoke", "reinvoke-bm25"),
            deps=("data/reinvoke/${item}/synthetic_queries.jsonl", "data/reinvoke/${item}/intents.jsonl"),
            params=("reinvoke", "dense", "bm25", "evaluation"),
        ),
    ),
))
