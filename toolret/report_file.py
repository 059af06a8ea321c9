"""Generated Markdown reports that keep a hand-written tail, with their numbers in a JSON record.

A report (``docs/<method>_results.md``) is regenerated from run outputs: its tables go to the Markdown page,
every number behind them to a plain JSON record (:func:`record_path`: ``results/reports/<stem>.json`` for
a page under ``docs/``), which the page links. Text a person wrote after :data:`NOTES_MARKER` survives
every regeneration.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from toolret.atomic import write_text

NOTES_MARKER = "<!-- hand-written analysis below: kept when the report is regenerated -->"
RECORDS_HEADING = "## All numbers"


def record_path(out: str | Path) -> Path:
    """Where the numbers of the report ``out`` go: ``results/reports/<stem>.json`` beside the ``docs/``
    folder holding ``out``; ``<out>.json`` beside a report written anywhere else."""
    out = Path(out)
    if out.parent.name == "docs":
        return out.parent.parent / "results" / "reports" / f"{out.stem}.json"
    return out.with_suffix(".json")


def write_report_file(out: str | Path, body: str, data: Any, notes: str | Path | None = None) -> Path:
    """Atomically write ``data`` to :func:`record_path` (indented JSON), then ``body``, a link to that
    record, the marker and the hand-written text: what followed the marker in the existing ``out``, plus
    the contents of the file ``notes`` if given. Returns ``out``."""
    out = Path(out)
    record = record_path(out)
    write_text(record, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    link = Path(os.path.relpath(record, out.parent)).as_posix()
    body += f"\n{RECORDS_HEADING}\n\nEvery number behind these tables: [`{record.name}`]({link}).\n"
    kept = ""
    if out.is_file() and NOTES_MARKER in out.read_text(encoding="utf-8"):
        kept = out.read_text(encoding="utf-8").split(NOTES_MARKER, 1)[1]
    if notes:
        kept += "\n" + Path(notes).read_text(encoding="utf-8")
    write_text(out, body + "\n" + NOTES_MARKER + (kept if kept.startswith("\n") else "\n" + kept))
    return out
