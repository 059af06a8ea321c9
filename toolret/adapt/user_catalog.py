"""The catalog ``adapt`` learns from: its tools only (never its queries), checked, and fingerprinted.

A catalog's fingerprint is a function of its tools' ids and documents only; each tool's own fingerprint
(``tool_fingerprints``) lets a re-adapt tell added, removed and changed tools from unchanged ones.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

from toolret.catalog.io import load_catalog
from toolret.catalog.model import Catalog, Tool
from toolret.errors import AdaptInputError, CatalogError


def tool_fingerprint(tool: Tool) -> str:
    """sha256 of what generation and indexing read of a tool: its id and original document."""
    return hashlib.sha256(json.dumps([tool.id, tool.text], ensure_ascii=False).encode("utf-8")).hexdigest()


def tool_fingerprints(catalog: Catalog) -> dict[str, str]:
    return {t.id: tool_fingerprint(t) for t in catalog.tools}


def catalog_fingerprint(catalog: Catalog) -> str:
    """One sha256 over every tool's fingerprint (order-independent)."""
    joined = "\n".join(f"{i}\t{h}" for i, h in sorted(tool_fingerprints(catalog).items()))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


def check_tools(catalog: Catalog, where: str) -> None:
    """Refuse an empty catalog, duplicate tool ids and tools with an empty document (every offender listed).

    Raises:
        AdaptInputError: naming ``where`` and the offending ids.
    """
    if not catalog.tools:
        raise AdaptInputError(f"{where}: the catalog has no tools")
    dupes = sorted(i for i, n in Counter(t.id for t in catalog.tools).items() if n > 1)
    if dupes:
        raise AdaptInputError(f"{where}: duplicate tool ids: {', '.join(map(repr, dupes[:20]))}"
                              + (f" (+{len(dupes) - 20} more)" if len(dupes) > 20 else ""))
    empty = [t.id for t in catalog.tools if not (t.docs.get("original") or "").strip()]
    if empty:
        raise AdaptInputError(f"{where}: {len(empty)} tool(s) with an empty document: "
                              f"{', '.join(map(repr, empty[:20]))}" + (" ..." if len(empty) > 20 else ""))


def load_tools(path: str | Path) -> Catalog:
    """The tools of the catalog folder at ``path`` (a curated catalog or any BEIR folder), its queries
    and judgements dropped: ``adapt`` learns from tool documents alone."""

    path = Path(path)
    if not path.is_dir():
        raise AdaptInputError(f"{path}: not a catalog folder")
    corpus = path / "corpus.jsonl"
    if not corpus.is_file():
        raise AdaptInputError(f"{corpus}: missing (a catalog folder holds corpus.jsonl)")
    if not corpus.read_text(encoding="utf-8").strip():
        raise AdaptInputError(f"{corpus}: the catalog has no tools")
    _check_raw_ids(corpus)
    catalog = load_catalog(path)
    check_tools(catalog, str(corpus))
    tools = [Tool(t.id, t.name, {"original": t.text}, t.tool, t.category, dict(t.metadata)) for t in catalog.tools]
    return Catalog(catalog.name, tools, [], {}, {"source": path.name, "purpose": "serving"})


def _check_raw_ids(corpus: Path) -> None:
    """Duplicate ``_id`` lines and empty documents of a corpus file, every offender named, before a loader
    stops at the first one (or silently keeps one of two)."""
    seen: Counter = Counter()
    empty: list[str] = []
    for line in corpus.read_text(encoding="utf-8").split("\n"):  # JSON Lines: "\n" only (not U+2028 ...)
        if line.strip():
            try:
                rec = json.loads(line)
                seen[str(rec.get("_id"))] += 1
                if not str(rec.get("text") or "").strip():
                    empty.append(str(rec.get("_id")))
            except (ValueError, AttributeError):
                continue  # the loader names malformed lines
    dupes = sorted(i for i, n in seen.items() if n > 1)
    if dupes:
        raise AdaptInputError(f"{corpus}: duplicate tool ids: {', '.join(map(repr, dupes[:20]))}")
    if empty:
        raise AdaptInputError(f"{corpus}: {len(empty)} tool(s) with an empty document: "
                              f"{', '.join(map(repr, empty[:20]))}" + (" ..." if len(empty) > 20 else ""))


__all__ = ["AdaptInputError", "catalog_fingerprint", "check_tools", "load_tools", "tool_fingerprint",
           "tool_fingerprints"]
