"""QTA settings (pydantic: the paper's defaults are the single source) and ``params.yaml: qta``.

Paper (Zhang et al., SIGIR-AP'24, Sec. 4-5.1): s = 5 randomly sampled tool documents in the rewriter
prompt; reward cutoff n = 10 (eq. 4); two rewrites per DPO sample "at a high temperature"; m = 100 DPO
samples per annotated query (ablation 1 / 10 / 100); DPO batch 32, 3 epochs, lr 5e-6, beta as in the DPO
paper (0.1); frozen retriever all-MiniLM-L6-v2; Mistral-7B rewriter. Choices the paper leaves open, and
where we depart from it for 2 CPU cores, are ours and written down here:

- temperature 0.7 / top-p 0.95 for the two training samples ("a high temperature"; at 1.0 most samples
  of the 135M model were off-topic in a probe on 10 RestBench queries, at 0.7 a quarter beat the
  original query); inference decodes greedily (one rewrite per query, deterministic);
- T_sub is re-sampled (seeded by query id and round) for every round and for every test query;
  sampled tool documents are cut to ``doc_chars`` characters so prompt + rewrite fit ``max_length``
  tokens of DPO training (the paper does not say how long its prompt was);
- the pair a round yields (``pair_rule``): ``best_worst`` (default, the first reading) = the best-scored of
  {q, q1, q2} (first in that order on ties) against the worst (last on ties); ``rewrites_only`` = the
  better rewrite against the worse, in rounds where a rewrite beats q (q only decides whether a round
  yields a pair); a round whose pair would tie is skipped; a rewrite that does not parse is scored as the
  query it falls back to and its raw text is the completion (so DPO can learn to reject malformed outputs);
- LoRA with lr 1e-4 (the paper's 5e-6 is a full-model rate; LoRA adapters need a larger one), batch 4
  pairs; ``max_length`` 384 tokens (prompt ~300 + rewrite <= 48); ``precompute_ref_log_probs`` (the frozen
  reference is run once);
- no dev split exists in a 10-query fold. The project's settings (params.yaml) were chosen on fold 0 only
  and are reported on folds 1-3 (docs/RESULTS.md): the 0.5B rewriter, LoRA r 8 / alpha 16 on the attention
  projections, ``rewrites_only``, 4 epochs, ``search: query_and_rewrite``.

Synthetic training requests (``qta.synthetic``, pipeline ``qta-syn``; not in the paper): the rewriter is
trained on a synthetic training catalog of the benchmark's tools -- LLM-written requests whose source tools
are their gold (:mod:`toolret.llm.synthetic_catalog`) -- with the same eq. 4 rank rewards from the same frozen
retriever, so no labelled query of the benchmark is read and every test query is unused by any choice. Its
settings (rounds per request, pair rule, epochs) are chosen on that catalog's dev split.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, model_validator

from toolret.catalog.folds import fold_name
from toolret.config import ComponentSection, GridVariant, StrictModel
from toolret.llm.models import model_slug

# QTA's rewriter (the paper's is Mistral-7B): Qwen2.5-Coder-0.5B-Instruct, Re-Invoke's generator. The 135M
# SmolLM2 of the first runs learned to copy the query (docs/RESULTS.md); its artifacts are in git history
DEFAULT_LLM = "qwen2.5-coder-0.5b-instruct"


class QTAConfig(StrictModel):
    """Everything that determines QTA's artifacts (the frozen retriever's settings are ``params.dense``).

    Attributes:
        s: tool documents sampled into the rewriter prompt (T_sub).
        n: reward cutoff of eq. 4.
        m: DPO samples (rounds) per training query of the adapter the ``qta`` rewriter uses.
        train_m: every m an adapter is trained for (ablation; the preference data holds max(train_m, m)
            rounds and the adapter for m uses the first m).
        temperature, top_p, seed: sampling of the two training rewrites.
        max_new_tokens: rewrite budget (training samples and inference).
        max_rewrite_chars: a longer rewrite is rejected (fallback to the query, reason ``too_long``).
        doc_chars: each sampled tool document is cut to this many characters in the prompt.
        docs: which document variant QTA samples into prompts and ranks for the reward, per dataset
            (default ``original``); evaluate on the same variant.
        lora_r, lora_alpha, lora_dropout, lora_targets: the peft adapter.
        beta, lr, epochs, batch_size, grad_accum, max_length, warmup_ratio: DPO training (trl).
        save_steps: checkpoint every n optimizer steps (a killed run resumes from the last one).
        llm_model, llm_batch_size, llm_num_threads, llm_device, cache_dir: the local LLM and its JSONL cache.
        mlflow: log per-step training metrics (loss, reward margins, accuracy) to MLflow.
        adapter_from: use the adapters in this folder (trained on another catalog: the cross-dataset
            protocol) instead of the catalog's own; nothing is trained.
        train_queries: sample preferences for at most this many train queries (seeded; 0 = all).
        pair_rule: which DPO pair each preference round yields (``preferences.choose_pair``).
        search: ``rewrite`` searches the rewrite alone; ``query_and_rewrite`` fuses both rankings (RRF).
        rewrites: rewrites per query at search time (the greedy one, then sampled ones), fused by RRF.
        query_weight: the query's RRF weight under ``query_and_rewrite`` (the rewrites share the rest).
        bf16: DPO under bfloat16 autocast (CPUs with AMX / bf16 units, GPUs): the same model and data, about
            2x less time per DPO step on a 2-core AMX CPU (``benchmarks/results/qta_dpo_step.json``).
    """

    s: int = Field(5, ge=1)
    n: int = Field(10, ge=1)
    m: int = Field(10, ge=1)
    train_m: list[int] = Field(default_factory=list)
    temperature: float = Field(0.7, gt=0)
    top_p: float = Field(0.95, gt=0, le=1)
    seed: int = 0
    max_new_tokens: int = Field(48, ge=4)
    max_rewrite_chars: int = Field(400, ge=20)
    doc_chars: int = Field(100, ge=20)
    docs: dict[str, str] = Field(default_factory=dict)
    lora_r: int = Field(16, ge=1)
    lora_alpha: int = Field(32, ge=1)
    lora_dropout: float = Field(0.05, ge=0, lt=1)
    lora_targets: str | list[str] = "all-linear"
    beta: float = Field(0.1, gt=0)
    lr: float = Field(1e-4, gt=0)
    epochs: float = Field(1.0, gt=0)
    batch_size: int = Field(4, ge=1)
    grad_accum: int = Field(1, ge=1)
    max_length: int = Field(384, ge=16)
    warmup_ratio: float = Field(0.0, ge=0, lt=1)
    save_steps: int = Field(5, ge=1)
    llm_model: str = DEFAULT_LLM
    llm_batch_size: int = Field(32, ge=1)
    llm_num_threads: int | None = None
    llm_device: str = "cpu"
    cache_dir: str | None = None
    mlflow: bool = True
    adapter_from: str | None = None  # cross-dataset: an adapter folder (.../qta) trained on another catalog
    train_queries: int = Field(0, ge=0)  # 0 = every train query; else a seeded subsample (large train splits)
    # which pair a preference round gives DPO (toolret.methods.qta.preferences.choose_pair): best_worst of
    # {q, q1, q2} (the default reading), beat_query (only rounds where a rewrite beats q), rewrites_only (best vs
    # worst rewrite, in rounds where a rewrite beats q). Picked from the stored rewards: no new samples
    pair_rule: Literal["best_worst", "beat_query", "rewrites_only"] = "best_worst"
    # at search time: the rewrite alone (the paper), or the query and its rewrite both searched and fused by
    # reciprocal rank (equal weights; a rewrite that copies the query is the query's ranking)
    search: Literal["rewrite", "query_and_rewrite"] = "rewrite"
    # rewrites searched per query (not in the paper): the greedy one, then ``rewrites - 1`` sampled as the training
    # rewrites are, each with its own T_sub; their rankings fused by RRF with equal weights, beside the query's
    # ranking with ``query_weight`` under ``query_and_rewrite`` (1 and 0.5: one greedy rewrite, fused as above)
    rewrites: int = Field(1, ge=1)
    query_weight: float = Field(0.5, gt=0, lt=1)
    bf16: bool = False

    @model_validator(mode="after")
    def _train_m_includes_m(self):
        object.__setattr__(self, "train_m", sorted(set(self.train_m) | {self.m}))
        return self

    @property
    def rounds(self) -> int:
        """Rounds of preference sampling the data needs (the largest m trained)."""
        return max(self.train_m)

    def docs_for(self, dataset: str) -> str:
        return self.docs.get(dataset, "original")

    def adapter_name(self, m: int | None = None) -> str:
        """Sub-folder of the adapter artifact for ``m``: ``m10`` (``m10-<llm>`` for a non-default LLM)."""
        name = f"m{self.m if m is None else m}"
        if self.pair_rule != "best_worst":
            name += f"-{self.pair_rule}"
        if self.llm_model != DEFAULT_LLM:

            name += "-" + model_slug(self.llm_model)
        return name

    def sampling_key(self) -> dict:
        """What the preference data depends on (beyond the catalog and the retriever)."""
        return {k: getattr(self, k) for k in ("s", "n", "temperature", "top_p", "seed", "max_new_tokens",
                                              "max_rewrite_chars", "doc_chars", "llm_model", "train_queries")}

    def training_key(self, m: int) -> dict:
        """What an adapter depends on (beyond its preference data)."""
        keys = ("lora_r", "lora_alpha", "lora_dropout", "lora_targets", "beta", "lr", "epochs", "batch_size",
                "grad_accum", "max_length", "warmup_ratio", "seed", "llm_model")
        # keys added after the first adapters: named only when not their default (older adapters keep their key)
        later = {k: getattr(self, k) for k, default in (("pair_rule", "best_worst"), ("bf16", False))
                 if getattr(self, k) != default}
        return {"m": m, **{k: getattr(self, k) for k in keys}, **later}


class QTARun(StrictModel):
    """One run of the QTA stages (``params.yaml: qta.runs``, keyed by the catalog it runs on).

    ``folds`` > 0: fold ``fold`` of ``folds`` of ``dataset``'s test queries is the train split, and the key
    must be the folded catalog's name (``<dataset>-fold<fold>of<folds>``); ``folds`` 0: the dataset's own
    train split, key = ``dataset``. ``docs``: the document variant evaluated (use the one ``qta.docs`` names).
    ``selection``: the run the settings were chosen on; the report's pooled test leaves it out.
    """

    dataset: str
    folds: int = Field(9, ge=0)
    fold: int = Field(0, ge=0)
    docs: Literal["original", "cleaned", "human"] = "original"
    selection: bool = False

    def catalog_name(self) -> str:
        return fold_name(self.dataset, self.folds, self.fold) if self.folds else self.dataset


class QTASyntheticRun(StrictModel):
    """One benchmark's synthetic-request QTA (``params.yaml: qta.synthetic.runs.<benchmark>``): ``catalog``, the
    synthetic training catalog of its tools (``params.yaml: synthetic``) the adapter is trained on; the
    adapter is evaluated on the benchmark's test queries with ``docs`` (``qta.docs``' variant for it)."""

    catalog: str
    docs: Literal["original", "cleaned", "human"] = "original"


class QTAVariant(StrictModel):
    """A variant of the synthetic rewriter with its own stages: ``set``, its QTA settings that differ from those it
    starts from; ``grid``, what its evaluation stage runs (paired tests against dense on the same queries).

    - ``qta.synthetic.finetune`` (pipeline ``qta-syn-ft``): the synthetic adapter trained further by DPO on each
      ``qta.runs`` fold's labelled preference pairs (a new LoRA on top of it: policy and reference start from the
      synthetic rewriter); ``set`` over ``qta``'s (the fold adapters'); its grid runs on each fold's test queries.
    - ``qta.synthetic.larger`` (pipeline ``qta-syn-large``): the synthetic training again with a larger rewriter
      (``set: {llm_model: ...}`` over ``qta.synthetic.set``), its own preference samples (committed in shards as they
      come) and adapter; its grid runs on each benchmark's test queries.
    """

    set: dict[str, object] = Field(default_factory=dict)
    grid: dict[str, GridVariant] = Field(default_factory=dict)


class QTASynthetic(StrictModel):
    """``params.yaml: qta.synthetic``: QTA trained on synthetic requests (pipeline ``qta-syn``).

    ``set``: the QTA settings of the synthetic adapter that differ from ``qta``'s (``m``: preference rounds per
    request; ``train_m`` follows it), chosen on the training catalog's dev split; ``grid``: evaluated on each
    benchmark of ``runs`` (paired tests against dense on the same queries); ``finetune``: the synthetic adapter
    trained further on a fold's labelled queries; ``larger``: the same training with a larger rewriter;
    ``dev_grid``: evaluated on the training catalog's dev split (no test query read), where the synthetic
    rewriter's search settings (``rewrites``, ``query_weight``) that ``grid`` evaluates are chosen."""

    runs: dict[str, QTASyntheticRun] = Field(default_factory=dict)
    set: dict[str, object] = Field(default_factory=dict)
    grid: dict[str, GridVariant] = Field(default_factory=dict)
    dev_grid: dict[str, GridVariant] = Field(default_factory=dict)
    finetune: QTAVariant = Field(default_factory=QTAVariant)
    larger: QTAVariant = Field(default_factory=QTAVariant)

    def training_catalog(self, dataset: str) -> str | None:
        run = self.runs.get(dataset)
        return run.catalog if run else None

    def benchmark_of(self, catalog: str) -> str | None:
        """The benchmark whose training catalog ``catalog`` is (``None``: not one)."""
        return next((name for name, run in self.runs.items() if run.catalog == catalog), None)


