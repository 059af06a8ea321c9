"""Read and write curated catalogs.

On disk a curated catalog is a BEIR-layout directory (so any BEIR tool can read it) with extras:

    corpus.jsonl    {"_id", "title": API name, "text": original doc,
                     "metadata": {"toolret": 1, "tool", "category", "docs": {variant: text}, ...}}
    queries.jsonl   {"_id", "text", "metadata": {"split": "train"|"dev"|"test"}}
    qrels/<split>.tsv   "query-id<TAB>corpus-id<TAB>score" with a header line
    catalog.json    {"name", "provenance", "stats"}

Writing is atomic (a temporary directory renamed over the target).
"""

from __future__ import annotations

import json
from pathlib import Path

from toolret.atomic import atomic_directory
from toolret.catalog.loaders.beir import load_beir
from toolret.catalog.model import SPLITS, Catalog, Query, Tool


def save_catalog(catalog: Catalog, directory: str | Path) -> Path:
    """Write ``catalog`` to ``directory`` atomically and return the directory."""
    directory = Path(directory)
    with atomic_directory(directory) as tmp:
        with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as f:
            for t in catalog.tools:
                extra = {k: v for k, v in t.docs.items() if k != "original"}
                meta = {"toolret": 1, "tool": t.tool, "category": t.category, "docs": extra, **t.metadata}
                f.write(json.dumps({"_id": t.id, "title": t.name, "text": t.text, "metadata": meta},
                                   ensure_ascii=False) + "\n")
        with open(tmp / "queries.jsonl", "w", encoding="utf-8") as f:
            for q in catalog.queries:
                f.write(json.dumps({"_id": q.id, "text": q.text, "metadata": {"split": q.split}},
                                   ensure_ascii=False) + "\n")
        (tmp / "qrels").mkdir()
        split_of = {q.id: q.split for q in catalog.queries}
        for split in SPLITS:
            rows = [(qid, tid, rel) for qid, rels in catalog.qrels.items() if split_of.get(qid) == split
                    for tid, rel in rels.items()]
            if rows:
                with open(tmp / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as f:
                    f.write("query-id\tcorpus-id\tscore\n")
                    f.writelines(f"{q}\t{t}\t{r}\n" for q, t, r in rows)
        meta = {"name": catalog.name, "provenance": catalog.provenance, "stats": catalog.stats()}
        (tmp / "catalog.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
    return directory


def load_catalog(directory: str | Path, name: str | None = None) -> Catalog:
    """Load a curated catalog or any BEIR-layout directory (see :mod:`toolret.catalog.loaders.beir`)."""

    return load_beir(directory, name=name)


__all__ = ["save_catalog", "load_catalog", "Catalog", "Tool", "Query"]
