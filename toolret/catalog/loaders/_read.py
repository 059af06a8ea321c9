"""Strict readers shared by the loaders: every error names the file and the record (line / index)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolret.errors import CatalogError

MAX_TEXT_CHARS = 100_000  # a tool document or query longer than this is rejected as corrupted input


def read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as e:
        raise CatalogError(f"{path}: file not found") from e
    except IsADirectoryError as e:
        raise CatalogError(f"{path}: is a directory, not a file") from e
    except OSError as e:  # permissions, a FIFO gone, an I/O error: named, never a traceback
        raise CatalogError(f"{path}: cannot be read ({e.strerror or e})") from e
    try:
        return raw.decode("utf-8-sig")  # a leading BOM is tolerated
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise CatalogError(f"{path}:{line}: not valid UTF-8 (byte {e.start}: {raw[e.start:e.start+1]!r})") from e


def read_json(path: Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CatalogError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from e
    except RecursionError:
        raise CatalogError(f"{path}: JSON nested too deep") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)``; blank lines are skipped, anything else must be a JSON object.

    Records are split on ``\n`` only (JSON Lines): ``str.splitlines`` would also split inside a string
    holding U+2028 / U+0085 ..., which ``json.dumps(..., ensure_ascii=False)`` writes unescaped.
    """
    for lineno, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise CatalogError(f"{path}:{lineno}: invalid JSON ({e.msg})") from e
        except RecursionError:
            raise CatalogError(f"{path}:{lineno}: JSON nested too deep") from None
        if not isinstance(obj, dict):
            raise CatalogError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def iter_records(path: Path, kind: str) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
    """``(line, id, where, record)`` per JSONL record keyed by ``_id``; ``where`` names the file, line and id
    for error messages; a repeated id is a :class:`CatalogError` naming its first line. ``kind``: "tool",
    "query" ... (for the messages)."""
    first_line: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        rid = require_text(obj, "_id", f"{path}:{lineno}")
        where = f"{path}:{lineno} ({kind} _id={rid!r})"
        if rid in first_line:
            raise CatalogError(f"{where}: duplicate {kind} id (first on line {first_line[rid]})")
        first_line[rid] = lineno
        yield lineno, rid, where, obj


def require_text(obj: dict[str, Any], key: str, where: str, *, allow_empty: bool = False) -> str:
    """Return ``obj[key]`` as a checked string; errors say ``where`` (``file:line id=...``)."""
    if key not in obj or obj[key] is None:
        raise CatalogError(f"{where}: missing field {key!r}")
    value = obj[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "_id":
        value = str(value)
    if not isinstance(value, str):
        raise CatalogError(f"{where}: field {key!r} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise CatalogError(f"{where}: field {key!r} is empty")
    if key == "_id" and value != value.strip():
        raise CatalogError(f"{where}: id {value!r} has leading/trailing whitespace")
    if len(value) > MAX_TEXT_CHARS:
        raise CatalogError(f"{where}: field {key!r} is {len(value):,} characters (limit {MAX_TEXT_CHARS:,})")
    if "\ufffd" in value:
        raise CatalogError(f"{where}: field {key!r} contains U+FFFD (corrupted encoding)")
    return value


def read_qrels(path: Path) -> list[tuple[str, str, int, int]]:
    """Read a BEIR qrels TSV; return ``(query id, tool id, score, line)`` rows (header optional)."""
    rows = []
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.rstrip("\n").split("\t")
        if lineno == 1 and parts[0].strip().lower() in {"query-id", "query_id", "qid"}:
            continue
        if len(parts) != 3:
            raise CatalogError(f"{path}:{lineno}: expected 3 tab-separated fields, got {len(parts)}")
        raw_score = parts[2].strip()
        if not raw_score.isdigit():
            raise CatalogError(f"{path}:{lineno}: score {raw_score!r} is not a non-negative whole number")
        score = int(raw_score)
        rows.append((parts[0].strip(), parts[1].strip(), score, lineno))
    return rows
