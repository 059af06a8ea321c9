"""Training checkpoints that travel through git: a training longer than a session resumes on any machine.

The trainer's own checkpoint (``checkpoint-<step>/`` in the work folder beside the artifact) holds the model
in float32, the optimizer's moments (twice the model again), the scheduler, the RNG states and the trainer's
state: ~4x the model, and gone with the work tree. Its committed form, ``<artifact>.checkpoint/`` beside the
artifact (tracked by git, every file under the git file limit), keeps:

- the weights as float16 shards (:func:`toolret.retrieval.models.save_compact`), loaded back as float32;
- the scheduler, RNG states and trainer state (step, dev history, best step) as the trainer wrote them;
- the optimizer's parameter groups but not its moments: the learning-rate schedule continues where it was,
  and Adam estimates its moments afresh from the first step after the resume (the one way a resumed run
  differs from an uninterrupted one; its run info says so).

A checkpoint is imported only into a work folder of the same training (its name ends in a hash of the
training's settings and data), and only when that folder has no later checkpoint of its own. The best checkpoint is
exported beside the latest when they differ, so the model selected at the end can still be loaded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from toolret.atomic import atomic_directory, write_json
from toolret.retrieval.models import name_adapter_base, resolve_encoder, save_compact

MANIFEST = "progress.json"
FORMAT = 1
_STATE_FILES = ("trainer_state.json", "scheduler.pt", "rng_state.pth")


def checkpoint_dir(out_dir: str | Path) -> Path:
    """Where the committed checkpoint of the artifact ``out_dir`` lives: ``<out_dir>.checkpoint``."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f"{out_dir.name}.checkpoint")


def _key(work_name: str) -> str:
    """The training's key in its work folder's name (``.<artifact>.work-<key>``): the hash of its settings
    and data, whichever artifact folder the run wrote to."""
    return work_name.rsplit(".work-", 1)[-1]


def _manifest(src: Path) -> dict | None:
    """The committed checkpoint's manifest, or None where ``src`` holds none."""
    manifest_file = src / MANIFEST
    return json.loads(manifest_file.read_text(encoding="utf-8")) if manifest_file.is_file() else None


def _same_training(manifest: dict, work: Path, key: str | None) -> bool:
    return (manifest.get("key") or _key(manifest.get("work", ""))) == (key or _key(work.name))


def export_checkpoint(work: str | Path, dest: str | Path, key: str | None = None, compact: bool = True,
                      adapter_base: str | None = None) -> dict | None:
    """Write the work folder's latest complete checkpoint (and its best, if another) to ``dest`` atomically.

    ``key``: the training's key where the work folder's name does not end in it (default: from the name).
    ``compact=False``: the checkpoint as the trainer wrote it, optimizer moments included (an adapter's: a few
    MB; the resumed run is the uninterrupted one); ``adapter_base``: the base encoder its adapter names
    portably (peft records the absolute path it was loaded from).

    Returns the manifest written, or None when the work folder has no complete checkpoint yet or ``dest`` holds
    another training's.
    """
    import torch
    from sentence_transformers import SentenceTransformer

    work, dest = Path(work), Path(dest)
    latest = last_complete_checkpoint(work)
    if latest is None:
        return None
    held = _manifest(dest)
    if held is not None and not _same_training(held, work, key):
        return None  # another training's progress (other settings or data) is not overwritten
    latest = Path(latest)
    state = json.loads((latest / "trainer_state.json").read_text(encoding="utf-8"))
    names = [latest.name]
    best = state.get("best_model_checkpoint")
    if best and Path(best).name != latest.name and (work / Path(best).name / "trainer_state.json").is_file():
        names.append(Path(best).name)
    with atomic_directory(dest) as tmp:
        for name in names:
            src, out = work / name, tmp / name
            if not compact:
                shutil.copytree(src, out)
                if adapter_base and (out / "adapter_config.json").is_file():

                    name_adapter_base(out, adapter_base)
                continue
            save_compact(SentenceTransformer(str(src), device="cpu"), out)
            for f in _STATE_FILES:
                if (src / f).is_file():
                    shutil.copy2(src / f, out / f)
            optimizer = torch.load(src / "optimizer.pt", map_location="cpu", weights_only=True)
            torch.save({"state": {}, "param_groups": optimizer["param_groups"]}, out / "optimizer.pt")
        manifest = {"format": FORMAT, "work": work.name, "key": key or _key(work.name), "latest": latest.name,
                    "step": checkpoint_step(latest), "checkpoints": names,
                    "optimizer_moments": "dropped" if compact else "kept"}
        write_json(tmp / MANIFEST, manifest)
    return manifest


