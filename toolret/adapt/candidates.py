"""The retrievers ``adapt`` compares: untrained ones, ones trained on the synthetic requests, and document
expansion with them.

=============  =========  ==================================================================================
name           kind       what
=============  =========  ==================================================================================
bm25           untrained  BM25 (``params.bm25``)
bm25-stem      untrained  BM25 with the Snowball stemmer and identifier splitting (``searchBooks``)
dense          untrained  the bi-encoder (``params.dense``)
hybrid         untrained  bm25 + dense fused, the weight chosen on the synthetic dev split
dense-ft       trained    the bi-encoder with a LoRA adapter trained on the synthetic train split
hybrid-ft      trained    bm25 + dense-ft fused, at hybrid's weight
bm25-exp       expansion  BM25 over each document expanded with its requests (Re-Invoke's index)
dense-exp      expansion  the bi-encoder over the expanded documents (Re-Invoke: mean of the copies)
hybrid-exp     expansion  bm25-exp + dense fused, at hybrid's weight (expansion on the lexical side)
hybrid-exp-ft  expansion  bm25-exp + dense-ft fused, at hybrid's weight (expansion lexical, training dense)
dense-ft-plain trained    with feedback only (``adapt --feedback``): dense-ft trained on the feedback positives
                          unweighted, while dense-ft (and the candidates built on it) weigh them by inverse
                          propensity (:func:`toolret.feedback.query_set.with_feedback`)
=============  =========  ==================================================================================

While a candidate is measured on dev, expansion uses every request where the champion is chosen on the goal-style
requests (which no index holds: the measured index is the served one, and a tool added later is expanded when
re-adapted, as a held-out tool is here), else the train split's only (a held-out tool keeps its plain document);
the served index expands with all of them.

A fused candidate with a side that read the synthetic requests (trained on them, or documents expanded with
them) takes its weight from ``hybrid`` (``weight_from``), whose two sides read none: the dev requests are written
by the generator that wrote the training ones, so dev rewards that side for the generator's style, and a weight
chosen there leans on it past what real requests bear (on ToolLens the dev-chosen weight put hybrid-exp-ft at
dense-ft alone: dev nDCG@5 0.810, test Recall@5 0.280 where hybrid scores 0.349).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolret.catalog.model import Catalog
from toolret.methods.reinvoke.components import ReInvokeIndex
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.pipeline import Pipeline
from toolret.retrieval.bm25 import BM25Retriever
from toolret.retrieval.dense import DenseRetriever
from toolret.retrieval.finetuned import FinetunedDenseRetriever
from toolret.retrieval.hybrid import HybridConfig, HybridRetriever, HybridSide

UNTRAINED = ("bm25", "bm25-stem", "dense", "hybrid")
BASELINES = ("bm25", "dense", "hybrid")  # what labelled results are paired-tested against


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str  # untrained | trained | expansion
    build: Callable[[Sequence[Sequence[str]]], Any]  # per-tool expansion requests -> an unfitted Pipeline
    weight_from: str | None = None  # a fused candidate: the candidate whose dev-chosen weight it is built with
    fused: bool = False  # a lexical and a dense side fused (the choice prefers it to a single-side one it ties with)

    @property
    def trained(self) -> bool:
        return self.kind != "untrained"


def with_weight_of(pipe, source) -> None:
    """``pipe``'s hybrid fused at ``source``'s weight (chosen on dev), not selecting its own."""
    hybrid, weight = pipe.retriever, source.retriever.weight
    hybrid.config = hybrid.config.model_copy(update={"select_on_dev": False})
    hybrid.weight = weight
    hybrid.stats.update(weight=weight, weight_source=f"{source.name}'s, chosen on the adapt dev split")


def _hybrid_config(params):

    # both sides read the catalog's own documents (a user's catalog has no cleaned variant)
    return HybridConfig(**{**params.hybrid.model_dump(), "dev_dataset": None, "select_on_dev": True,
                           "sides": [HybridSide(component="bm25"), HybridSide(component="dense")]})


def expansion_records(tool_ids: Sequence[str], per_tool: Sequence[Sequence[str]], n: int) -> list[dict[str, Any]]:
    """Re-Invoke synthetic-query records: samples ``0..n-1`` of every tool, ``query`` ``None`` beyond its own
    requests (a tool without any keeps its plain document)."""
    return [{"tool_id": t, "sample_index": j, "query": qs[j] if j < len(qs) else None}
            for t, qs in zip(tool_ids, per_tool) for j in range(n)]


def candidates(catalog: Catalog, params, work: Path, budget: str, n: int,
               finetune_overrides: dict[str, Any] | None = None, reuse_adapter: bool = False,
               feedback: tuple[Catalog, Catalog] | None = None) -> list[Candidate]:
    """Every candidate of ``budget`` for ``catalog``: builders of fresh pipelines (``work``: where dense-ft's
    adapter is trained and kept; ``reuse_adapter``: the adapter there is used as it is, not retrained).
    ``feedback``: the training catalogs with the feedback positives ``(weighted, plain)``: dense-ft trains on
    the weighted one, and ``dense-ft-plain`` is added, trained on the plain one."""

    stem = params.bm25.replace(stemmer="english", split_identifiers=True)
    ft_config = params.finetune.resolved(params.dense).replace(
        method="lora", **{**BUDGETS[budget]["finetune"], **(finetune_overrides or {})})
    ft_dir = work / "dense-ft"
    reinvoke = ReInvokeConfig(n_queries=n, generate_queries=n, tool_vectors="off")

    def ft():
        if reuse_adapter:  # the trained encoder as it is (fit learns nothing)
            return DenseRetriever(params.dense.replace(model=str(ft_dir / "model"),
                                                       max_seq_length=ft_config.max_seq_length))
        return FinetunedDenseRetriever(ft_dir, ft_config, params.dense,
                                       training_catalog=(lambda: feedback[0]) if feedback else None)

    def expansion_index(backbone: str, per_tool):
        return ReInvokeIndex(reinvoke, backbone, dense_config=params.dense, bm25_config=params.bm25,
                             synthetic=expansion_records(catalog.tool_ids, per_tool, n), round_trip=False)

    def expanded(backbone: str):
        return lambda per_tool: Pipeline(expansion_index(backbone, per_tool), name=f"{backbone}-exp")

    out = [
        Candidate("bm25", "untrained", lambda _: Pipeline(BM25Retriever(params.bm25), name="bm25")),
        Candidate("bm25-stem", "untrained", lambda _: Pipeline(BM25Retriever(stem), name="bm25-stem")),
        Candidate("dense", "untrained", lambda _: Pipeline(DenseRetriever(params.dense), name="dense")),
        Candidate("hybrid", "untrained", lambda _: Pipeline(HybridRetriever(
            [BM25Retriever(params.bm25), DenseRetriever(params.dense)], _hybrid_config(params)), name="hybrid"),
            fused=True),
        Candidate("dense-ft", "trained", lambda _: Pipeline(ft(), name="dense-ft")),
        Candidate("hybrid-ft", "trained", lambda _: Pipeline(HybridRetriever(
            [BM25Retriever(params.bm25), ft()], _hybrid_config(params)), name="hybrid-ft"), weight_from="hybrid",
            fused=True),
        Candidate("bm25-exp", "expansion", expanded("bm25")),
        Candidate("dense-exp", "expansion", expanded("dense")),
        Candidate("hybrid-exp", "expansion", lambda per_tool: Pipeline(HybridRetriever(
            [expansion_index("bm25", per_tool), DenseRetriever(params.dense)], _hybrid_config(params)),
            name="hybrid-exp"), weight_from="hybrid", fused=True),
        Candidate("hybrid-exp-ft", "expansion", lambda per_tool: Pipeline(HybridRetriever(
            [expansion_index("bm25", per_tool), ft()], _hybrid_config(params)), name="hybrid-exp-ft"),
            weight_from="hybrid", fused=True),
    ]
    if feedback:
        out.append(Candidate("dense-ft-plain", "trained", lambda _: Pipeline(FinetunedDenseRetriever(
            work / "dense-ft-plain", ft_config, params.dense, training_catalog=lambda: feedback[1]),
            name="dense-ft-plain")))  # a second adapter, on the unweighted feedback
    return out


# what a budget buys: requests per tool, and dense-ft's training (LoRA adapter on the default encoder)
# goal_n goal-style dev requests for each of at most goal_tools held-out tools, and one multi-tool request for
# each of at most multi_groups groups of trained-side tools (toolret.adapt.synthetic)
BUDGETS: dict[str, dict[str, Any]] = {
    # <= 100 LoRA steps of batch 32 (~4 s each on 2 cores): minutes, whatever the catalog's size
    "fast": {"n": 5, "goal_n": 3, "goal_tools": 100, "multi_groups": 200,
             "finetune": {"epochs": 2, "max_train_pairs": 1600, "eval_steps": 0, "lr": 1e-3}},
    "full": {"n": 10, "goal_n": 5, "goal_tools": 200, "multi_groups": 600,
             "finetune": {"epochs": 3, "max_train_pairs": 20000, "eval_steps": 100, "lr": 1e-3}},
}


__all__ = ["BASELINES", "BUDGETS", "Candidate", "UNTRAINED", "candidates", "expansion_records", "with_weight_of"]
