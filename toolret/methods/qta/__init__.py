"""QTA (Zhang et al., SIGIR-AP'24): query-tool alignment -- an LLM query rewriter trained by DPO (LoRA) from
the ranks a frozen retriever gives the gold tools (eq. 4), for low-resource tool retrieval.

Its :data:`METHOD` (see :mod:`toolret.registry`) holds:

- components ``qta-rewriter`` (the trained rewriter: preference data + one LoRA adapter per m, trained
  when absent) and ``qta-base`` (the same prompt on the untrained LLM; its ``fit`` writes the preference
  data), both ``trains=True``: on a dataset without a train split they run on a k-fold of its test
  queries (``catalog.folds`` / ``catalog.fold``, default ``catalog.auto_folds`` = 9: 10 train / 80 test);
- pipelines ``qta`` = ``qta-rewriter+dense`` and ``qta-zs`` = ``qta-base+dense`` (frozen all-MiniLM-L6-v2);
- the ``qta:`` params section (:class:`config.QTASection`) and three stages per ``qta.runs`` entry:
  preference data, adapter (both costly), and the evaluation grid ``qta.grid`` (paired tests vs dense);
- the report ``toolret report-ablations --method qta`` (per-fold table, mean over folds, paper numbers);
- synthetic requests (``qta.synthetic``): component and pipeline ``qta-syn``, the rewriter trained on a
  benchmark's synthetic training catalog (no labelled query read), stages ``qta_synthetic`` (preference
  data + adapter on the training catalog) and ``qta_synthetic_evaluate`` (its grid on the benchmark); ``qta-syn-ft``
  (``qta.synthetic.finetune``: that adapter trained further on a fold's labelled pairs, stages ``qta_syn_ft``
  / ``qta_syn_ft_evaluate`` per ``qta.runs`` fold) and ``qta-syn-large`` (``qta.synthetic.larger``: the
  synthetic training with a larger rewriter, stages ``qta_syn_large`` / ``qta_syn_large_evaluate``); stage
  ``qta_syn_dev`` evaluates ``qta.synthetic.dev_grid`` on the training catalog's dev split, where the synthetic
  rewriter's search settings (``qta.rewrites`` rewrites fused with the query) are chosen.

Importing this package is cheap (no torch / transformers / trl): the heavy parts load on use.
"""

from __future__ import annotations

from pathlib import Path

from toolret.catalog.folds import base_dataset
from toolret.errors import ConfigError
from toolret.llm.models import generator_artifact_dir
from toolret.methods.qta.components import QTARewriter
from toolret.methods.qta.config import DEFAULT_LLM, QTASection
from toolret.registry import (BuildContext, Component, Method, NamedPipeline, Section, StageTemplate, in_git, loads,
                              register_method)

ARTIFACTS = "qta"  # data/qta/<catalog>/preferences.jsonl; adapters in data/models/<catalog>/qta/m<m>


def _build(trained: bool):
    def build(ctx: BuildContext):
        cfg = ctx.params.qta.component_config()
        docs = cfg.docs_for(base_dataset(ctx.catalog))

        preferences = generator_artifact_dir(ctx.artifact_dir(ARTIFACTS), cfg.llm_model, DEFAULT_LLM) / "preferences.jsonl"
        adapter_root = None
        if trained:
            adapter_root = Path(cfg.adapter_from) if cfg.adapter_from else (
                Path(ctx.model) if ctx.model else ctx.artifact_dir("models") / "qta")
        elif ctx.model:
            preferences = Path(ctx.model)
        return QTARewriter(cfg, documents=ctx.catalog.docs(docs), tool_ids=ctx.catalog.tool_ids,
                           adapter_root=adapter_root, preferences=preferences,
                           write_preferences=not trained and ctx.model is not None, docs=docs,
                           dense_config=ctx.params.dense, frozen=bool(cfg.adapter_from))

    return build


