"""BEIR-layout loader: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv`` (+ optional train/dev).

Which qrels file is required follows ``catalog.json: provenance.purpose`` (:data:`toolret.catalog.model.
PURPOSES`): ``qrels/test.tsv`` by default, ``qrels/train.tsv`` for ``training``, none (and no
``queries.jsonl``) for ``serving``.

Reads both third-party BEIR directories (bring your own catalog) and toolret's curated catalogs
(recognised by ``metadata.toolret``). Integrity is enforced while reading: duplicate ids, empty or
non-UTF-8 text, oversized fields and qrels that reference unknown queries or tools are rejected with
an error naming the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolret.catalog.loaders._read import iter_records, read_qrels, require_text
from toolret.catalog.model import SPLITS, Catalog, Query, Tool, required_split
from toolret.errors import CatalogError


def load_beir(directory: str | Path, name: str | None = None) -> Catalog:
    directory = Path(directory)
    if not directory.is_dir():
        raise CatalogError(f"{directory}: not a directory (expected BEIR layout: corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    meta_path = directory / "catalog.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    # provenance.purpose (model.PURPOSES) names the split required: test (evaluation, the default), train (a
    # training-only catalog, toolret.llm.synthetic_catalog) or none (a serving catalog: corpus only, imported
    # by toolret.catalog.importers without queries)
    try:
        split_required = required_split(meta.get("provenance"))
    except CatalogError as e:
        raise CatalogError(f"{meta_path}: {e}") from None
    needed = ["corpus.jsonl"] + (["queries.jsonl", f"qrels/{split_required}.tsv"] if split_required else [])
    for required in needed:
        if not (directory / required).is_file():
            raise CatalogError(f"{directory / required}: missing (BEIR layout needs {', '.join(needed)})")

    tools: list[Tool] = []
    seen: set[str] = set()
    corpus = directory / "corpus.jsonl"
    for _, tid, where, obj in iter_records(corpus, "tool"):
        seen.add(tid)
        text = require_text(obj, "text", where)
        title = obj.get("title") or ""
        if not isinstance(title, str):
            raise CatalogError(f"{where}: field 'title' must be a string")
        md = obj.get("metadata") or {}
        if not isinstance(md, dict):
            raise CatalogError(f"{where}: field 'metadata' must be an object")
        if md.get("toolret"):
            md = dict(md)
            md.pop("toolret")
            docs = {"original": text}
            for variant, vtext in (md.pop("docs", None) or {}).items():
                docs[variant] = require_text({"v": vtext}, "v", f"{where} docs[{variant!r}]")
            tools.append(Tool(id=tid, name=title or tid, docs=docs, tool=md.pop("tool", None),
                              category=md.pop("category", None), metadata=md))
        else:
            doc = f"{title}: {text}" if title.strip() else text
            tools.append(Tool(id=tid, name=title.strip() or tid, docs={"original": doc},
                              tool=md.get("tool_name"), category=md.get("category_name"), metadata=md))

    if not tools:
        raise CatalogError(f"{corpus}: no tools (an empty corpus: nothing to index or search)")
    queries_path = directory / "queries.jsonl"
    query_text: dict[str, tuple[str, str | None, int]] = {}
    for lineno, qid, where, obj in iter_records(queries_path, "query") if queries_path.is_file() else ():
        text = require_text(obj, "text", where)
        md = obj.get("metadata") or {}
        query_text[qid] = (text, md.get("split") if isinstance(md, dict) else None, lineno)

    qrels: dict[str, dict[str, int]] = {}
    split_of: dict[str, str] = {}
    for split in SPLITS:
        path = directory / "qrels" / f"{split}.tsv"
        if not path.is_file():
            continue
        for qid, tid, score, lineno in read_qrels(path):
            where = f"{path}:{lineno}"
            if qid not in query_text:
                raise CatalogError(f"{where}: query id {qid!r} is not in {queries_path.name}")
            if tid not in seen:
                raise CatalogError(f"{where}: tool id {tid!r} (query {qid!r}) is not in {corpus.name}")
            if split_of.setdefault(qid, split) != split:
                raise CatalogError(f"{where}: query {qid!r} is in both {split_of[qid]!r} and {split!r} qrels")
            previous = qrels.setdefault(qid, {}).get(tid)
            if previous is not None and previous != score:
                raise CatalogError(f"{where}: query {qid!r} / tool {tid!r} judged again with score {score} "
                                   f"(earlier {previous})")
            qrels[qid][tid] = score  # an exact duplicate row (ToolLens has 23) counts once
    queries = []
    for qid, (text, declared, _line) in query_text.items():
        split = split_of.get(qid) or declared
        if split is None:
            continue  # a query with no judgement in any split is not part of the catalog
        queries.append(Query(id=qid, text=text, split=split))
    return Catalog(name=name or meta.get("name") or directory.name, tools=tools, queries=queries,
                   qrels=qrels, provenance=meta.get("provenance") or {"source": directory.name})