class QTASection(QTAConfig, ComponentSection):
    """``params.yaml: qta``: the component settings, the runs its stages execute, the evaluation grid
    (paired tests against zero-shot dense on the same queries); the paper's numbers are ``results/matrix/qta.yaml: papers``."""

    runs: dict[str, QTARun] = Field(default_factory=dict)
    grid: dict[str, GridVariant] = Field(default_factory=dict)
    synthetic: QTASynthetic = Field(default_factory=QTASynthetic)

    def synthetic_config(self) -> QTAConfig:
        """The component settings of the synthetic-request adapter: ``qta``'s, with ``qta.synthetic.set``."""
        return self._config_with(self.synthetic.set, "qta.synthetic.set")

    def finetune_config(self) -> QTAConfig:
        """The settings of the synthetic adapter's fine-tuning on a fold: ``qta``'s, with ``qta.synthetic.finetune.set``."""
        return self._config_with(self.synthetic.finetune.set, "qta.synthetic.finetune.set")

    def larger_config(self) -> QTAConfig:
        """The settings of the larger synthetic rewriter: the synthetic adapter's, with ``qta.synthetic.larger.set``."""
        return self._config_with({**self.synthetic.set, **self.synthetic.larger.set}, "qta.synthetic.larger.set")

    def _config_with(self, changes: dict[str, object], where: str) -> QTAConfig:
        update = dict(changes)
        if "m" in update and "train_m" not in update:
            update["train_m"] = [update["m"]]
        base = self.component_config().model_dump()
        try:
            return QTAConfig.model_validate({**base, **update})
        except ValidationError as e:
            why = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'value'}: {err['msg']}" for err in e.errors())
            raise ValueError(f"{where}: {why}") from None

    @model_validator(mode="after")
    def _run_keys(self):
        bad = {k: r.catalog_name() for k, r in self.runs.items() if k != r.catalog_name()}
        if bad:
            raise ValueError(f"qta.runs keys must name the catalog they run on: {bad}")
        self.synthetic_config()  # a bad qta.synthetic.set key fails when params load, naming it
        self.finetune_config()
        self.larger_config()
        return self
