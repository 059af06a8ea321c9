"""Training and dev data for a catalog without queries: requests an LLM writes from each tool's document.

Generation is Re-Invoke's query generator (the same prompt, so the committed generation shards of the
project answer for any tool they cover) run as a durable job: resumable shards under
``<out>/generations/<model>/``, a progress bar, and an ETA printed before it starts. A re-adapt of a changed
catalog asks the LLM only for tools whose document is new (an unchanged document is the same prompt).

Splits (:func:`split_queries`): a seeded ``holdout`` fraction of the catalog's units -- parent tools where
the catalog has at least :data:`MIN_UNITS` of them, else single tools -- is held out: their requests are
dev only (``dev_unseen``: dev measures tools no candidate was trained on, as new tools in a user's catalog
will be). A unit is held out by a seeded hash of its name, so tools added later leave the others' split as it
was. Of the other tools' requests a seeded ``dev_fraction`` is dev (``dev_seen``), the rest train.
Multi-tool requests are composed, each split from its own single-tool requests
(:func:`toolret.llm.synthetic_catalog.compose_requests`: 2-3 tools of one parent, or of one category), and
written as one request needing every tool of a group (:func:`multi_groups`, :func:`generate_multi`: groups of
trained-side tools, a seeded ``dev_fraction`` of their requests dev): a composed request asks for each tool in
turn, a written one states a single need that takes several tools, as a user's scenario does.

Goal-style requests (``goal``, :func:`goal_tools`): for up to ``goal_tools`` held-out tools, a second prompt
(:func:`toolret.llm.prompts.goal_request_prompt`) writes the user's goal in everyday words, naming neither the
tool nor its parameters (composed into multi-tool ones too). They are dev only, in a style no candidate was
trained on: the subset the champion is chosen on (:data:`toolret.adapt.run.SELECT_SUBSET`), since the training
requests' own style rewards a trained candidate on the rest of dev for the generator's phrasing.
The catalog's provenance names each dev request's subset (``dev_subsets``: ``seen``, ``unseen``, ``multi``,
``goal``),
so that a dev verdict can be read per kind of request (:func:`toolret.adapt.run.dev_breakdown`).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolret.catalog.model import Catalog, Query, Tool
from toolret.llm.synthetic_catalog import compose_requests
from toolret.errors import AdaptInputError, LLMServerError
from toolret.llm.engines import build_generator
from toolret.llm.lazy import LazyCachedLLM
from toolret.llm.models import model_slug
from toolret.llm.parsing import parse_single
from toolret.llm.prompts import (MULTI_GEN_PARAMS, QUERY_GEN_PARAMS, goal_request_prompt, multi_api_prompt,
                                 query_generation_prompt)
from toolret.llm.shards import ShardStore, StoreFirstGenerator, prompt_key, run_durable, store_root
from toolret.methods.reinvoke.config import ReInvokeConfig

log = logging.getLogger(__name__)

JOB = "reinvoke-queries"  # the shard folder (and prompt) of Re-Invoke's query generator
GOAL_JOB = "adapt-goal-requests"  # the shard folder of the goal-style requests (toolret.llm.prompts)
MULTI_JOB = "adapt-multi-requests"  # the shard folder of the multi-tool requests (toolret.llm.prompts)
MIN_UNITS = 20  # hold out whole parent tools only where there are at least this many
HOLDOUT = 0.2  # the fraction of units held out
# samples/s of each generator on 2 CPU cores (transformers, batch 64), for the ETA before any shard of this
# machine exists (benchmarks/results/llm_throughput.json; docs: measured 2026-11)
DEFAULT_THROUGHPUT = {"smollm2-135m-instruct": 4.0, "qwen2.5-coder-0.5b-instruct": 1.5,
                      "qwen2.5-coder-1.5b-instruct": 0.5}


@dataclass(frozen=True)
class GeneratorSpec:
    """Which LLM writes the requests: a ``KNOWN_MODELS`` name on a local engine, or any OpenAI-compatible
    server (``engine="openai"``, ``base_url``)."""

    model: str = "qwen2.5-coder-0.5b-instruct"
    engine: str = "transformers"
    base_url: str | None = None
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int = 0
    max_new_tokens: int = 48

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "base_url"} | (
            {"server": True} if self.base_url else {})


@dataclass
class Generated:
    """Per tool, its parsed requests; and what this run cost."""

    per_tool: list[list[str]]
    samples_requested: int
    samples_generated: int  # asked of the LLM in this run (the rest came from shards)
    tools_generated: int  # tools with at least one sample generated in this run
    seconds: float
    samples_per_s: float | None
    unparsed: int
    model: dict[str, Any] = field(default_factory=dict)


def _store(out: Path, spec: GeneratorSpec, project: Path | None):
    store = ShardStore(out / "generations" / model_slug(spec.model), spec.model, spec.engine)
    shared = store_root(spec.model, project)  # the project's committed shards answer too (read-only)
    if shared.is_dir() and shared.resolve() != store.root.resolve():
        store.absorb(ShardStore(shared, spec.model, spec.engine))
    return store


def _throughput(store, spec: GeneratorSpec) -> float:
    import json

    rates = []
    for path in store.shards:
        try:
            rates.append(json.loads(path.with_suffix(".meta.json").read_text())["run_info"]["samples_per_s"])
        except (OSError, ValueError, KeyError):
            continue
    return statistics.median(rates) if rates else DEFAULT_THROUGHPUT.get(spec.model, 1.0)


def generate(catalog: Catalog, out: Path, n: int, spec: GeneratorSpec, *, generator: Any = None,
             project: Path | None = None, shard_prompts: int = 50, say=print, job: str = JOB,
             only: set[str] | None = None) -> Generated:
    """``n`` requests per tool of ``catalog`` (its original documents), generated where no shard holds them.

    ``generator``: an injected engine (tests); default: ``spec``'s, built only if something is missing.
    ``job``: :data:`JOB` (the query generator's prompt) or :data:`GOAL_JOB` (goal-style requests);
    ``only``: the ids of the tools to write for (the others get none).

    Raises:
        AdaptInputError: the generator could not be reached, or returned nothing usable for most tools.
    """

    prompt_of = goal_request_prompt if job == GOAL_JOB else query_generation_prompt
    chosen = [only is None or t.id in only for t in catalog.tools]
    prompts = [prompt_of(d) for d, c in zip(catalog.docs("original"), chosen) if c]
    sampling = dataclasses.replace(QUERY_GEN_PARAMS, n=n, max_new_tokens=spec.max_new_tokens,
                                   temperature=spec.temperature, top_p=spec.top_p, seed=spec.seed)
    what = "goal-style requests" if job == GOAL_JOB else "requests"
    texts, gen = _generate_prompts(prompts, sampling, spec, out, job, catalog.name, what, "tools", generator=generator,
                                   project=project, shard_prompts=shard_prompts, say=say)
    by_prompt = iter(texts)
    gen.per_tool = [next(by_prompt) if c else [] for c in chosen]
    return gen


def generate_multi(catalog: Catalog, out: Path, groups: Sequence[tuple[str, ...]], spec: GeneratorSpec, *,
                   generator: Any = None, project: Path | None = None, shard_prompts: int = 50,
                   say=print) -> Generated:
    """One request per group of ``groups`` (tool ids, :func:`multi_groups`) needing every tool of it, written
    by the multi-tool prompt (:func:`toolret.llm.prompts.multi_api_prompt`) where no shard holds it;
    ``per_tool`` of the result holds, per group, its requests.

    Raises:
        AdaptInputError: the generator could not be reached, or returned nothing usable for most groups.
    """

    docs = dict(zip(catalog.tool_ids, catalog.docs("original")))
    prompts = [multi_api_prompt([docs[t] for t in g]) for g in groups]
    sampling = dataclasses.replace(MULTI_GEN_PARAMS, temperature=spec.temperature, top_p=spec.top_p, seed=spec.seed)
    texts, gen = _generate_prompts(prompts, sampling, spec, out, MULTI_JOB, catalog.name, "multi-tool requests",
                                   "groups", generator=generator, project=project, shard_prompts=shard_prompts,
                                   say=say)
    gen.per_tool = texts
    return gen


def _generate_prompts(prompts: list[Any], sampling: Any, spec: GeneratorSpec, out: Path, job: str, catalog: str,
                      what: str, units: str, *, generator: Any, project: Path | None, shard_prompts: int,
                      say) -> tuple[list[list[str]], Generated]:
    """Each prompt's parsed requests (``sampling.n`` asked, from the shards where they hold them) and the cost."""
    import time

    n = sampling.n
    store = _store(out, spec, project)
    missing = store.missing(prompts, sampling)
    units_missing = len({prompt_key(r.prompt) for r in missing})
    rate = _throughput(store, spec)
    if missing:
        say(f"adapt: generating {len(missing)} {what} for {units_missing} of {len(prompts)} {units} with "
            f"{spec.model} ({spec.engine}); ETA ~{len(missing) / rate / 60:.1f} min at ~{rate:.2f} samples/s "
            f"(resumable: shards under {store.root})")
    else:
        say(f"adapt: all {len(prompts) * n} {what} of {len(prompts)} {units} are in the shards: no generation")

    cfg = _llm_config(spec)
    llm = LazyCachedLLM(cfg, cache_path=out / "generations" / "llm-cache.jsonl", generator=generator)
    if generator is None:

        llm.build = lambda: build_generator(spec.engine, spec.model, base_url=spec.base_url)  # type: ignore[method-assign]
    gen = StoreFirstGenerator(store, llm._cached_engine)
    t0 = time.perf_counter()
    summary = {"samples": 0}
    if missing:
        try:
            summary = run_durable(store, job, prompts, sampling, gen, {"method": "adapt", "catalog": catalog,
                                                                        units: len(prompts)},
                                  shard_prompts=shard_prompts)
        except (ConnectionError, OSError, TimeoutError, LLMServerError) as e:
            raise AdaptInputError(f"the generator {spec.model!r} on {spec.engine!r}"
                                  + (f" at {spec.base_url}" if spec.base_url else "")
                                  + f" failed: {e}; nothing was registered (rerun to resume)") from None
    seconds = time.perf_counter() - t0
    texts, unparsed = [], 0
    for prompt in prompts:
        key, got = prompt_key(prompt), []
        for j in range(n):
            rec = store.get(key, sampling, j)
            parsed = parse_single(rec["output"], finish_reason=rec.get("finish_reason")) if rec else None
            if parsed is not None and parsed.ok:
                got.append(parsed.items[0])
            else:
                unparsed += 1
        texts.append(got)
    without = sum(1 for t in texts if not t)
    if without > len(prompts) / 2:
        raise AdaptInputError(f"the generator {spec.model!r} returned no usable request for {without} of "
                              f"{len(prompts)} {units} (garbage or refusals); nothing was registered")
    return texts, Generated([], len(prompts) * n, int(summary.get("samples", 0)), units_missing, round(seconds, 1),
                            round(summary["samples"] / seconds, 3) if summary.get("samples") and seconds > 0 else None,
                            unparsed, {**spec.describe(), **store.provenance})


def _llm_config(spec: GeneratorSpec):
    return ReInvokeConfig(llm_model=spec.model, llm_engine=spec.engine, llm_base_url=spec.base_url)


def _unit_draw(seed: int, unit: str) -> float:
    """A unit's seeded draw in [0, 1): a hash of its name, so that it does not move when others are added."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{seed}:{unit}".encode()).digest()[:8], "big") / 2 ** 64


def holdout_units(catalog: Catalog, fraction: float, seed: int) -> tuple[str, set[str]]:
    """``(unit kind, held-out tool ids)``: the parent tools where there are at least :data:`MIN_UNITS`, else the
    tools themselves, whose seeded draw (:func:`_unit_draw`) is below ``fraction`` -- the lowest one at least,
    where there are two units or more."""
    parents = sorted({t.tool or t.id for t in catalog.tools})
    kind = "parent_tool" if len(parents) >= MIN_UNITS else "tool"
    units = parents if kind == "parent_tool" else sorted(t.id for t in catalog.tools)
    held: set[str] = set()
    if len(units) > 1:
        draws = {u: _unit_draw(seed, u) for u in units}
        held = {u for u, d in draws.items() if d < fraction} or {min(units, key=draws.__getitem__)}
    ids = {t.id for t in catalog.tools if (t.tool or t.id if kind == "parent_tool" else t.id) in held}
    return kind, ids


def goal_tools(catalog: Catalog, held: set[str], cap: int, seed: int) -> set[str]:
    """The held-out tools that get goal-style requests: all of them, or the ``cap`` with the lowest seeded
    draws (a tool added later does not displace one unless its own draw is lower)."""
    ids = sorted((t.id for t in catalog.tools if t.id in held), key=lambda t: _unit_draw(seed + 7, t))
    return set(ids[:cap])


def multi_groups(catalog: Catalog, held: set[str], cap: int, seed: int) -> list[tuple[str, ...]]:
    """Groups of 2-3 trained-side tools (none of ``held``) a multi-tool request is written for, drawn from the
    tool documents alone: up to ``cap`` anchor tools (the lowest seeded draws), each with 1-2 partners -- of its
    parent tool for about half the anchors (a seeded draw of their own) where the parent has another tool, else one tool of each of other parent
    tools of its category, else (a catalog with neither) any other tools. Partners are the lowest draws of
    ``(anchor, partner)``, so a tool added later changes a group only where it becomes an anchor or a partner.
    Each group once, in catalog order."""
    position = {t.id: i for i, t in enumerate(catalog.tools)}
    side = [t for t in catalog.tools if t.id not in held]
    by_parent: dict[str, list[Tool]] = {}
    by_category: dict[str, list[Tool]] = {}
    for t in side:
        by_parent.setdefault(t.tool or t.id, []).append(t)
        if t.category:
            by_category.setdefault(t.category, []).append(t)
    hierarchy = any(len(v) > 1 for v in by_parent.values()) or any(len(v) > 1 for v in by_category.values())
    groups: dict[tuple[str, ...], None] = {}
    for a in sorted(side, key=lambda t: _unit_draw(seed + 11, t.id))[:cap]:
        parent = a.tool or a.id
        same = [t for t in by_parent[parent] if t.id != a.id]
        other = [t for t in by_category.get(a.category or "", []) if (t.tool or t.id) != parent]
        pool = same if same and (_unit_draw(seed + 14, a.id) < 0.5 or not other) else other
        if not hierarchy:
            pool = [t for t in side if t.id != a.id]
        partners: list[Tool] = []
        for t in sorted(pool, key=lambda t: _unit_draw(seed + 12, f"{a.id}|{t.id}")):
            if pool is other and any((p.tool or p.id) == (t.tool or t.id) for p in partners):
                continue  # one tool of each other parent
            partners.append(t)
            if len(partners) == 1 + (_unit_draw(seed + 13, a.id) < 0.5):
                break
        if partners:
            groups.setdefault(tuple(sorted([a.id, *(t.id for t in partners)], key=position.__getitem__)), None)
    return list(groups)


def split_queries(catalog: Catalog, per_tool: Sequence[Sequence[str]], *, seed: int = 13, holdout: float = HOLDOUT,
                  dev_fraction: float = 0.1, compose: float = 0.5,
                  goal: Sequence[Sequence[str]] | None = None,
                  multi: Sequence[tuple[Sequence[str], Sequence[str]]] = ()) -> tuple[Catalog, dict[str, Any]]:
    """The synthetic training catalog (train / dev splits) and its counts (module docstring); ``goal``: per
    tool, its goal-style requests (dev only; only a held-out tool may have any); ``multi``: ``(tool ids,
    requests)`` of generated multi-tool requests (:func:`multi_groups`; a seeded ``dev_fraction`` of them dev,
    subset ``multi``, the rest train).

    Raises:
        AdaptInputError: a goal-style request of a tool that is not held out, or a multi-tool one of a tool
            that is (either would measure a trained tool).
    """

    kind, held = holdout_units(catalog, holdout, seed)
    rng = random.Random(seed + 1)
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    singles: dict[str, list[tuple[str, str]]] = {"train": [], "dev": []}
    seen_texts: set[str] = set()
    counts = {"train": 0, "dev_seen": 0, "dev_unseen": 0}
    subsets: dict[str, str] = {}

    def fresh(text: str) -> bool:
        """Whether ``text`` is new (case and spacing aside); the first of equal requests is the one kept."""
        key = " ".join(text.lower().split())
        if key in seen_texts:
            return False
        seen_texts.add(key)
        return True

    def add(qid: str, text: str, split: str, gold, subset: str | None) -> None:
        queries.append(Query(qid, text, split))
        qrels[qid] = {t: 1 for t in gold}
        if split == "dev" and subset:
            subsets[qid] = subset

    for tool, texts in zip(catalog.tools, per_tool):
        for j, text in enumerate(texts):
            if not fresh(text):
                continue
            bucket = "dev_unseen" if tool.id in held else "dev_seen" if rng.random() < dev_fraction else "train"
            split = "train" if bucket == "train" else "dev"
            add(f"syn-{tool.id}-{j}", text, split, [tool.id], bucket.removeprefix("dev_"))
            counts[bucket] += 1
            singles[split].append((text, tool.id))
    goal_singles: list[tuple[str, str]] = []
    for tool, texts in zip(catalog.tools, goal or ()):
        if texts and tool.id not in held:
            raise AdaptInputError(f"goal-style requests of {tool.id!r}, which is not a held-out tool")
        for j, text in enumerate(texts):
            if fresh(text):
                add(f"syn-goal-{tool.id}-{j}", text, "dev", [tool.id], "goal")
                goal_singles.append((text, tool.id))
    counts["dev_goal"] = len(goal_singles)
    composed = compose_requests(catalog, goal_singles, round(compose * len(goal_singles)), random.Random(seed + 5))
    for j, (text, ids) in enumerate(composed):
        add(f"syn-goal-multi{j}", text, "dev", ids, "goal")
    counts["multi_goal"] = len(composed)
    counts["multi_generated_train"] = counts["multi_generated_dev"] = 0
    multi_rng = random.Random(seed + 6)
    for g, (ids, texts) in enumerate(multi):
        if set(ids) & held:
            raise AdaptInputError(f"a multi-tool request of the held-out tool(s) {sorted(set(ids) & held)}")
        for j, text in enumerate(texts):
            if fresh(text):
                split = "dev" if multi_rng.random() < dev_fraction else "train"
                add(f"syn-multigen-{g}-{j}", text, split, ids, "multi")
                counts[f"multi_generated_{split}"] += 1
    for split, offset in (("dev", 3), ("train", 4)):
        composed = compose_requests(catalog, singles[split], round(compose * len(singles[split])),
                                    random.Random(seed + offset))
        for j, (text, ids) in enumerate(composed):
            add(f"syn-multi-{split}{j}", text, split, ids, "multi")
        counts[f"multi_{split}"] = len(composed)
    info = {"holdout_unit": kind, "held_out_tools": len(held), "tools": len(catalog.tools),
            "tools_with_requests": sum(1 for t in per_tool if t), **counts}
    provenance = {"purpose": "training", "source": catalog.name, "adapt": info, "dev_subsets": subsets}
    return Catalog(f"{catalog.name}-synthetic", list(catalog.tools), queries, qrels, provenance), info


__all__ = ["DEFAULT_THROUGHPUT", "GOAL_JOB", "GeneratorSpec", "Generated", "HOLDOUT", "JOB", "MULTI_JOB", "generate",
           "generate_multi", "goal_tools", "holdout_units", "multi_groups", "split_queries"]
