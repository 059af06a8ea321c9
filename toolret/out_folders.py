"""What each toolret command that writes a folder at ``--out`` leaves there, and which command a folder's
content came from (:func:`output_made_by`, the test :func:`toolret.atomic.claim_output_dir` applies).

A module of names and file tests only: the catalog commands call it before any work, so it imports nothing of
the retrieval or evaluation code (a stage's code deps follow what its command calls: see toolret/stages.py).
"""

from __future__ import annotations

import json
from pathlib import Path

PIPELINE_FILE = "pipeline.json"  # a saved pipeline's description (toolret.pipeline); an index folder holds one per docs

# what each command that writes a folder at --out leaves there (the messages of claim_output_dir)
OUTPUT_NOUNS = {**dict.fromkeys(("catalog build", "catalog clean", "catalog synthesize", "catalog select",
                                 "import-openapi", "import-mcp"), "a catalog"),
                "index": "an index", "evaluate-index": "evaluation results", "evaluate-grid": "a grid's results",
                "adapt": "an adapt run"}
_CATALOG_FILES = {"catalog.json", "corpus.jsonl", "queries.jsonl", "qrels"}
_RESULT_SUFFIXES = (".json", ".per_query.jsonl", ".run.trec", ".run.trec.gz")
_ADAPT_ENTRIES = {"adapt_report.json", "champion", "generations", "work"}


def _catalog_made_by(meta_file: Path) -> str | None:
    """The command that wrote a curated catalog, from its ``catalog.json`` provenance."""
    try:
        provenance = json.loads(meta_file.read_text(encoding="utf-8"))["provenance"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(provenance, dict):
        return None
    for key, command in (("selection", "catalog select"), ("synthetic", "catalog synthesize"),
                         ("cleanup", "catalog clean")):
        if key in provenance:
            return command
    return {"openapi": "import-openapi", "mcp": "import-mcp"}.get(provenance.get("source"), "catalog build")


def output_made_by(out: str | Path) -> str | None:
    """The toolret command whose output the folder ``out`` holds, recognised by the files that command
    writes (a catalog's ``catalog.json``, an index's ``<docs>/pipeline.json``, a grid's ``summary.json``,
    result JSONs, an adapt run's ``adapt_report.json`` / ``champion``), or ``None``. No marker file is
    written: one inside a DVC output would change the hash ``dvc.lock`` records for it."""
    out = Path(out)
    entries = list(out.iterdir())
    names = {p.name for p in entries}
    if not entries:
        return None
    if "catalog.json" in names and names <= _CATALOG_FILES:
        return _catalog_made_by(out / "catalog.json")
    if all(p.is_dir() and (p / PIPELINE_FILE).is_file() for p in entries):
        return "index"
    if names <= _ADAPT_ENTRIES:
        return "adapt"
    if all(p.is_file() and p.name.endswith(_RESULT_SUFFIXES) for p in entries) and any(
            p.suffix == ".json" for p in entries):
        return "evaluate-grid" if "summary.json" in names else "evaluate-index"
    return None


__all__ = ["OUTPUT_NOUNS", "PIPELINE_FILE", "output_made_by"]
