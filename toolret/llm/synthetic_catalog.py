"""A training catalog written from tool documents alone: LLM-generated queries with their source APIs.

ToolBench's own queries were written by an LLM from the API documents; with no training queries to
obtain, a local generator does the same (synthetic-query training in the spirit of InPars / Promptagator).
The queries come from a committed **per-tool** generation job (one prompt per tool of the source
catalog, in catalog order: ``reinvoke-queries``): read from the shard store, no LLM is built; a tool
the store has no sample for simply has no query (counted).

Seen / unseen as in ToolRerank: a seeded fraction of the categories and, of the rest, of the parent tools
is **held out** -- their APIs get no training query, only dev queries -- so a model trained here meets
unseen tools and categories at test time, and the dev split measures both (``dev_seen`` / ``dev_unseen``
in the provenance). Of the seen tools' queries a seeded ``dev_fraction`` goes to dev.

Optional consistency filtering (``filter: bm25``): a training query is kept only if its source API ranks
within ``filter_depth`` for BM25 over the original documents -- drops generations that do not describe their
API. Splits are drawn before the filter, so every kept query has the split the unfiltered catalog gives it (a
model trained on one is never selected on the other's training queries). The filter is a training-data
treatment: dev queries are all kept, so dev is drawn like test (which no first stage filters) -- a dev split
of queries BM25 finds would favour any first stage with BM25 in it.

Composed requests (``compose``): ToolBench's instructions ask for several things in one message (median 43-46
words, 2-3 gold APIs), the generations ask for one (median 14 words). Of each split's single-API queries, seeded
groups -- 2-3 APIs of one parent tool, or one API of each of 2-3 tools of one category, as ToolBench built its
I1 / I2 instructions -- are joined into one request whose gold is the group. Training requests are joined from
training queries, dev requests from dev queries, each split with its own seed: a filtered catalog's dev split
stays the unfiltered one's.

Nothing here reads a test query or a test qrel: the source catalog's queries are dropped, and the result
has train and dev splits only (``provenance.purpose = "training"``; validated for a train split).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from toolret.catalog.model import Catalog, Query
from toolret.config import SyntheticSpec, apply_overrides
from toolret.errors import CatalogError
from toolret.llm.parsing import parse_single
from toolret.llm.prompts import multi_api_prompt
from toolret.llm.shards import prompt_key
from toolret.registry import generation_job
from toolret.retrieval.bm25 import BM25Retriever


def sample_tools(catalog: Catalog, n: int, seed: int) -> Catalog:
    """A seeded uniform sample of ``n`` of ``catalog``'s tools (APIs), in catalog order, with no query: the
    tools a generation job writes training queries for when the corpus is too large to cover (a 46k-API
    corpus). Drawn from the tool ids alone -- no query or qrel is read -- so a model trained on the sample
    learns no prior toward the APIs some test queries need. ``n`` >= the corpus size: every tool."""
    if n < 1:
        raise CatalogError(f"sample_tools: n must be >= 1 (got {n})")
    ids = [t.id for t in catalog.tools]
    chosen = set(random.Random(seed).sample(ids, n)) if n < len(ids) else set(ids)
    tools = [t for t in catalog.tools if t.id in chosen]
    provenance = {"source": catalog.name, "sample_tools": {"n": len(tools), "of": len(ids), "seed": seed}}
    return Catalog(f"{catalog.name}-sample{len(tools)}", tools, [], {}, provenance)


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


def _hierarchy(catalog: Catalog, api_ids: Sequence[str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(parent tool -> its APIs, category -> its parent tools)`` over ``api_ids`` (in their order); an API with no
    parent / category counts as its own."""
    by_id = {t.id: t for t in catalog.tools}
    by_parent: dict[str, list[str]] = {}
    for api in api_ids:
        by_parent.setdefault(by_id[api].tool or api, []).append(api)
    parents_by_cat: dict[str, list[str]] = {}
    for parent, apis in by_parent.items():
        parents_by_cat.setdefault(by_id[apis[0]].category or parent, []).append(parent)
    return by_parent, parents_by_cat


