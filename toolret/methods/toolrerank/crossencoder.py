"""The cross-encoder reranker (sentence-transformers ``CrossEncoder`` + ``CrossEncoderTrainer``).

- :func:`mine_training_pairs` -- paper Sec. 4.1: positive pairs from the gold annotations, hard negatives
  sampled from the first stage's top results (never gold), plus uniform random negatives;
- :func:`mine_training_tuples` -- the same hard negatives as ``(query, gold API, hard negative ...)`` rows
  for the in-batch (list-wise) loss, whose random negatives are the other rows' gold APIs;
- :func:`train_cross_encoder` -- a ``CrossEncoder(<base model folder>, num_labels=1)`` (a new scoring
  head: no pretrained cross-encoder ships offline) trained with ``BinaryCrossEntropyLoss`` on labelled
  pairs (``loss="bce"``) or ``MultipleNegativesRankingLoss`` on tuples (``loss="in_batch"``);
  A run whose model ends with one score for every pair (a saturated head: :func:`score_spread`) raises
  :class:`CrossEncoderCollapsed` instead of saving it;
- :class:`CrossEncoderScorer` -- ``score(q, d)`` (sigmoid, in [0, 1]) with an in-process memo and a
  persistent store keyed by the model's content hash and ``max_length`` (the same (query, document) pair
  is scored once across processes: Rerank-m, ToolRerank and every ablation share the scores).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolret.atomic import atomic_directory
from toolret.config import cache_home
from toolret.errors import CrossEncoderCollapsed
from toolret.paths import under_project
from toolret.provenance import sha256_tree
from toolret.retrieval.committed_checkpoint import discard_checkpoint, exporting_callback, import_checkpoint
from toolret.retrieval.embedding_store import EmbeddingStore
from toolret.retrieval.committed_checkpoint import last_complete_checkpoint
from toolret.retrieval.models import (adapter_base, is_adapter, merge_adapters, name_adapter_base, offline,
                                      resolve_encoder)

if TYPE_CHECKING:
    from toolret.retrieval.models import LoraSettings

SEP = "\x1f"  # query / document separator of a score-cache key
CHUNK = 1024  # pairs scored (and persisted) at a time: a killed scoring run keeps what it finished
COLLAPSE_SPREAD = 1e-3  # a trained model whose scores of training pairs all lie within this has collapsed
COLLAPSE_ROWS = 64  # training rows whose (query, candidate) pairs the check scores


def score_spread(model, pairs: Sequence[tuple[str, str]]) -> float:
    """Max minus min of ``model``'s scores (its own activation, as the reranker scores) over ``pairs``."""
    if not pairs:
        return float("inf")
    scores = np.asarray(model.predict(list(pairs), batch_size=32, show_progress_bar=False), dtype=float)
    return float(scores.max() - scores.min())


def hard_negative_pool(ranked: Sequence[int], gold: set[int], depth: int) -> list[int]:
    """The non-gold APIs among the first ``depth`` first-stage results (``-1`` padding dropped), in rank order."""
    return [t for t in list(ranked)[:depth] if t >= 0 and t not in gold]


def mine_training_pairs(queries: Sequence[str], gold: Sequence[set[int]], ranked: Sequence[Sequence[int]],
                        documents: Sequence[str], *, hard_negatives: int, hard_negative_depth: int,
                        random_negatives: int, seed: int) -> list[tuple[str, str, float]]:
    """``(query, document, label)`` pairs: every gold API (label 1), ``hard_negatives`` non-gold APIs
    sampled from the first ``hard_negative_depth`` first-stage results and ``random_negatives`` non-gold,
    non-hard APIs sampled from the whole library (label 0). Seeded; one ``random.Random`` for all."""
    rng = random.Random(seed)
    n_docs = len(documents)
    pairs: list[tuple[str, str, float]] = []
    for q, g, r in zip(queries, gold, ranked):
        pairs.extend((q, documents[t], 1.0) for t in sorted(g))
        pool = hard_negative_pool(r, g, hard_negative_depth)
        hard = rng.sample(pool, min(hard_negatives, len(pool)))
        pairs.extend((q, documents[t], 0.0) for t in hard)
        taken = set(g) | set(hard)
        if random_negatives and n_docs > len(taken):
            picked: list[int] = []
            while len(picked) < min(random_negatives, n_docs - len(taken)):
                t = rng.randrange(n_docs)
                if t not in taken:
                    taken.add(t)
                    picked.append(t)
            pairs.extend((q, documents[t], 0.0) for t in picked)
    rng.shuffle(pairs)
    return pairs