def _build_synthetic(larger: bool):
    def build(ctx: BuildContext):
        """``qta-syn`` (``qta-syn-large``: the larger rewriter of ``qta.synthetic.larger``, adapters in ``qta-large``):
        on a benchmark of ``qta.synthetic.runs`` (or a fold of one), the adapter trained on its synthetic training
        catalog (frozen); on that training catalog itself, the rewriter ``fit`` trains."""

        section = ctx.params.qta
        cfg = section.larger_config() if larger else section.synthetic_config()
        name = base_dataset(ctx.catalog)
        benchmark = section.synthetic.benchmark_of(name)
        training = name if benchmark else _training_catalog(section, name, "qta-syn-large" if larger else "qta-syn")
        docs = cfg.docs_for(benchmark or name)
        models = ctx.artifact_dir("models").parent / training / ("qta-large" if larger else "qta")
        preferences = generator_artifact_dir(ctx.artifact_dir(ARTIFACTS).parent / training, cfg.llm_model,
                                             DEFAULT_LLM) / "preferences.jsonl"
        adapter_root = Path(ctx.model) if (benchmark and ctx.model) else models
        return QTARewriter(cfg, documents=ctx.catalog.docs(docs), tool_ids=ctx.catalog.tool_ids,
                           adapter_root=adapter_root, preferences=preferences, docs=docs,
                           dense_config=ctx.params.dense, frozen=not benchmark)

    return build


def _training_catalog(section: QTASection, name: str, component: str) -> str:
    """The synthetic training catalog of benchmark ``name`` (what ``component`` is trained on).

    Raises:
        ConfigError: ``name`` has none (naming the component, the dataset and the benchmarks that have one).
    """
    training = section.synthetic.training_catalog(name)
    if training is None:
        raise ConfigError(f"{component}: dataset {name!r} has no synthetic training catalog (params.yaml "
                          f"qta.synthetic.runs names {sorted(section.synthetic.runs) or 'none'})")
    return training


def _build_synthetic_ft(ctx: BuildContext):
    """``qta-syn-ft``: on a fold of a benchmark of ``qta.synthetic.runs``, a LoRA adapter trained by DPO on the
    fold's labelled preference pairs (``qta``'s data) on top of the benchmark's synthetic adapter
    (``data/models/<catalog>/qta-syn-ft``)."""

    section = ctx.params.qta
    cfg = section.finetune_config()
    name = base_dataset(ctx.catalog)
    training = _training_catalog(section, name, "qta-syn-ft")
    docs = cfg.docs_for(name)
    synthetic = section.synthetic_config()
    init = ctx.artifact_dir("models").parent / training / "qta" / synthetic.adapter_name()
    preferences = generator_artifact_dir(ctx.artifact_dir(ARTIFACTS), cfg.llm_model, DEFAULT_LLM) / "preferences.jsonl"
    adapter_root = Path(ctx.model) if ctx.model else ctx.artifact_dir("models") / "qta-syn-ft"
    return QTARewriter(cfg, documents=ctx.catalog.docs(docs), tool_ids=ctx.catalog.tool_ids,
                       adapter_root=adapter_root, preferences=preferences, docs=docs,
                       dense_config=ctx.params.dense, init_adapter=init)


def _trains_here(params, benchmark: str) -> bool:
    """A training catalog several benchmarks use (one benchmark's adapter on another: the cross-dataset
    protocol) is trained once, by the first benchmark naming it."""
    synthetic = params.qta.synthetic
    return synthetic.benchmark_of(synthetic.runs[benchmark].catalog) == benchmark


def _has_synthetic(params, run: str) -> bool:
    """A ``qta.runs`` fold whose dataset has a synthetic training catalog (``qta-syn-ft`` trains there)."""
    return params.qta.synthetic.training_catalog(params.qta.runs[run].dataset) is not None


def _synthetic_adapters(params) -> tuple[str, ...]:
    """Every synthetic adapter folder (what ``qta-syn-ft`` trains on top of; DVC cannot look one up per item)."""
    return tuple(sorted({f"data/models/{run.catalog}/qta" for run in params.qta.synthetic.runs.values()}))


