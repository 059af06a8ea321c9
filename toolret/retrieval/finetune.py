"""Fine-tune a bi-encoder on (query, gold tool document) pairs with in-batch negatives.

MultipleNegativesRankingLoss (InfoNCE over the batch) through the sentence-transformers trainer, as in
COLT's semantic-learning stage. Batches never hold the same tool twice (``NO_DUPLICATES``), so no gold
tool serves as another query's negative. Selection data comes only from the dev split carved from
train; the test split is never read here.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from toolret.atomic import atomic_directory
from toolret.catalog.model import Catalog, CatalogError


@dataclass(frozen=True)
class FinetuneConfig:
    model: str = "all-MiniLM-L6-v2"
    docs: str = "original"
    epochs: int = 1
    batch_size: int = 32
    lr: float = 2e-4
    warmup_ratio: float = 0.05
    max_seq_length: int = 48
    max_train_pairs: int = 16000  # 0 = all (query, gold tool) pairs
    seed: int = 13
    device: str = "cpu"


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


def finetune(catalog: Catalog, out_dir: str | Path, config: FinetuneConfig | None = None) -> dict:
    """Train on the catalog's train split, report dev-split recall, save the model atomically.

    Returns the training report (also written to ``out_dir/finetune.json``).
    """
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer import losses
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers

    from toolret.retrieval.models import load_sentence_transformer

    config = config or FinetuneConfig()
    train = training_pairs(catalog, "train", config.docs, config.max_train_pairs, config.seed)
    model = load_sentence_transformer(config.model, config.device, config.max_seq_length)
    dataset = Dataset.from_dict({"anchor": [q for q, _ in train], "positive": [d for _, d in train]})
    with atomic_directory(out_dir) as tmp:
        args = SentenceTransformerTrainingArguments(
            output_dir=str(tmp / "checkpoints"), num_train_epochs=config.epochs,
            per_device_train_batch_size=config.batch_size, learning_rate=config.lr,
            warmup_steps=max(1, int(config.warmup_ratio * config.epochs * len(train) / config.batch_size)),
            batch_sampler=BatchSamplers.NO_DUPLICATES, seed=config.seed, save_strategy="no",
            logging_steps=50, report_to="none", use_cpu=config.device == "cpu", disable_tqdm=False,
            dataloader_drop_last=False,
        )
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset,
                                             loss=losses.MultipleNegativesRankingLoss(model))
        result = trainer.train()
        model.save(str(tmp / "model"))
        report = {"config": asdict(config), "n_train_pairs": len(train), "train_loss": result.training_loss,
                  "steps": result.global_step, "dev": dev_recall(catalog, model, config.docs)}
        (tmp / "finetune.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
        shutil.rmtree(tmp / "checkpoints", ignore_errors=True)
    return report


def dev_recall(catalog: Catalog, model, docs: str, k: int = 5) -> dict | None:
    """Recall@k / COMP@k on the dev split (model selection signal; never the test split)."""
    from toolret.evaluation import rank_split, score_ranking
    from toolret.retrieval.dense import DenseRetriever

    if not catalog.split("dev"):
        return None
    r = DenseRetriever(encoder=model)
    r.index(catalog.tool_ids, catalog.docs(docs))
    scores, _ = score_ranking(rank_split(r, catalog, "dev", k), catalog, [k], bootstrap_samples=100)
    return {"n_queries": scores["n_queries"], **{m: v for m, v in scores["metrics"].items() if m != "mrr"}}