def multi_api_groups(catalog: Catalog, spec: SyntheticSpec) -> list[tuple[str, ...]]:
    """Seeded API groups a multi-API request is written for, sampled without regard to any test query:
    ``multi_tool_groups`` of 2-3 APIs of one parent tool, then ``multi_category_groups`` of one API from each
    of 2-3 parent tools of one category; each group once (API ids, catalog order within a group)."""
    rng = random.Random(spec.seed + 2)
    position = {t.id: i for i, t in enumerate(catalog.tools)}
    by_parent, parents_by_cat = _hierarchy(catalog, catalog.tool_ids)
    tool_pool = sorted(p for p, apis in by_parent.items() if len(apis) >= 2)
    cat_pool = sorted(c for c, ps in parents_by_cat.items() if len(ps) >= 2)
    groups: dict[tuple[str, ...], None] = {}

    def add(ids: list[str]) -> None:
        groups.setdefault(tuple(sorted(ids, key=position.__getitem__)), None)

    for _ in range(spec.multi_tool_groups if tool_pool else 0):
        apis = by_parent[rng.choice(tool_pool)]
        add(rng.sample(apis, min(len(apis), rng.choice((2, 3)))))
    for _ in range(spec.multi_category_groups if cat_pool else 0):
        parents = sorted(parents_by_cat[rng.choice(cat_pool)])
        chosen = rng.sample(parents, min(len(parents), rng.choice((2, 3))))
        add([rng.choice(by_parent[p]) for p in chosen])
    return list(groups)


CONNECTORS = ("", "Also, ", "Additionally, ", "And ")  # before every request but the first


def join_requests(parts: Sequence[str], rng: random.Random) -> str:
    """One message asking for each of ``parts`` in turn: a seeded connector before every part after the first
    (its first letter lowercased after one, unless it is the pronoun I)."""
    out = parts[0].strip()
    for part in parts[1:]:
        part, connector = part.strip(), rng.choice(CONNECTORS)
        if connector and not (part[:2] in ("I ", "I'") or part == "I"):
            part = part[:1].lower() + part[1:]
        out += " " + connector + part
    return out


