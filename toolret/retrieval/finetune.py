"""Fine-tune a bi-encoder on (query, gold tool document) pairs with in-batch negatives.

MultipleNegativesRankingLoss (InfoNCE over the batch) through the sentence-transformers trainer, as in
COLT's semantic-learning stage. Batches never hold the same tool twice (``NO_DUPLICATES``), so no gold
tool serves as another query's negative. Selection data comes only from the dev split carved from
train; the test split is never read here.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from toolret.artifact_key import make_key, write_key
from toolret.atomic import atomic_directory, write_json
from toolret.catalog.model import Catalog
from toolret.errors import CatalogError
from toolret.evaluation import rank_split, run_info_path, score_ranking
from toolret.retrieval.committed_checkpoint import (checkpoint_dir, checkpoint_step, discard_checkpoint,
                                                    exporting_callback, import_checkpoint, last_complete_checkpoint)
from toolret.retrieval.dense import DenseConfig, DenseRetriever
from toolret.retrieval.models import LoraSettings, load_sentence_transformer, name_adapter_base, save_compact


class FinetuneConfig(LoraSettings):
    """``params.yaml: finetune`` (the encoder and device come from ``dense:`` unless set here).

    All train pairs for 2 epochs: ~1 h 45 min on 2 idle CPU cores for ToolLens (2,664 steps).
    """

    model: str | None = None  # None: params.dense.model
    device: str | None = None  # None: params.dense.device
    docs: str = "original"
    epochs: int = Field(2, ge=1)
    batch_size: int = 32
    lr: float = 2e-4
    warmup_ratio: float = 0.05
    max_seq_length: int = 64  # covers ~90% of ToolLens queries; docs lead with category, tool, API, description
    max_train_pairs: int = 0  # 0 = every (query, gold tool) pair of the train split
    eval_steps: int = 200  # > 0: dev recall@5 every n steps, checkpoint kept, best step selected, resumable
    seed: int = 13
    # per training catalog, settings over these (e.g. one catalog fine-tuned in full, the others with LoRA)
    datasets: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("datasets")
    @classmethod
    def _known_keys(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, settings in v.items():
            bad = sorted(set(settings) - (set(cls.model_fields) - {"datasets", "max_seq_length"}))
            if bad:  # max_seq_length also cuts queries at search time, before a catalog is known
                raise ValueError(f"finetune.datasets.{name}: keys {bad} cannot be set per dataset")
        return v

    def resolved(self, dense) -> FinetuneConfig:
        """``model`` / ``device`` filled from the dense section."""
        return self.replace(model=self.model or dense.model, device=self.device or dense.device)

    def to_dict(self) -> dict[str, Any]:
        """As the other sections; ``datasets`` only where set, so that artifact keys made from this section
        before it existed (ToolRerank's first stage) keep their value."""
        out = super().to_dict()
        if not out.get("datasets"):
            out.pop("datasets", None)
        return out

    def for_dataset(self, name: str) -> FinetuneConfig:
        """The settings a training catalog ``name`` is fine-tuned with: ``datasets[name]`` over the rest."""
        return self.replace(**{**self.datasets.get(name, {}), "datasets": {}})


def training_pairs(catalog: Catalog, split: str, docs: str, max_pairs: int, seed: int) -> list[tuple[str, str]]:
    """(query text, gold tool document) pairs of one split, shuffled; capped at ``max_pairs`` if > 0."""
    queries = catalog.split(split)
    if not queries:
        raise CatalogError(f"dataset {catalog.name!r} has no {split!r} split: dense-ft needs training queries "
                           "(only datasets with a train split can be fine-tuned, e.g. toollens)")
    texts = dict(zip(catalog.tool_ids, catalog.docs(docs)))
    pairs = [(q.text, texts[t]) for q in queries for t in sorted(catalog.gold(q.id))]
    random.Random(seed).shuffle(pairs)
    return pairs[:max_pairs] if max_pairs > 0 else pairs


DEV_METRIC = "dev_cosine_recall@5"  # the selection metric logged by the dev-split evaluator


def dev_evaluator(catalog: Catalog, docs: str):
    """sentence-transformers' IR evaluator on the dev split (recall = hits / |gold|, as toolret.metrics)."""
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    dev = catalog.split("dev")
    if not dev:
        return None
    return InformationRetrievalEvaluator(
        queries={q.id: q.text for q in dev}, corpus=dict(zip(catalog.tool_ids, catalog.docs(docs))),
        relevant_docs={q.id: set(catalog.gold(q.id)) for q in dev}, name="dev", batch_size=128,
        accuracy_at_k=[5], precision_recall_at_k=[5], mrr_at_k=[10], ndcg_at_k=[5], map_at_k=[10],
        write_csv=False, main_score_function="cosine")


def artifact_key(catalog: Catalog, config: FinetuneConfig) -> dict:
    """The inputs a dense-ft artifact is made from (:mod:`toolret.artifact_key`): the training settings
    (not the device), the train pairs and the dev split that selects the step, the base encoder."""

    config = config.for_dataset(catalog.name)  # first: the dataset's own settings cut its train pairs
    train = training_pairs(catalog, "train", config.docs, config.max_train_pairs, config.seed)
    dev = sorted((q.text, sorted(catalog.gold(q.id))) for q in catalog.split("dev"))
    settings = {k: v for k, v in config.to_dict().items() if k not in ("device", "model", "datasets")}
    return make_key("dense-ft", settings, {"train": train, "dev": dev}, str(config.model))


def _work_dir(out_dir: Path, config: FinetuneConfig, train: list[tuple[str, str]]) -> Path:
    """Checkpoints of an unfinished run live beside the output, keyed by config and data: a rerun resumes."""
    key = hashlib.sha256(json.dumps([config.to_dict(), train], sort_keys=True).encode()).hexdigest()[:12]
    return out_dir.with_name(f".{out_dir.name}.work-{key}")


def finetune(catalog: Catalog, out_dir: str | Path, config: FinetuneConfig | None = None) -> dict:
    """Train on the catalog's train split, select on the dev split, save the model atomically (a LoRA
    adapter as ``model.save`` writes it; a full fine-tune through :func:`save_compact`, small enough for git).

    With ``eval_steps > 0`` the dev split is scored every ``eval_steps`` steps, each scored step is
    checkpointed (beside ``out_dir``; a killed run resumes from its last checkpoint when rerun with the
    same config), and the step with the best dev recall@5 is the model saved. Returns the training
    report (also written to ``out_dir/finetune.json``). A full fine-tune also exports each checkpoint to
    ``<out_dir>.checkpoint`` (kept in git, :mod:`toolret.retrieval.committed_checkpoint`), from which a
    run in another session or on another machine resumes; the folder goes once the model is saved.
    """
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer import losses
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers
    from transformers import set_seed

    config = config or FinetuneConfig()
    if config.model is None or config.device is None:

        config = config.resolved(DenseConfig())
    config = config.for_dataset(catalog.name)
    out_dir = Path(out_dir)
    train = training_pairs(catalog, "train", config.docs, config.max_train_pairs, config.seed)
    set_seed(config.seed)  # the LoRA matrices are initialised here, before the trainer seeds itself
    model = load_sentence_transformer(config.model, config.device, config.max_seq_length)
    config.add_lora(model)
    dataset = Dataset.from_dict({"anchor": [q for q, _ in train], "positive": [d for _, d in train]})
    evaluator = dev_evaluator(catalog, config.docs) if config.eval_steps > 0 else None
    work = _work_dir(out_dir, config, train)
    selection = {"save_strategy": "no"}
    if evaluator:
        selection = dict(eval_strategy="steps", eval_steps=config.eval_steps, save_strategy="steps",
                         save_steps=config.eval_steps, save_total_limit=2, load_best_model_at_end=True,
                         metric_for_best_model=DEV_METRIC, greater_is_better=True)
    with atomic_directory(out_dir) as tmp:
        args = SentenceTransformerTrainingArguments(
            output_dir=str(work), num_train_epochs=config.epochs,
            per_device_train_batch_size=config.batch_size, learning_rate=config.lr,
            warmup_steps=max(1, int(config.warmup_ratio * config.epochs * len(train) / config.batch_size)),
            batch_sampler=BatchSamplers.NO_DUPLICATES, seed=config.seed,
            logging_steps=50, report_to="none", use_cpu=config.device == "cpu", disable_tqdm=False,
            dataloader_drop_last=False, **selection,
        )
        committed = checkpoint_dir(out_dir)
        callbacks = [exporting_callback(work, committed)] if evaluator and config.method == "full" else []
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, evaluator=evaluator,
                                             loss=losses.MultipleNegativesRankingLoss(model), callbacks=callbacks)
        imported = import_checkpoint(committed, work) if callbacks else None
        resume = last_complete_checkpoint(work) if evaluator else None
        result = trainer.train(resume_from_checkpoint=resume)
        if config.method == "full":
            save_compact(model, tmp / "model")  # float16 shards under the git file limit, loaded as float32
        else:
            model.save(str(tmp / "model"))
        if config.method == "lora":

            name_adapter_base(tmp / "model", config.model)
        history = [{"step": e["step"], "dev_recall@5": e[f"eval_{DEV_METRIC}"]}
                   for e in trainer.state.log_history if f"eval_{DEV_METRIC}" in e]
        report = {"config": config.to_dict(), "n_train_pairs": len(train), "train_loss": result.training_loss,
                  "steps": result.global_step,
                  "dev_history": history, "selected_step": checkpoint_step(trainer.state.best_model_checkpoint),
                  "dev": dev_recall(catalog, model, config.docs)}
        (tmp / "finetune.json").write_text(json.dumps(report, indent=2), encoding="utf-8")

        write_key(tmp, artifact_key(catalog, config))

    # how this run went (not what it produced): outside the DVC output, so a resumed run gives the same md5
    write_json(run_info_path(out_dir / "finetune.json"), {
        "resumed_from": Path(resume).name if resume else None,
        # from the committed checkpoint (another session or machine): the optimizer's moments restarted there
        "resumed_from_committed": bool(imported) and resume == imported,
        "train_runtime_s": result.metrics.get("train_runtime")})
    shutil.rmtree(work, ignore_errors=True)
    discard_checkpoint(checkpoint_dir(out_dir), work)  # the artifact is there: its progress is done
    return report


def dev_recall(catalog: Catalog, model, docs: str, k: int = 5) -> dict | None:
    """Recall@k / COMP@k on the dev split (model selection signal; never the test split)."""

    if not catalog.split("dev"):
        return None
    r = DenseRetriever(encoder=model)
    r.index(catalog.tool_ids, catalog.docs(docs))
    scores, _ = score_ranking(rank_split(r, catalog, "dev", k), catalog, [k], bootstrap_samples=100)
    return {"n_queries": scores["n_queries"], **{m: v for m, v in scores["metrics"].items() if m != "mrr"}}
