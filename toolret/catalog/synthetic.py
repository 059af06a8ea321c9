"""A training catalogue written from tool documents alone: LLM-generated queries with their source APIs.

ToolBench's own queries were written by an LLM from the API documents; with no training queries to
obtain, a local generator does the same (synthetic-query training in the spirit of InPars / Promptagator).
The queries come from a committed **per-tool** generation job (one prompt per tool of the source
catalogue, in catalogue order: ``reinvoke-queries``): read from the shard store, no LLM is built; a tool
the store has no sample for simply has no query (counted).

Seen / unseen as in ToolRerank: a seeded fraction of the categories and, of the rest, of the parent tools
is **held out** -- their APIs get no training query, only dev queries -- so a model trained here meets
unseen tools and categories at test time, and the dev split measures both (``dev_seen`` / ``dev_unseen``
in the provenance). Of the seen tools' queries a seeded ``dev_fraction`` goes to dev.

Optional consistency filtering (``filter: bm25``): a query is kept only if its source API ranks within
``filter_depth`` for BM25 over the original documents -- drops generations that do not describe their API.

Nothing here reads a test query or a test qrel: the source catalogue's queries are dropped, and the result
has train and dev splits only (``provenance.purpose = "training"``; validated for a train split).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from toolret.catalog.model import Catalog, CatalogError, Query
from toolret.config import SyntheticSpec


def holdout_tools(catalog: Catalog, spec: SyntheticSpec) -> tuple[set[str], set[str], set[str]]:
    """``(held-out categories, held-out parent tools, ids of every held-out API)``, seeded; categories
    first, then tools of the remaining categories. APIs with no category / parent count as their own."""
    rng = random.Random(spec.seed)
    categories = sorted({t.category or t.id for t in catalog.tools})
    held_cats = set(rng.sample(categories, round(len(categories) * spec.holdout_categories)))
    parents = sorted({t.tool or t.id for t in catalog.tools if (t.category or t.id) not in held_cats})
    held_tools = set(rng.sample(parents, round(len(parents) * spec.holdout_tools)))
    held_apis = {t.id for t in catalog.tools if (t.category or t.id) in held_cats or (t.tool or t.id) in held_tools}
    return held_cats, held_tools, held_apis


def consistent(catalog: Catalog, queries: Sequence[tuple[str, str]], depth: int) -> list[bool]:
    """For ``(query text, source API id)`` pairs: does BM25 over the original documents rank the source
    API within ``depth``?"""
    from toolret.retrieval.bm25 import BM25Retriever

    bm25 = BM25Retriever()
    bm25.index(catalog.tool_ids, catalog.docs("original"))
    ranking = bm25.search([q for q, _ in queries], k=depth)
    return [src in ranking.ranked_ids(i) for i, (_, src) in enumerate(queries)]


def synthesize(catalog: Catalog, per_tool: Sequence[Sequence[str]], spec: SyntheticSpec, name: str,
               job_provenance: dict[str, Any] | None = None) -> Catalog:
    """The training catalogue ``name``: ``catalog``'s tools, ``per_tool[i]`` the queries of tool ``i``."""
    if len(per_tool) != len(catalog.tools):
        raise CatalogError(f"synthetic {name!r}: {len(per_tool)} query lists for {len(catalog.tools)} tools of "
                           f"{catalog.name!r} (job {spec.job!r} must write one prompt per tool)")
    held_cats, held_tools, held_apis = holdout_tools(catalog, spec)
    pairs = [(q, tool.id, j) for tool, qs in zip(catalog.tools, per_tool) for j, q in enumerate(qs[:spec.n])]
    seen_texts: set[str] = set()
    unique = []
    for q, tid, j in pairs:  # one text, one query: the same text for two APIs would be a contradictory label
        key = " ".join(q.lower().split())
        if key not in seen_texts:
            seen_texts.add(key)
            unique.append((q, tid, j))
    keep = consistent(catalog, [(q, t) for q, t, _ in unique], spec.filter_depth) if spec.filter == "bm25" else [True] * len(unique)
    kept = [u for u, k in zip(unique, keep) if k]
    rng = random.Random(spec.seed + 1)
    queries, qrels = [], {}
    counts = {"train": 0, "dev_seen": 0, "dev_unseen": 0}
    for q, tid, j in kept:
        qid = f"syn-{tid}-{j}"
        if tid in held_apis:
            split, bucket = "dev", "dev_unseen"
        elif rng.random() < spec.dev_fraction:
            split, bucket = "dev", "dev_seen"
        else:
            split, bucket = "train", "train"
        counts[bucket] += 1
        queries.append(Query(qid, q, split))
        qrels[qid] = {tid: 1}
    with_queries = sum(1 for qs in per_tool if qs)
    provenance = {
        "purpose": "training", "source": catalog.name, "spec": spec.to_dict(), "job": job_provenance or {},
        "synthetic": {
            "tools": len(catalog.tools), "tools_with_queries": with_queries,
            "tools_without_queries": len(catalog.tools) - with_queries,
            "generated": len(pairs), "duplicate_texts_dropped": len(pairs) - len(unique),
            "filtered_out": len(unique) - len(kept), "queries": len(kept), **counts,
            "held_out_categories": sorted(held_cats), "held_out_tools": sorted(held_tools),
            "held_out_apis": len(held_apis),
        },
    }
    return Catalog(name, [t for t in catalog.tools], queries, qrels, provenance)


def stored_tool_queries(catalog: Catalog, params: Any, job: str, n: int) -> tuple[list[list[str]], dict[str, Any]]:
    """Every tool's first ``n`` parsed queries of a per-tool generation ``job``, read from the committed
    shards only (no LLM is built; a missing or unparsable sample is skipped), and the job's provenance."""
    from toolret.llm.parsing import parse_single
    from toolret.llm.shards import prompt_key
    from toolret.registry import generation_job

    prompts, sampling, llm, provenance = generation_job(job)(catalog, params, n)
    if len(prompts) != len(catalog.tools):
        raise CatalogError(f"generation job {job!r} wrote {len(prompts)} prompts for {len(catalog.tools)} tools of "
                           f"{catalog.name!r}: not a per-tool job")
    store = llm.generator.store
    out = []
    for prompt in prompts:
        key = prompt_key(prompt)
        texts = []
        for j in range(n):
            rec = store.get(key, sampling, j)
            if rec is not None:
                parsed = parse_single(rec["output"], finish_reason=rec.get("finish_reason"))
                if parsed.ok:
                    texts.append(parsed.items[0])
        out.append(texts)
    # no shard count: more shards (samples n+1...) must not change a catalogue built from the first n
    return out, {**provenance, **store.provenance, "sampling": sampling.key_str()}


__all__ = ["SyntheticSpec", "consistent", "holdout_tools", "stored_tool_queries", "synthesize"]
