"""Generated Markdown reports that keep a hand-written tail.

A report (``docs/<method>_results.md``) is regenerated from run outputs; text a person wrote after
:data:`NOTES_MARKER` survives every regeneration.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolret.atomic import write_text

NOTES_MARKER = "<!-- hand-written analysis below: kept when the report is regenerated -->"


def write_report_file(out: str | Path, body: str, data: Any, notes: str | Path | None = None) -> Path:
    """Atomically write ``body``, ``data`` as a JSON block, then the marker and the hand-written text: what
    followed the marker in the existing ``out``, plus the contents of the file ``notes`` if given."""
    out = Path(out)
    body += "\n## All numbers (JSON)\n\n```json\n" + json.dumps(data, indent=1, default=str) + "\n```\n"
    kept = ""
    if out.is_file() and NOTES_MARKER in out.read_text(encoding="utf-8"):
        kept = out.read_text(encoding="utf-8").split(NOTES_MARKER, 1)[1]
    if notes:
        kept += "\n" + Path(notes).read_text(encoding="utf-8")
    write_text(out, body + "\n" + NOTES_MARKER + (kept if kept.startswith("\n") else "\n" + kept))
    return out
