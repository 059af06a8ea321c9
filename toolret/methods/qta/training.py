"""DPO + LoRA training of the QTA rewriter (trl ``DPOTrainer`` with a peft ``LoraConfig``).

``train_adapter(pairs, cfg, m, out, ...)`` trains one adapter on trl conversational preference rows and
saves it atomically to ``out`` (``adapter_config.json`` + ``adapter_model.safetensors``, a few MB, and
``qta.json``: the training key, data digest, step history). Checkpoints go to a work folder beside
``out`` (``.<name>.work-<key>``, outside the DVC output), every ``save_steps`` steps; a rerun with the
same data and settings resumes from the last complete checkpoint after a kill -9. Given ``committed`` (a folder
git keeps, outside every DVC output: ``data/qta/<catalog>/checkpoints/...``), each checkpoint is also exported
there as the trainer wrote it (adapter + optimizer moments: a few MB; :mod:`toolret.retrieval.committed_checkpoint`):
a training longer than a session (the 1.5B rewriter on 2 cores) resumes from it in another session or on another
machine, and the folder goes once the adapter is saved. Loss, reward margins
and accuracies of every step go to the installed training loggers (``cfg.mlflow``; :mod:`toolret.training_log`:
MLflow when run from the CLI), one run per adapter that a resumed training continues.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolret.atomic import atomic_directory, write_json
from toolret.evaluation import run_info_path
from toolret.llm.base import default_threads
from toolret.llm.models import set_offline_env
from toolret.methods.qta.config import QTAConfig
from toolret.methods.qta.generation import INIT_ADAPTER, adapter_sha, merge_lora
from toolret.retrieval.committed_checkpoint import discard_checkpoint, exporting_callback, import_checkpoint
from toolret.retrieval.committed_checkpoint import last_complete_checkpoint as last
from toolret.retrieval.models import name_adapter_base, store_adapter_half
from toolret.training_log import training_loggers

EXPERIMENT = "toolret-qta-training"
LOGGED = ("loss", "rewards/margins", "rewards/accuracies", "rewards/chosen", "rewards/rejected", "logps/chosen",
          "logps/rejected", "learning_rate", "grad_norm")


def data_digest(pairs: Sequence[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(list(pairs), sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def training_key(cfg: QTAConfig, m: int, init_adapter: str | Path | None = None) -> dict[str, Any]:
    """What an adapter depends on beyond its pairs: ``cfg.training_key(m)``, and the weights of the adapter it is
    trained on top of (``init``: their sha256, never their path)."""
    return {**cfg.training_key(m), **({"init": adapter_sha(init_adapter)} if init_adapter else {})}


def work_dir(out: Path, cfg: QTAConfig, m: int, pairs: Sequence[dict[str, Any]],
             init_adapter: str | Path | None = None) -> Path:
    made_of = json.dumps([training_key(cfg, m, init_adapter), data_digest(pairs)], sort_keys=True)
    key = hashlib.sha256(made_of.encode()).hexdigest()[:12]
    return out.parent.parent / f".{out.parent.name}-{out.name}.work-{key}"


def last_complete_checkpoint(work: Path) -> str | None:
    return last(work)


def _lora_targets(targets: str | list[str]):
    return targets if isinstance(targets, str) else list(targets)


def train_adapter(pairs: Sequence[dict[str, Any]], cfg: QTAConfig, m: int, out: str | Path, *,
                  model_folder: str | Path, run_name: str = "qta", extra: dict[str, Any] | None = None,
                  progress: bool = True, init_adapter: str | Path | None = None,
                  committed: str | Path | None = None) -> dict[str, Any]:
    """Train a LoRA adapter with DPO on ``pairs`` (trl conversational rows) and save it to ``out``.

    ``init_adapter``: a saved adapter merged into the LLM before training: the policy starts from it and DPO's
    reference is it (trl's reference under peft is the model with the new adapter disabled); ``out`` keeps a copy
    in ``init/``, which inference merges first (``generation.adapter_chain``).

    ``committed``: where the checkpoints are exported for another session (see above); ``None``: not exported.

    Returns the training report (also ``out/qta.json``). Raises ``ValueError`` when there are no pairs.
    """
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    if not pairs:
        raise ValueError("qta: no preference pairs to train on (every round tied?)")
    set_offline_env()
    out = Path(out)
    torch.set_num_threads(default_threads(cfg.llm_num_threads))
    work = work_dir(out, cfg, m, pairs, init_adapter)
    key = training_key(cfg, m, init_adapter)
    total_steps = math.ceil(math.ceil(len(pairs) / cfg.batch_size) / cfg.grad_accum * cfg.epochs)
    tok = AutoTokenizer.from_pretrained(str(model_folder))
    model = AutoModelForCausalLM.from_pretrained(str(model_folder), dtype=torch.float32)
    if init_adapter:
        model = merge_lora(model, init_adapter)
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=_lora_targets(cfg.lora_targets), task_type="CAUSAL_LM")
    args = DPOConfig(
        output_dir=str(work), per_device_train_batch_size=cfg.batch_size, gradient_accumulation_steps=cfg.grad_accum,
        num_train_epochs=cfg.epochs, learning_rate=cfg.lr, warmup_steps=int(cfg.warmup_ratio * total_steps),
        beta=cfg.beta,
        max_length=cfg.max_length, precompute_ref_log_probs=True, use_cpu=cfg.llm_device == "cpu", bf16=cfg.bf16,
        gradient_checkpointing=False, logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
        save_total_limit=2, report_to="none", seed=cfg.seed, data_seed=cfg.seed, disable_tqdm=not progress,
        dataloader_num_workers=0,
    )
    loggers = training_loggers(EXPERIMENT, run_name, {**key, "n_pairs": len(pairs), **(extra or {})},
                               work) if cfg.mlflow else []
    trainer = DPOTrainer(model, args=args, train_dataset=Dataset.from_list(list(pairs)), processing_class=tok,
                         peft_config=lora, callbacks=[logger.callback() for logger in loggers] or None)
    imported = None
    if committed is not None:
        imported = import_checkpoint(committed, work, base_folder=model_folder)
        trainer.add_callback(exporting_callback(work, committed, compact=False, adapter_base=cfg.llm_model))
    resume = last_complete_checkpoint(work)
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - t0
    history = [{k: e[k] for k in ("step", *LOGGED) if k in e} for e in trainer.state.log_history if "loss" in e]
    report = {"training": key, "n_pairs": len(pairs), "pairs_digest": data_digest(pairs),
              "steps": result.global_step, "train_loss": result.training_loss, "history": history, **(extra or {})}
    with atomic_directory(out) as tmp:
        trainer.model.save_pretrained(str(tmp))
        store_adapter_half(tmp)  # r=16 on every linear layer of a 135M LLM: ~19 MB at float32, ~10 MB here
        name_adapter_base(tmp, cfg.llm_model)  # the LLM's name, not this machine's model folder
        (tmp / "README.md").unlink(missing_ok=True)  # peft's model card: only the absolute base path
        if init_adapter:
            shutil.copytree(init_adapter, tmp / INIT_ADAPTER, ignore=shutil.ignore_patterns("*.run_info.json"))
        (tmp / "qta.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    # how this run went (not what it produced): outside the artifact, so a resumed run gives the same adapter files
    write_json(run_info_path(out / "qta.json"), {"resumed_from": Path(resume).name if resume else None,
                                                 "resumed_from_committed": bool(imported) and resume == imported,
                                                 "train_seconds": round(seconds, 1),
                                                 "seconds_per_step": round(seconds / max(1, result.global_step), 2)})
    for logger in loggers:
        logger.finish(out)
    if committed is not None:
        discard_checkpoint(committed, work)
    shutil.rmtree(work, ignore_errors=True)
    return report


__all__ = ["EXPERIMENT", "data_digest", "train_adapter", "training_key", "work_dir"]
