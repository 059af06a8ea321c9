"""ToolRerank settings (``params.yaml: toolrerank``); the pydantic models are the single source of defaults.

Two kinds of settings:

- training (what the artifact ``data/models/<train_dataset>/toolrerank`` is): the training catalog, the
  base model of the cross-encoder, the first stage that mines hard negatives, the (reduced) amount of
  training data, the trainer's hyperparameters, the dev-split grid;
- inference: ``m_s``, ``m_u``, ``tau_s``, ``tau_m``, ``n`` (``None`` = the values the dev grid selected,
  recorded in the artifact), which Hierarchy-Aware Reranking runs (``hierarchy``), the extended API list
  switches, and the score cache.

Choices the paper leaves open, ours:

- cross-encoder scores are the sigmoid of the one-logit head (the paper: "a relevance score between 0 and
  1"), so ``tau_s`` compares probabilities;
- ``sim(r_i, r_j)`` of Alg. 2 is the cosine of the API documents under the first-stage bi-encoder
  (``params.dense``), the paper's dual encoder;
- the query-type classifier is a logistic regression (balanced class weights) on the bi-encoder's query
  embedding, trained on the training split's queries labelled multi-tool when their gold APIs span more
  than one tool (the paper fine-tunes a BERT classifier);
- the cross-encoder's loss: list-wise over in-batch negatives (``loss: in_batch``) by default, where the
  paper trains pointwise; on ToolLens the pointwise loss learned an API prior instead of relevance;
- results: the reranked list F, then the first-stage candidates Adaptive Truncation dropped, in
  first-stage order (so metrics at k beyond |F| stay defined); scores are rank-derived;
- the dev grid breaks ties toward the paper's best values (10 / 50 / 0.85 / 0.7 / 3).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from toolret.config import ComponentSection, GridVariant, StrictModel
from toolret.retrieval.fusion import check_weight_grid
from toolret.retrieval.models import LoraSettings

TAUS = [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9]
PAPER_BEST = {"m_s": 10, "m_u": 50, "tau_s": 0.85, "tau_m": 0.7, "n": 3}


class GridConfig(StrictModel):
    """The dev-split search grid (paper Table 2)."""

    m_s: list[int] = Field(default_factory=lambda: [10, 30, 50])
    m_u: list[int] = Field(default_factory=lambda: [10, 30, 50])
    tau_s: list[float] = Field(default_factory=lambda: list(TAUS))
    tau_m: list[float] = Field(default_factory=lambda: list(TAUS))
    n: list[int] = Field(default_factory=lambda: [2, 3, 4])
    # weights of the reranked order fused with the first stage's (weighted RRF), selected after the rest;
    # [1.0] = the paper's reranked order alone
    ce_weight: list[float] = Field(default_factory=lambda: [1.0])
    metric: str = "recall@5"  # the paper selects on Recall@5 / NDCG@5; one metric here

    @field_validator("ce_weight")
    @classmethod
    def _weights_in_unit_interval(cls, v: list[float]) -> list[float]:
        return check_weight_grid(v, "grid.ce_weight")


class TrainingConfig(LoraSettings):
    """What the trained artifact depends on (its folder is keyed by the training dataset). ``method: lora``
    trains a LoRA adapter over ``base_model`` plus the new head (a ~3 MB artifact kept in git)."""

    train_dataset: str | None = None  # a dataset name or BEIR folder (params.yaml); None: the evaluated catalog
    base_model: str = "all-MiniLM-L6-v2"  # a packaged encoder name or a local model folder; new 1-logit head
    first_stage: str = "dense"  # the retriever component that mines hard negatives and feeds the dev grid
    max_length: int = Field(64, ge=16)  # query + document tokens seen by the cross-encoder
    train_queries: int = Field(0, ge=0)  # training queries sampled from the train split (0 = all)
    # in_batch: per (query, gold API) row; bce: per query. Sampled from the first stage's top results (not gold)
    hard_negatives: int = Field(1, ge=0)
    hard_negative_depth: int = Field(30, ge=1)
    random_negatives: int = Field(4, ge=0)  # in_batch: other rows' gold APIs; bce: uniform over the library
    # in_batch: softmax over (gold, hard, in-batch negatives) -- MultipleNegativesRankingLoss; bce: pointwise
    # BinaryCrossEntropyLoss on labelled pairs, which here learns which APIs tend to be gold (docs/RESULTS.md)
    loss: Literal["bce", "in_batch"] = "in_batch"
    epochs: int = Field(1, ge=1)
    batch_size: int = 16
    lr: float = 2e-4  # as dense-ft; 5e-5 barely trained the new head in one short epoch
    warmup_ratio: float = 0.1
    classifier_queries: int = Field(0, ge=0)  # training queries for the query-type classifier (0 = all)
    dev_queries: int = Field(0, ge=0)  # dev queries scored for the grid (0 = all of the dev split)
    # other catalogs whose train splits are mixed into the cross-encoder's training (e.g. ToolLens into the
    # in-domain ToolBench data): ``mix_queries`` seeded queries of each, hard negatives mined by the same first
    # stage over that catalog's own documents; their gold APIs count as seen. The dev grid: train_dataset's dev split
    mix_datasets: list[str] = Field(default_factory=list)
    mix_queries: int = Field(1000, ge=0)  # per mixed catalog (0 = its whole train split)
    seed: int = 13
    grid: GridConfig = Field(default_factory=GridConfig)


class ToolRerankConfig(TrainingConfig):
    """Everything a ToolRerank / Rerank-m component reads."""

    # where the artifact lives (None: data/models/<train_dataset>/toolrerank): an ablation trained with other
    # settings on the same catalog (another first stage, a mixed-in catalog) sits elsewhere; not part of its key
    artifact: str | None = None
    candidates: int = Field(50, ge=1)  # first-stage depth the reranker asks for (>= every m)
    m_s: int | None = None  # None: the dev-selected value in the artifact
    m_u: int | None = None
    tau_s: float | None = None
    tau_m: float | None = None
    n: int | None = None
    hierarchy: Literal["classifier", "none", "single", "multi", "oracle"] = "classifier"
    extend_unseen: bool = True  # extended API list for unseen tools in X (paper: on)
    extend_seen: bool = False  # ... and for seen tools (paper: off)
    seen_level: Literal["api", "tool"] = "api"
    batch_size_predict: int = 32
    device: str = "cpu"
    # the cross-encoder's training is checkpointed every save_steps steps beside the artifact (its work folder);
    # a rerun of the same training resumes from the last checkpoint (0: no checkpoints). Not part of the artifact
    save_steps: int = Field(25, ge=0)
    quantize: bool = False  # int8 dynamic quantisation of the cross-encoder at scoring (CPU speed; see benchmark)
    # 1.0 = the paper: the reranked order alone. < 1: the reranked list fused with the first stage's order by
    # weighted reciprocal rank (reranker weight ce_weight, first stage 1 - ce_weight; toolret.retrieval.fusion)
    # -- keeps the first stage's signal where the cross-encoder is weaker. None: the artifact's dev-selected
    # weight (grid.ce_weight; 1.0 for an artifact selected without one)
    ce_weight: float | None = Field(None, ge=0, le=1)
    score_cache: str | None = None  # None: <cache home>/ce_scores; "off": in-process memo only
    # "query" (the paper): the cross-encoder scores (query, API). "rewrites": in a pipeline with a rewriter
    # (e.g. Re-Invoke's intents), an API's score is the max over the query and each of its rewrites, so a
    # multi-request query's APIs are each scored against the request that names them
    score_views: Literal["query", "rewrites"] = "query"

    @model_validator(mode="after")
    def _depth_covers_grid(self):
        deepest = max([*self.grid.m_s, *self.grid.m_u, self.m_s or 0, self.m_u or 0])
        if self.candidates < deepest:
            raise ValueError(f"candidates ({self.candidates}) must be >= the largest m ({deepest})")
        return self

    def training(self) -> TrainingConfig:
        return TrainingConfig.model_validate({k: v for k, v in self.model_dump().items()
                                              if k in TrainingConfig.model_fields})


class ToolRerankSection(ToolRerankConfig, ComponentSection):
    """``params.yaml: toolrerank``: the component settings plus the ablation grid (``toolret evaluate-grid
    --grid toolrerank.ablations``) and which rows the report pairs against."""

    # the training catalogs a reranker is trained on (stage toolrerank_train@<name> -> data/models/<name>/toolrerank,
    # each over its own dense-ft); `train_dataset` chooses the artifact the pipelines read
    train_datasets: list[str] = Field(default_factory=list)
    ablations: dict[str, GridVariant] = Field(default_factory=dict)
    # rows run on a dev catalog that resembles the target (e.g. a training catalog's multi-API dev requests,
    # `toolret catalog select`) to choose what the artifact's query-only dev grid cannot: score_views
    dev_selection: dict[str, GridVariant] = Field(default_factory=dict)
    dev_selection_dataset: str | None = None  # the catalog the dev_selection rows run on (stage toolrerank_dev_selection)
    paper_columns: dict[str, str] = Field(default_factory=dict)  # dataset -> paper Table 3 column (I1-Inst ...)


__all__ = ["GridConfig", "PAPER_BEST", "TAUS", "ToolRerankConfig", "ToolRerankSection", "TrainingConfig"]