def mine_training_tuples(queries: Sequence[str], gold: Sequence[set[int]], ranked: Sequence[Sequence[int]],
                         documents: Sequence[str], *, hard_negatives: int, hard_negative_depth: int,
                         seed: int) -> list[tuple[str, ...]]:
    """One ``(query, gold API, hard negative_1, ..., hard negative_h)`` row per gold API of every query: the
    ``h = hard_negatives`` negatives are sampled (per row, without replacement) from the non-gold APIs of the
    first ``hard_negative_depth`` first-stage results. A query whose pool is shorter than ``h`` repeats pool
    entries (every row needs the same number of columns); one with an empty pool is skipped. Seeded."""
    rng = random.Random(seed)
    rows: list[tuple[str, ...]] = []
    for q, g, r in zip(queries, gold, ranked):
        pool = hard_negative_pool(r, g, hard_negative_depth)
        if hard_negatives and not pool:
            continue
        for t in sorted(g):
            hard = rng.sample(pool, min(hard_negatives, len(pool)))
            hard += [rng.choice(pool) for _ in range(hard_negatives - len(hard))]
            rows.append((q, documents[t], *(documents[h] for h in hard)))
    rng.shuffle(rows)
    return rows


# the new layers of a cross-encoder made from a bi-encoder: trained in full (and saved) beside a LoRA adapter
NEW_LAYERS = ["classifier", "pooler"]


def load_cross_encoder(folder: str | Path, max_length: int, device: str = "cpu", new_head: bool = False):
    """A ``CrossEncoder`` from a local folder (``new_head``: a base encoder given a fresh 1-logit head). A
    saved LoRA adapter folder loads its base encoder with the adapter and the trained head."""
    from sentence_transformers.cross_encoder import CrossEncoder

    offline()
    if not new_head and is_adapter(folder):
        model = load_cross_encoder(adapter_base(folder), max_length, device, new_head=True)
        model.load_adapter(str(folder))
        merge_adapters(model)
        return model
    path = resolve_encoder(str(folder)) if new_head else Path(folder)
    kwargs: dict[str, Any] = {"num_labels": 1} if new_head else {}
    return CrossEncoder(str(path), max_length=max_length, device=device, **kwargs)