def import_checkpoint(src: str | Path, work: str | Path, key: str | None = None,
                      base_folder: str | Path | None = None) -> str | None:
    """Put the committed checkpoint ``src`` into the work folder ``work`` when it belongs there (``key``: as in
    :func:`export_checkpoint`) and is newer than the work folder's own; returns the checkpoint path to resume
    from, or None (nothing imported). An adapter's base is pointed at ``base_folder`` (default: the packaged
    encoder its portable name resolves to)."""
    src, work = Path(src), Path(work)
    manifest = _manifest(src)
    if manifest is None or manifest.get("format") != FORMAT or not _same_training(manifest, work, key):
        return None  # none, or another training's (other settings or data): not resumable here
    local = last_complete_checkpoint(work)
    if local is not None and checkpoint_step(local) >= manifest["step"]:
        return None
    work.mkdir(parents=True, exist_ok=True)
    for name in manifest["checkpoints"]:
        if (work / name).exists():
            shutil.rmtree(work / name)
        tmp = work / f".{name}.importing"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src / name, tmp)
        state_file = tmp / "trainer_state.json"  # the trainer wrote its own paths: point them at this work folder
        state = json.loads(state_file.read_text(encoding="utf-8"))
        if state.get("best_model_checkpoint"):
            state["best_model_checkpoint"] = str(work / Path(state["best_model_checkpoint"]).name)
        state_file.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        _localize_adapter_base(tmp, base_folder)
        tmp.rename(work / name)
    return str(work / manifest["latest"])


def _localize_adapter_base(checkpoint: Path, base_folder: str | Path | None = None) -> None:
    """An exported adapter names its base portably (``adapter_base``); the trainer resuming from it loads that
    base by the name it finds, so point it at this machine's folder of that model (``base_folder``, default the
    packaged encoder of that name)."""
    config = checkpoint / "adapter_config.json"
    if not config.is_file():
        return

    cfg = json.loads(config.read_text(encoding="utf-8"))
    base = cfg.get("base_model_name_or_path")
    if base and not Path(base).is_dir():
        cfg["base_model_name_or_path"] = str(base_folder or resolve_encoder(base))
        config.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def discard_checkpoint(src: str | Path, work: str | Path, key: str | None = None) -> bool:
    """Remove the committed checkpoint ``src`` if it is of the training of ``work`` (which has finished); one of
    another training (other settings, e.g. a LoRA run beside a full fine-tune in progress) stays."""
    src, work = Path(src), Path(work)
    manifest = _manifest(src)
    if manifest is None or not _same_training(manifest, work, key):
        return False
    shutil.rmtree(src)
    return True


def exporting_callback(work: str | Path, dest: str | Path, key: str | None = None, compact: bool = True,
                       adapter_base: str | None = None):
    """A trainer callback exporting each checkpoint to ``dest`` as soon as the trainer has saved it."""
    from transformers import TrainerCallback

    class _Export(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            export_checkpoint(work, dest, key=key, compact=compact, adapter_base=adapter_base)
            return control

    return _Export()


def last_complete_checkpoint(work: Path) -> str | None:
    """The newest checkpoint the trainer finished writing (its state file is written last), or None."""
    done = [c for c in work.glob("checkpoint-*") if (c / "trainer_state.json").is_file()] if work.is_dir() else []
    return str(max(done, key=checkpoint_step)) if done else None


def checkpoint_step(checkpoint: str | Path | None) -> int | None:
    """The training step of a ``checkpoint-<step>`` folder."""
    return int(str(checkpoint).rsplit("-", 1)[1]) if checkpoint else None