def compose_requests(catalog: Catalog, singles: Sequence[tuple[str, str]], n: int,
                     rng: random.Random) -> list[tuple[str, tuple[str, ...]]]:
    """Up to ``n`` composed requests ``(text, API ids)`` from single-API ``(text, API id)`` queries of one split:
    the first half for 2-3 APIs of one parent tool, the rest for one API of each of 2-3 parent tools of one
    category (the other kind where a split has no group of one); each part a seeded one of its API's queries, in
    seeded order. A text already drawn is not repeated (so fewer than ``n`` may come back)."""
    position = {t.id: i for i, t in enumerate(catalog.tools)}
    by_api: dict[str, list[str]] = {}
    for text, api in singles:
        by_api.setdefault(api, []).append(text)
    by_parent, parents_by_cat = _hierarchy(catalog, sorted(by_api, key=position.__getitem__))
    tool_pool = sorted(p for p, apis in by_parent.items() if len(apis) >= 2)
    cat_pool = sorted(c for c, ps in parents_by_cat.items() if len(ps) >= 2)
    out: list[tuple[str, tuple[str, ...]]] = []
    drawn: set[str] = set()
    for i in range(n):
        one_tool = (i < (n + 1) // 2 and bool(tool_pool)) or not cat_pool
        if one_tool and not tool_pool:
            break
        if one_tool:
            apis = by_parent[rng.choice(tool_pool)]
            group = rng.sample(apis, min(len(apis), rng.choice((2, 3))))
        else:
            parents = parents_by_cat[rng.choice(cat_pool)]
            group = [rng.choice(by_parent[p]) for p in rng.sample(parents, min(len(parents), rng.choice((2, 3))))]
        rng.shuffle(group)
        text = join_requests([rng.choice(by_api[a]) for a in group], rng)
        if text not in drawn:
            drawn.add(text)
            out.append((text, tuple(sorted(group, key=position.__getitem__))))
    return out


def consistent(catalog: Catalog, queries: Sequence[tuple[str, str]], depth: int) -> list[bool]:
    """For ``(query text, source API id)`` pairs: does BM25 over the original documents rank the source
    API within ``depth``?"""

    bm25 = BM25Retriever()
    bm25.index(catalog.tool_ids, catalog.docs("original"))
    ranking = bm25.search([q for q, _ in queries], k=depth)
    return [src in ranking.ranked_ids(i) for i, (_, src) in enumerate(queries)]


def synthesize(catalog: Catalog, per_tool: Sequence[Sequence[str]], spec: SyntheticSpec, name: str,
               job_provenance: dict[str, Any] | None = None,
               per_group: Sequence[tuple[Sequence[str], Sequence[str]]] = ()) -> Catalog:
    """The training catalog ``name``: ``catalog``'s tools, ``per_tool[i]`` the queries of tool ``i``, and
    ``per_group``: ``(API ids, queries)`` of multi-API groups (:func:`multi_api_groups`); a group with a
    held-out API is dev (unseen) only."""
    if len(per_tool) != len(catalog.tools):
        raise CatalogError(f"synthetic {name!r}: {len(per_tool)} query lists for {len(catalog.tools)} tools of "
                           f"{catalog.name!r} (job {spec.job!r} must write one prompt per tool)")
    held_cats, held_tools, held_apis = holdout_tools(catalog, spec)
    pairs = [(q, (tool.id,), f"{tool.id}-{j}") for tool, qs in zip(catalog.tools, per_tool)
             for j, q in enumerate(qs[:spec.n])]
    n_single = len(pairs)
    pairs += [(q, tuple(ids), f"multi{g}-{j}") for g, (ids, qs) in enumerate(per_group) for j, q in enumerate(qs)]
    seen_texts: set[str] = set()
    unique = []
    for q, ids, suffix in pairs:  # one text, one query: the same text for two labels would contradict itself
        key = " ".join(q.lower().split())
        if key not in seen_texts:
            seen_texts.add(key)
            unique.append((q, ids, suffix))
    # the filter asks BM25 to find every API of the query within filter_depth
    if spec.filter == "bm25":
        flat = [(q, t) for q, ids, _ in unique for t in ids]
        found = iter(consistent(catalog, flat, spec.filter_depth))
        keep = [all([next(found) for _ in ids]) for _, ids, _ in unique]
    else:
        keep = [True] * len(unique)
    # splits are drawn over every unique query, then the filter drops training queries only: a filtered
    # catalog's queries keep the unfiltered one's splits (models trained on either are never selected on the
    # other's training queries) and its dev split is the unfiltered one's (drawn like test, which is not filtered)
    rng = random.Random(spec.seed + 1)
    buckets = ["dev_unseen" if any(t in held_apis for t in ids) else
               "dev_seen" if rng.random() < spec.dev_fraction else "train" for _, ids, _ in unique]
    kept = [(u, b) for u, b, k in zip(unique, buckets, keep) if k or b != "train"]
    queries, qrels = [], {}
    counts = {"train": 0, "dev_seen": 0, "dev_unseen": 0, "multi_api": 0}
    for (q, ids, suffix), bucket in kept:
        qid = f"syn-{suffix}"
        split = "train" if bucket == "train" else "dev"
        counts[bucket] += 1
        counts["multi_api"] += len(ids) > 1
        queries.append(Query(qid, q, split))
        qrels[qid] = {t: 1 for t in ids}
    if spec.compose:  # each split joined from its own single-API queries, with its own seed
        for split, seed in (("dev", spec.seed + 3), ("train", spec.seed + 4)):
            singles = [(q, ids[0]) for (q, ids, _), b in kept if len(ids) == 1 and (b == "train") == (split == "train")]
            composed = compose_requests(catalog, singles, round(spec.compose * len(singles)), random.Random(seed))
            for j, (q, ids) in enumerate(composed):
                qid = f"syn-composed-{split}{j}"
                queries.append(Query(qid, q, split))
                qrels[qid] = {t: 1 for t in ids}
            counts[f"composed_{split}"] = len(composed)
            counts["multi_api"] += len(composed)
    with_queries = sum(1 for qs in per_tool if qs)
    provenance = {
        # no composition: the provenance of catalogs built before it existed (their content is unchanged)
        "purpose": "training", "source": catalog.name,
        # keys added after catalogs were built are left out at their defaults (those stay byte-identical)
        "spec": {k: v for k, v in spec.to_dict().items()
                 if not (k == "compose" and not spec.compose or k.endswith(("llm_model", "llm_engine")) and v is None)},
        "job": job_provenance or {},
        "synthetic": {
            "tools": len(catalog.tools), "tools_with_queries": with_queries,
            "tools_without_queries": len(catalog.tools) - with_queries,
            "generated": len(pairs), "generated_multi_api": len(pairs) - n_single,
            "duplicate_texts_dropped": len(pairs) - len(unique),
            "filtered_out": len(unique) - len(kept), "queries": len(queries), **counts,
            "held_out_categories": sorted(held_cats), "held_out_tools": sorted(held_tools),
            "held_out_apis": len(held_apis),
        },
    }
    return Catalog(name, [t for t in catalog.tools], queries, qrels, provenance)


def generator_params(params: Any, spec: SyntheticSpec, multi: bool = False) -> Any:
    """``params`` whose ``reinvoke`` section names the generator ``spec`` reads ``job``'s shards from (its
    ``llm_model`` / ``llm_engine``, where set; ``multi``: ``multi_job``'s, ``multi_llm_model`` / ``multi_llm_engine``):
    the generation jobs read their model and engine there, so the shards they look up are that generator's."""

    prefix = "multi_" if multi else ""
    update = {f"reinvoke.{k}": getattr(spec, prefix + k) for k in ("llm_model", "llm_engine")
              if getattr(spec, prefix + k) is not None}
    return apply_overrides(params, update) if update else params


def stored_tool_queries(catalog: Catalog, params: Any, spec: SyntheticSpec) -> tuple[list[list[str]], dict[str, Any]]:
    """Every tool's first ``spec.n`` parsed queries of the per-tool generation ``spec.job`` by ``spec``'s generator,
    read from the committed shards only (no LLM is built; a missing or unparsable sample is skipped), and the
    job's provenance."""

    n = spec.n
    prompts, sampling, llm, provenance = generation_job(spec.job)(catalog, generator_params(params, spec), n)
    if len(prompts) != len(catalog.tools):
        raise CatalogError(f"generation job {spec.job!r} wrote {len(prompts)} prompts for {len(catalog.tools)} tools "
                           f"of {catalog.name!r}: not a per-tool job")
    return stored_outputs(prompts, sampling, llm, n), {**provenance, **llm.generator.store.provenance,
                                                       "sampling": sampling.key_str()}


def stored_outputs(prompts: Sequence[Any], sampling: Any, llm: Any, n: int) -> list[list[str]]:
    """Per prompt, the parsed outputs of its first ``n`` samples that the committed shards hold (no LLM)."""

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
    # no shard count in any provenance: more shards (samples n+1...) must not change a catalog built from
    # the first n
    return out


def stored_group_queries(catalog: Catalog, params: Any, spec: SyntheticSpec) -> list[tuple[tuple[str, ...], list[str]]]:
    """``(API ids, stored requests)`` of every multi-API group of ``spec`` (the committed shards of
    ``spec.multi_job``; a group not generated yet has no request)."""

    if not (spec.multi_tool_groups or spec.multi_category_groups):
        return []
    groups = multi_api_groups(catalog, spec)
    job = generation_job(spec.multi_job)
    prompts, sampling, llm, _ = job(catalog, generator_params(params, spec, multi=True), None)
    if len(prompts) != len(groups):
        raise CatalogError(f"generation job {spec.multi_job!r} wrote {len(prompts)} prompts for {len(groups)} "
                           f"API groups of {catalog.name!r}")
    return list(zip(groups, stored_outputs(prompts, sampling, llm, 1)))


def multi_api_job_prompts(catalog: Catalog, params: Any) -> tuple[list[Any], SyntheticSpec]:
    """The prompts of the multi-API job over ``catalog``: one per group of the synthetic spec whose source it is."""

    source = (catalog.provenance or {}).get("source") if "sample_tools" in (catalog.provenance or {}) else None
    specs = [s for s in params.synthetic.values() if s.source == catalog.name
             or (source == s.source and s.sample_tools == catalog.provenance["sample_tools"]["n"])]
    if not specs or not (specs[0].multi_tool_groups or specs[0].multi_category_groups):
        raise CatalogError(f"no synthetic catalog with multi-API groups has {catalog.name!r} as its source "
                           "(params.yaml synthetic.<name>: multi_tool_groups / multi_category_groups)")
    docs = dict(zip(catalog.tool_ids, catalog.docs("original")))
    return [multi_api_prompt([docs[t] for t in g]) for g in multi_api_groups(catalog, specs[0])], specs[0]


__all__ = ["SyntheticSpec", "compose_requests", "consistent", "generator_params", "holdout_tools", "join_requests",
           "multi_api_groups", "multi_api_job_prompts", "sample_tools", "stored_group_queries", "stored_outputs",
           "stored_tool_queries", "synthesize"]