def train_cross_encoder(examples: Sequence[tuple], out_dir: str | Path, *, base_model: str, max_length: int,
                        epochs: int, batch_size: int, lr: float, warmup_ratio: float, seed: int,
                        loss: str = "bce", in_batch_negatives: int = 4, device: str = "cpu",
                        lora: LoraSettings | None = None, checkpoint_dir: str | Path | None = None,
                        save_steps: int = 0, committed: str | Path | None = None, key: str | None = None
                        ) -> dict[str, Any]:
    """Train a fresh-head cross-encoder and save it to ``out_dir`` (atomically); with ``lora.method ==
    "lora"`` a LoRA adapter plus the new head are trained and saved (naming ``base_model``).

    ``loss="bce"``: ``examples`` are ``(query, document, label)`` pairs, ``BinaryCrossEntropyLoss``.
    ``loss="in_batch"``: ``examples`` are ``(query, positive, hard negative ...)`` rows,
    ``MultipleNegativesRankingLoss`` (softmax over the positive, the hard negatives and
    ``in_batch_negatives`` other rows' positives) with no-duplicate batches, so a query's own gold APIs
    (same query text) and an API's own copies (same document text) never serve as its in-batch negatives.

    ``checkpoint_dir`` and ``save_steps > 0``: the trainer's state is checkpointed there every ``save_steps`` steps
    and a call with the same examples and settings resumes from the last complete checkpoint (after a kill -9, or in
    another session when the folder is carried over); the folder is removed once the model is saved.

    ``committed`` (with ``checkpoint_dir``): each checkpoint is also exported there as the trainer wrote it (an
    adapter's: a few MB, for git: :mod:`toolret.retrieval.committed_checkpoint`), and a run whose work folder has
    no later checkpoint resumes from it (on another machine); ``key`` names the training (settings and data) so
    that another's is never resumed. It is removed once the model is saved."""
    import shutil
    import tempfile

    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments, losses
    from transformers import set_seed

    if loss not in ("bce", "in_batch"):
        raise ValueError(f"toolrerank.loss must be 'bce' or 'in_batch', not {loss!r}")
    set_seed(seed)  # the new head and the LoRA matrices are initialised here, before the trainer seeds itself
    model = load_cross_encoder(base_model, max_length, device, new_head=True)
    if lora is not None:
        lora.add_lora(model, modules_to_save=NEW_LAYERS)
    if loss == "bce":
        data = Dataset.from_dict({"query": [p[0] for p in examples], "document": [p[1] for p in examples],
                                  "label": [float(p[2]) for p in examples]})
        objective = losses.BinaryCrossEntropyLoss(model)
        sampler: dict[str, Any] = {}
        n_pos = int(sum(p[2] > 0 for p in examples))
    else:
        from sentence_transformers.base.sampler import BatchSamplers

        width = len(examples[0]) if examples else 2
        columns = ["query", "positive", *(f"negative_{i}" for i in range(1, width - 1))]
        data = Dataset.from_dict({c: [row[i] for row in examples] for i, c in enumerate(columns)})
        objective = losses.MultipleNegativesRankingLoss(model, num_negatives=in_batch_negatives)
        sampler = {"batch_sampler": BatchSamplers.NO_DUPLICATES}
        n_pos = len(examples)
    steps = max(1, epochs * -(-len(examples) // batch_size))
    checkpointed = checkpoint_dir is not None and save_steps > 0
    scratch = Path(checkpoint_dir) if checkpointed else Path(tempfile.mkdtemp(prefix="toolrerank-trainer-"))
    saving = {"save_strategy": "steps", "save_steps": save_steps, "save_total_limit": 1} if checkpointed else \
        {"save_strategy": "no"}
    exported = checkpointed and committed is not None
    callbacks = []
    if exported:

        import_checkpoint(committed, scratch, key=key)
        callbacks = [exporting_callback(scratch, committed, key=key, compact=False, adapter_base=base_model)]
    resume = last_complete_checkpoint(scratch) if checkpointed else None
    try:
        args = CrossEncoderTrainingArguments(
            output_dir=str(scratch), num_train_epochs=epochs, per_device_train_batch_size=batch_size,
            learning_rate=lr, warmup_steps=max(1, int(warmup_ratio * steps)), seed=seed,
            logging_steps=max(1, steps // 10), report_to="none", use_cpu=device == "cpu", disable_tqdm=False,
            dataloader_drop_last=False, **saving, **sampler)
        trainer = CrossEncoderTrainer(model=model, args=args, train_dataset=data, loss=objective,
                                      callbacks=callbacks or None)
        result = trainer.train(resume_from_checkpoint=resume)
    finally:
        if not checkpointed:  # checkpoints stay until the model is saved: a killed run resumes from them
            shutil.rmtree(scratch, ignore_errors=True)
    head = examples[:COLLAPSE_ROWS]  # (query, document) pairs of labelled pairs, of every candidate of a tuple
    spread = score_spread(model, [(p[0], p[1]) for p in head] if loss == "bce"
                          else [(row[0], doc) for row in head for doc in row[1:]])
    if spread < COLLAPSE_SPREAD:
        losses_logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        last = f"{losses_logged[-1]:.4g}" if losses_logged else "n/a"
        raise CrossEncoderCollapsed(
            f"toolrerank: the cross-encoder's training collapsed: its scores of the first {COLLAPSE_ROWS} training "
            f"rows' pairs span {spread:.2g} (< {COLLAPSE_SPREAD}), one score for every (query, API) pair (last "
            f"logged loss {last}; the in-batch loss sits at ln(candidates per row) once the sigmoid saturates). "
            f"Nothing was written to {out_dir}; retrain with a lower toolrerank.lr or another toolrerank.seed")
    with atomic_directory(out_dir) as tmp:
        model.save(str(tmp))
        if is_adapter(tmp):
            name_adapter_base(tmp, base_model)
    if checkpointed:
        shutil.rmtree(scratch, ignore_errors=True)
    if exported:

        discard_checkpoint(committed, scratch, key=key)  # the model is there: its progress is done
    return {"loss": loss, "n_examples": len(examples), "n_positive": n_pos, "steps": result.global_step,
            "train_loss": result.training_loss, "train_runtime_s": result.metrics.get("train_runtime"),
            "resumed_from": Path(resume).name if resume else None}


def model_fingerprint(folder: str | Path, max_length: int, quantize: bool = False) -> str:
    """Identity of a scoring function: the model folder's content hash, the input length, int8 or not."""

    ident = {"weights": sha256_tree(folder), "max_length": max_length, "activation": "sigmoid"}
    if quantize:
        ident["int8"] = True
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


class CrossEncoderScorer:
    """``score(query, document)`` in [0, 1] from a trained cross-encoder folder, memoised and (unless
    ``cache == "off"``) persisted in an :class:`~toolret.retrieval.embedding_store.EmbeddingStore` under
    ``<cache>/<fingerprint>`` (default cache: ``<cache home>/ce_scores``)."""

    def __init__(self, folder: str | Path, max_length: int, batch_size: int = 32, device: str = "cpu",
                 cache: str | None = None, quantize: bool = False) -> None:
        self.folder = Path(folder)
        self.quantize = quantize
        self.max_length, self.batch_size, self.device, self.cache = max_length, batch_size, device, cache
        self._model = None
        self._store = None
        self._memo: dict[str, float] = {}
        self.stats = {"pairs_scored": 0, "pairs_from_cache": 0}

    @property
    def model(self):
        if self._model is None:
            self._model = load_cross_encoder(self.folder, self.max_length, self.device)
            if self.quantize:  # PyTorch dynamic int8 on the Linear layers (CPU; benchmarks/toolrerank_cost.py)
                import torch

                torch.ao.quantization.quantize_dynamic(self._model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        return self._model

    @property
    def store(self):
        if self._store is None and self.cache != "off":

            root = under_project(self.cache) if self.cache else cache_home() / "ce_scores"
            self._store = EmbeddingStore(root, model_fingerprint(self.folder, self.max_length, self.quantize))
        return self._store

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Plain ``CrossEncoder.predict`` (no cache): what Rerank-m costs without the platform."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        return np.asarray(self.model.predict(list(pairs), batch_size=self.batch_size, show_progress_bar=False),
                          dtype=np.float32).reshape(-1)

    def score_pairs(self, pairs: Sequence[tuple[str, str]], progress: bool = False) -> np.ndarray:
        keys = [q + SEP + d for q, d in pairs]
        missing = list(dict.fromkeys(k for k in keys if k not in self._memo))
        if missing and self.store is not None:
            found = self.store.get(missing)
            self._memo.update({k: float(v[0]) for k, v in found.items()})
            self.stats["pairs_from_cache"] += len(found)
            missing = [k for k in missing if k not in found]
        if missing:
            from tqdm import tqdm

            bar = tqdm(total=len(missing), desc="cross-encoder", unit="pair", disable=not progress)
            for start in range(0, len(missing), CHUNK):
                chunk = missing[start:start + CHUNK]
                scores = self.predict([tuple(k.split(SEP, 1)) for k in chunk])
                self._memo.update(zip(chunk, map(float, scores)))
                if self.store is not None:
                    self.store.add(chunk, scores.reshape(-1, 1))
                self.stats["pairs_scored"] += len(chunk)
                bar.update(len(chunk))
            bar.close()
        return np.array([self._memo[k] for k in keys], dtype=np.float64)


__all__ = ["CrossEncoderScorer", "hard_negative_pool", "load_cross_encoder", "mine_training_pairs",
           "mine_training_tuples", "model_fingerprint", "train_cross_encoder"]
