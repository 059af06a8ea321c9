"""Locate the raw datasets and verify them against their MANIFEST.tsv (sha256) before reading."""

from __future__ import annotations

import os
from pathlib import Path

from toolret.errors import CatalogError
from toolret.provenance import sha256_file

DEFAULT_SOURCE_ROOT = "../shared/datasets"


def source_root(root: str | Path | None = None, project_dir: str | Path | None = None) -> Path:
    """Resolve the dataset root: explicit arg > ``TOOLRET_DATA_SOURCE`` > ``../shared/datasets``.

    Relative paths are resolved against ``project_dir`` (the repository root by default).
    """
    root = root or os.environ.get("TOOLRET_DATA_SOURCE") or DEFAULT_SOURCE_ROOT
    path = Path(root)
    if not path.is_absolute():
        base = Path(project_dir) if project_dir else Path(__file__).resolve().parents[2]
        path = (base / path).resolve()
    return path


def read_manifest(folder: Path) -> dict[str, str]:
    """Map each file (relative to ``folder``) listed in ``folder/MANIFEST.tsv`` to its sha256.

    Manifest paths are the upstream repository's paths; leading components that are not present
    locally (e.g. ``datasets/ToolLens/``) are stripped until the path exists under ``folder``.
    """
    manifest = folder / "MANIFEST.tsv"
    if not manifest.is_file():
        raise CatalogError(f"{manifest}: missing; cannot verify the dataset files")
    out: dict[str, str] = {}
    lines = manifest.read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines[1:], start=2):
        parts = line.split("\t")
        if len(parts) != 4:
            raise CatalogError(f"{manifest}:{lineno}: expected 4 columns")
        rel = Path(parts[0])
        for i in range(len(rel.parts)):
            cand = Path(*rel.parts[i:])
            if (folder / cand).exists():
                out[cand.as_posix()] = parts[3]
                break
        else:
            out[rel.as_posix()] = parts[3]
    return out


def verify_files(folder: Path, files: list[str]) -> dict[str, str]:
    """Check each file's sha256 against the folder's manifest; return ``{file: sha256}``."""
    manifest = read_manifest(folder)
    checksums = {}
    for rel in files:
        path = folder / rel
        if not path.is_file():
            raise CatalogError(f"{path}: missing from the dataset source")
        if rel not in manifest:
            raise CatalogError(f"{path}: not listed in {folder / 'MANIFEST.tsv'}")
        digest = sha256_file(path)
        if digest != manifest[rel]:
            raise CatalogError(f"{path}: sha256 {digest[:12]}… does not match MANIFEST.tsv ({manifest[rel][:12]}…); "
                               "the file was modified or is corrupted")
        checksums[f"{folder.name}/{rel}"] = digest
    return checksums