_RUN = "--catalog data/curated/${item.dataset} --set catalog.folds=${item.folds} --set catalog.fold=${item.fold}"

METHOD = register_method(Method(
    name="qta",
    description="QTA: query-tool alignment, an LLM query rewriter trained by DPO + LoRA",
    sections=(Section("qta", QTASection),),
    components=(
        Component("qta-rewriter", "rewriter", _build(True), loads("toolret.methods.qta.components:QTARewriter"), ("qta", "dense"),
                  "QTA: LLM query rewriter trained by DPO + LoRA from the frozen retriever's gold ranks", trains=True),
        Component("qta-base", "rewriter", _build(False), loads("toolret.methods.qta.components:QTARewriter"), ("qta", "dense"),
                  "QTA's prompt on the untrained LLM (zero-shot); its fit samples the DPO preference data",
                  trains=True),
        Component("qta-syn", "rewriter", _build_synthetic(False), loads("toolret.methods.qta.components:QTARewriter"),
                  ("qta", "dense"), "QTA's rewriter trained by DPO on a synthetic training catalog of the "
                  "benchmark's tools (LLM-written requests, no labelled query)"),
        Component("qta-syn-large", "rewriter", _build_synthetic(True), loads("toolret.methods.qta.components:QTARewriter"),
                  ("qta", "dense"), "qta-syn with the larger rewriter of qta.synthetic.larger (its own samples)"),
        Component("qta-syn-ft", "rewriter", _build_synthetic_ft, loads("toolret.methods.qta.components:QTARewriter"),
                  ("qta", "dense"), "qta-syn's rewriter trained further by DPO on the fold's labelled queries",
                  trains=True),
    ),
    pipelines=(NamedPipeline("qta", "qta-rewriter+dense", "QTA (trained rewriter over frozen dense)"),
               NamedPipeline("qta-zs", "qta-base+dense", "QTA prompt, untrained LLM, over frozen dense"),
               NamedPipeline("qta-syn", "qta-syn+dense", "QTA trained on synthetic requests, over frozen dense"),
               NamedPipeline("qta-syn-large", "qta-syn-large+dense",
                             "QTA trained on synthetic requests with the larger rewriter, over frozen dense"),
               NamedPipeline("qta-syn-ft", "qta-syn-ft+dense",
                             "QTA trained on synthetic requests, then on the fold's labelled ones, over frozen dense")),
    stages=(
        StageTemplate(
            name="qta_preferences", order=42, costly=True, foreach="${qta.runs}",
            desc="QTA DPO preference data: m rounds x 2 LLM rewrites per training query, scored by eq. 4 under "
                 "frozen dense",
            cmd=f"toolret fit --component qta-base {_RUN} --out data/qta/${{key}}/preferences.jsonl",
            entry="toolret.cli:cmd_fit", components=("qta-base+dense",), deps=("data/curated/${item.dataset}",),
            params=("qta", "dense", "catalog"),
            outs=in_git("data/qta/${key}/preferences.jsonl", "data/qta/${key}/preferences.meta.json"),
        ),
        StageTemplate(
            name="qta_adapter", order=43, costly=True, trains=True, foreach="${qta.runs}",
            desc="QTA LoRA adapters (one per qta.train_m) trained by DPO on the preference data",
            cmd=f"toolret fit --component qta-rewriter {_RUN} --out data/models/${{key}}/qta",
            entry="toolret.cli:cmd_fit", components=("qta-rewriter+dense",),
            deps=("data/curated/${item.dataset}", "data/qta/${key}/preferences.jsonl"),
            params=("qta", "dense", "catalog"),
            outs=in_git("data/models/${key}/qta"),
        ),
        StageTemplate(
            name="qta_evaluate", order=62, foreach="${qta.runs}",
            desc="QTA evaluation grid (qta.grid: dense, QTA, zero-shot QTA ...) on the run's test queries, "
                 "paired tests vs dense",
            cmd=f"toolret evaluate-grid {_RUN} --grid qta.grid --docs ${{item.docs}} --out data/runs/${{key}}/qta",
            entry="toolret.cli:cmd_evaluate_grid", components=("qta", "qta-zs"),
            deps=("data/curated/${item.dataset}", "data/models/${key}/qta"),
            params=("qta", "dense", "catalog", "evaluation"),
            outs=("data/runs/${key}/qta",),
        ),
        StageTemplate(
            name="qta_synthetic", order=44, costly=True, trains=True, foreach="${qta.synthetic.runs}",
            desc="QTA on synthetic requests: DPO preference data over the benchmark's synthetic training catalog "
                 "(rank rewards from frozen dense) and the LoRA adapter trained on it",
            cmd="toolret fit --component qta-syn --catalog data/curated/${item.catalog} --out data/models/${item.catalog}/qta",
            entry="toolret.cli:cmd_fit", components=("qta-syn+dense",), deps=("data/curated/${item.catalog}",),
            params=("qta", "dense", "catalog"), keep=_trains_here,
            outs=in_git("data/models/${item.catalog}/qta", "data/qta/${item.catalog}/preferences.jsonl",
                        "data/qta/${item.catalog}/preferences.meta.json"),
        ),
        StageTemplate(
            name="qta_synthetic_evaluate", order=63, foreach="${qta.synthetic.runs}",
            desc="QTA trained on synthetic requests, evaluated on every test query of the benchmark "
                 "(qta.synthetic.grid, paired tests vs dense), and its test rewrites (what the report's change table reads)",
            cmd="toolret evaluate-grid --catalog data/curated/${key} --grid qta.synthetic.grid --docs ${item.docs} "
                "--out data/runs/${key}/qta-synthetic --record-generations qta-rewrites && toolret rewrite --component qta-syn --catalog data/curated/${key} "
                "--split test --out data/qta/${item.catalog}/${key}.test-rewrites.jsonl",
            entry="toolret.cli:cmd_evaluate_grid", components=("qta-syn", "dense"),
            deps=("data/curated/${key}", "data/models/${item.catalog}/qta"),
            params=("qta", "dense", "catalog", "evaluation"),
            outs=("data/runs/${key}/qta-synthetic", *in_git("data/qta/${item.catalog}/${key}.test-rewrites.jsonl",
                                                            "data/qta/${item.catalog}/${key}.test-rewrites.meta.json")),
        ),
        StageTemplate(
            name="qta_syn_dev", order=59, foreach="${qta.synthetic.runs}",
            desc="qta.synthetic.dev_grid on the synthetic training catalog's dev split (LLM-written requests, no test "
                 "query): where the synthetic rewriter's search settings (several rewrites fused with the query) "
                 "are chosen; the sampled rewrites are committed as shards",
            cmd="toolret evaluate-grid --catalog data/curated/${item.catalog} --split dev --grid qta.synthetic.dev_grid "
                "--docs ${item.docs} --out data/runs/${item.catalog}/qta-synthetic-dev --record-generations qta-rewrites",
            entry="toolret.cli:cmd_evaluate_grid", components=("qta-syn", "dense"),
            deps=("data/curated/${item.catalog}", "data/models/${item.catalog}/qta"),
            params=("qta", "dense", "catalog", "evaluation"), keep=_trains_here, only_if="qta.synthetic.dev_grid",
            outs=("data/runs/${item.catalog}/qta-synthetic-dev",),
        ),
        StageTemplate(
            name="qta_syn_large", order=46, costly=True, trains=True, foreach="${qta.synthetic.runs}",
            desc="QTA on synthetic requests with the larger rewriter (qta.synthetic.larger): its preference samples, "
                 "committed in shards as they come (data/qta/generations/), and its LoRA adapter, whose DPO "
                 "checkpoints go to data/qta/<catalog>/<model>/checkpoints/ (a training longer than a session resumes)",
            cmd="toolret fit --component qta-syn-large --catalog data/curated/${item.catalog} "
                "--out data/models/${item.catalog}/qta-large --record-generations qta-preferences",
            entry="toolret.cli:cmd_fit", components=("qta-syn-large+dense",), deps=("data/curated/${item.catalog}",),
            params=("qta", "dense", "catalog"), keep=_trains_here, only_if="qta.synthetic.larger.set",
            outs=in_git("data/models/${item.catalog}/qta-large",
                        "data/qta/${item.catalog}/${qta.synthetic.larger.set.llm_model}/preferences.jsonl",
                        "data/qta/${item.catalog}/${qta.synthetic.larger.set.llm_model}/preferences.meta.json"),
        ),
        StageTemplate(
            name="qta_syn_large_evaluate", order=65, foreach="${qta.synthetic.runs}",
            desc="qta.synthetic.larger.grid (dense, the 0.5B and the larger synthetic rewriter) on every test query of "
                 "the benchmark, paired tests vs dense",
            cmd="toolret evaluate-grid --catalog data/curated/${key} --grid qta.synthetic.larger.grid --docs ${item.docs} "
                "--out data/runs/${key}/qta-synthetic-large --record-generations qta-rewrites "
                "&& toolret rewrite --component qta-syn-large --catalog data/curated/${key} --split test "
                "--out data/qta/${item.catalog}/${qta.synthetic.larger.set.llm_model}/${key}.test-rewrites.jsonl",
            entry="toolret.cli:cmd_evaluate_grid", components=("qta-syn-large", "qta-syn", "dense"),
            deps=("data/curated/${key}", "data/models/${item.catalog}/qta-large", "data/models/${item.catalog}/qta"),
            params=("qta", "dense", "catalog", "evaluation"), only_if="qta.synthetic.larger.grid",
            outs=("data/runs/${key}/qta-synthetic-large",
                  *in_git("data/qta/${item.catalog}/${qta.synthetic.larger.set.llm_model}/${key}.test-rewrites.jsonl",
                          "data/qta/${item.catalog}/${qta.synthetic.larger.set.llm_model}/${key}.test-rewrites.meta.json")),
        ),
        StageTemplate(
            name="qta_syn_ft", order=45, costly=True, trains=True, foreach="${qta.runs}",
            desc="QTA's synthetic adapter trained further by DPO on the fold's labelled preference pairs (a LoRA "
                 "adapter on top of it)",
            cmd=f"toolret fit --component qta-syn-ft {_RUN} --out data/models/${{key}}/qta-syn-ft",
            entry="toolret.cli:cmd_fit", components=("qta-syn-ft+dense",),
            deps=("data/curated/${item.dataset}", "data/qta/${key}/preferences.jsonl"),
            params=("qta", "dense", "catalog"), keep=_has_synthetic, params_deps=_synthetic_adapters,
            outs=in_git("data/models/${key}/qta-syn-ft"),
        ),
        StageTemplate(
            name="qta_syn_ft_evaluate", order=64, foreach="${qta.runs}",
            desc="qta.synthetic.finetune.grid (dense, the synthetic rewriter, it fine-tuned on the fold) on the "
                 "fold's test queries, paired tests vs dense",
            cmd=f"toolret evaluate-grid {_RUN} --grid qta.synthetic.finetune.grid --docs ${{item.docs}} "
                "--out data/runs/${key}/qta-syn-ft",
            entry="toolret.cli:cmd_evaluate_grid", components=("qta-syn-ft", "qta-syn", "dense"),
            deps=("data/curated/${item.dataset}", "data/models/${key}/qta-syn-ft"),
            params=("qta", "dense", "catalog", "evaluation"), keep=_has_synthetic, params_deps=_synthetic_adapters,
            outs=("data/runs/${key}/qta-syn-ft",),
        ),
    ),
    report="toolret.methods.qta.report:write_report",
))
