"""The LLM side of Re-Invoke: synthetic queries (index time), intents and HyDE documents (query time).

All generation goes through ``toolret.llm.cache.CachedGenerator`` (one append-only JSONL file per
LLM under ``<cache home>/llm/``, shared by every catalog), so a killed run resumes and a second run generates
nothing. Prompts and default decoding settings come from ``toolret.llm.prompts``; outputs are parsed
with ``toolret.llm.parsing`` and every record keeps its parse status so the artifacts can be audited.

Method-level fallbacks (counted in the returned records):
- a synthetic query that does not parse is dropped (``query: null``);
- an intent output that does not parse -> the raw user query is the only intent (``fallback: true``);
- a HyDE output that does not parse -> the raw user query is searched instead (``fallback: true``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from toolret.llm.synthetic_catalog import multi_api_job_prompts
from toolret.llm.base import generate_generations
from toolret.llm.engines import build_generator
from toolret.llm.lazy import LazyCachedLLM
from toolret.llm.models import KNOWN_MODELS
from toolret.llm.parsing import REFUSAL, parse_list, parse_single, parse_text
from toolret.llm.prompts import (HYDE_PARAMS, INTENT_PARAMS, MULTI_GEN_PARAMS, PROMPT_VERSIONS, QUERY_GEN_PARAMS,
                                 hyde_prompt, intent_extraction_prompt, multi_api_prompt, query_generation_prompt)
from toolret.llm.shards import prompt_key
from toolret.methods.reinvoke.config import ReInvokeConfig


class LazyLLM(LazyCachedLLM):
    """Re-Invoke's LLM: the engine ``reinvoke.llm_engine`` names (local or a served one), cached; the
    committed generation shards answer first (a fresh clone regenerates nothing they hold)."""

    shards = True

    def engine_name(self) -> str:
        return self.cfg.llm_engine

    def build(self):
        return build_generator(self.cfg.llm_engine, self.cfg.llm_model, device=self.cfg.llm_device,
                               batch_size=self.cfg.llm_batch_size, num_threads=self.cfg.llm_num_threads,
                               base_url=self.cfg.llm_base_url)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "cache": str(self.cache_path)}


# ------------------------------------------------------------------ sampling settings
def query_sampling(cfg: ReInvokeConfig):
    return dataclasses.replace(QUERY_GEN_PARAMS, n=cfg.generate_queries, max_new_tokens=cfg.query_max_new_tokens,
                               temperature=cfg.temperature, top_p=cfg.top_p, seed=cfg.seed)


def intent_sampling(cfg: ReInvokeConfig):
    return dataclasses.replace(INTENT_PARAMS, max_new_tokens=cfg.intent_max_new_tokens)


def hyde_sampling(cfg: ReInvokeConfig):
    return dataclasses.replace(HYDE_PARAMS, max_new_tokens=cfg.hyde_max_new_tokens)


def prompt_versions() -> dict[str, str]:
    return dict(PROMPT_VERSIONS)


# ------------------------------------------------------------------ query generator
def generate_synthetic_queries(llm: LazyLLM, tool_ids: Sequence[str], documents: Sequence[str],
                               cfg: ReInvokeConfig) -> list[dict[str, Any]]:
    """``cfg.generate_queries`` samples per tool -> one record per (tool, sample).

    Record: ``tool_id, sample_index, query (None if unparsable), status, raw, finish_reason, n_tokens``.
    """

    if len(tool_ids) != len(documents):
        raise ValueError("tool_ids and documents differ in length")
    params = query_sampling(cfg)
    gens = generate_generations(llm.generator, [query_generation_prompt(d) for d in documents], params)
    records = []
    for i, tid in enumerate(tool_ids):
        for j in range(params.n):
            g = gens[i * params.n + j]
            parsed = parse_single(g.text, finish_reason=g.finish_reason)
            records.append({"tool_id": tid, "sample_index": j, "query": parsed.items[0] if parsed.ok else None,
                            "status": parsed.status, "raw": g.text, "finish_reason": g.finish_reason,
                            "n_tokens": g.n_tokens})
    return records


def queries_by_tool(records: Sequence[dict[str, Any]], tool_ids: Sequence[str], n: int) -> list[list[str]]:
    """The parsed queries of the first ``n`` samples of every tool (sample order; failures skipped)."""
    by_tool: dict[str, list[tuple[int, str]]] = {t: [] for t in tool_ids}
    for r in records:
        if r["tool_id"] in by_tool and r["sample_index"] < n and r.get("query"):
            by_tool[r["tool_id"]].append((r["sample_index"], r["query"]))
    return [[q for _, q in sorted(by_tool[t])] for t in tool_ids]


# ------------------------------------------------------------------ intent extractor


def parse_intents(text: str | None, finish_reason: str | None, query: str, max_intents: int) -> dict[str, Any]:
    """Parse one intent-extractor output; unparsable -> ``[query]`` with ``fallback: true``."""

    parsed = parse_list(text, finish_reason=finish_reason, max_items=max_intents)
    # parse_list keeps a refusal line as an item when it is the only line; an intent never is one
    items = [i for i in parsed.items if not REFUSAL.search(i)]
    if parsed.ok and items:
        return {"intents": items, "status": parsed.status, "fallback": False}
    return {"intents": [query], "status": parsed.status if not parsed.ok else "malformed", "fallback": True}


def extract_intents(llm: LazyLLM, texts: Sequence[str], cfg: ReInvokeConfig,
                    query_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    gens = generate_generations(llm.generator, [intent_extraction_prompt(t) for t in texts], intent_sampling(cfg))
    out = []
    for i, (text, g) in enumerate(zip(texts, gens)):
        rec = {"query_id": query_ids[i] if query_ids is not None else str(i), "text": text}
        rec.update(parse_intents(g.text, g.finish_reason, text, cfg.max_intents))
        rec.update({"raw": g.text, "finish_reason": g.finish_reason, "n_tokens": g.n_tokens})
        out.append(rec)
    return out


# ------------------------------------------------------------------ HyDE
def hyde_text(text: str | None, finish_reason: str | None, query: str) -> dict[str, Any]:
    """A hypothetical tool document: ``name: description`` if the output is the asked-for JSON object,
    else the cleaned free text; unusable -> the raw query (``fallback: true``)."""

    parsed = parse_text(text, finish_reason=finish_reason)
    if not parsed.ok:
        return {"document": query, "status": parsed.status, "fallback": True}
    doc = parsed.items[0]
    m = re.search(r"\{.*\}", doc, re.DOTALL)
    if m:
        try:
            obj = json.loads(m.group(0))
            if isinstance(obj, dict) and (obj.get("name") or obj.get("description")):
                doc = ": ".join(str(obj[k]).strip() for k in ("name", "description") if obj.get(k))
                return {"document": doc, "status": parsed.status, "fallback": False}
        except ValueError:
            pass
    return {"document": doc, "status": "fallback" if parsed.status == "ok" else parsed.status, "fallback": False}


def hyde_documents(llm: LazyLLM, texts: Sequence[str], cfg: ReInvokeConfig,
                   query_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    gens = generate_generations(llm.generator, [hyde_prompt(t) for t in texts], hyde_sampling(cfg))
    out = []
    for i, (text, g) in enumerate(zip(texts, gens)):
        rec = {"query_id": query_ids[i] if query_ids is not None else str(i), "text": text}
        rec.update(hyde_text(g.text, g.finish_reason, text))
        rec.update({"raw": g.text, "finish_reason": g.finish_reason, "n_tokens": g.n_tokens})
        out.append(rec)
    return out


def status_counts(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Parse-status counts (+ fallbacks, failed queries, truncations) of a list of records."""
    c = Counter(r.get("status") for r in records)
    out: dict[str, Any] = {"n": len(records), "status": dict(sorted(c.items()))}
    if records and "fallback" in records[0]:
        out["fallback"] = sum(1 for r in records if r.get("fallback"))
    if records and "query" in records[0]:
        out["failed"] = sum(1 for r in records if not r.get("query"))
    out["hit_max_new_tokens"] = sum(1 for r in records if r.get("finish_reason") == "length")
    return out


# ------------------------------------------------------------------ durable (sharded) generation jobs
def durable_job(kind: str, catalog, cfg: ReInvokeConfig, n: int | None = None):
    """The prompts and sampling settings of a Re-Invoke generation job over ``catalog``, as
    ``toolret generate-shards`` runs it: ``queries`` (every tool's original document, ``n`` samples,
    default ``generate_queries``) or ``intents`` (every judged test query)."""

    if kind == "queries":
        params = query_sampling(cfg)
        if n is not None:
            params = dataclasses.replace(params, n=n)
        return [query_generation_prompt(d) for d in catalog.docs("original")], params
    if kind == "intents":
        return [intent_extraction_prompt(q.text) for q in catalog.split("test")], intent_sampling(cfg)
    raise ValueError(f"unknown Re-Invoke generation job {kind!r} (queries, intents)")


def _job(kind: str, catalog, params, n: int | None):
    cfg = params.reinvoke.component_config()
    prompts, sampling = durable_job(kind, catalog, cfg, n)
    template = query_generation_prompt("{document}") if kind == "queries" else intent_extraction_prompt("{query}")
    known = KNOWN_MODELS.get(cfg.llm_model)
    provenance = {"method": "reinvoke", "kind": kind, "catalog": catalog.name, "prompt_versions": prompt_versions(),
                  "prompt_template_sha": prompt_key(template)[:16],
                  "quantisation": known.hf_id if known is not None else cfg.llm_model}
    return prompts, sampling, LazyLLM(cfg), provenance


def queries_job(catalog, params, n: int | None = None):
    """``toolret generate-shards --job reinvoke-queries``: synthetic queries of every tool."""
    return _job("queries", catalog, params, n)


def intents_job(catalog, params, n: int | None = None):
    """``toolret generate-shards --job reinvoke-intents``: intents of every judged test query."""
    return _job("intents", catalog, params, n)


def multi_api_job(catalog, params, n: int | None = None):
    """``toolret generate-shards --job synthetic-multi-api``: one request per multi-API group of the synthetic
    training catalog built from ``catalog`` (:func:`toolret.llm.synthetic_catalog.multi_api_groups`), written by
    Re-Invoke's generator (same model, engine and shard store as its synthetic queries)."""

    cfg = params.reinvoke.component_config()
    prompts, spec = multi_api_job_prompts(catalog, params)
    sampling = dataclasses.replace(MULTI_GEN_PARAMS, n=n or 1, temperature=cfg.temperature, top_p=cfg.top_p,
                                   seed=cfg.seed)
    known = KNOWN_MODELS.get(cfg.llm_model)
    provenance = {"method": "synthetic", "kind": "multi_api", "catalog": catalog.name,
                  "prompt_versions": {"synthetic_multi_api": PROMPT_VERSIONS["synthetic_multi_api"]},
                  "prompt_template_sha": prompt_key(multi_api_prompt(["{document}", "{document}"]))[:16],
                  "groups": {"tool": spec.multi_tool_groups, "category": spec.multi_category_groups, "seed": spec.seed},
                  "quantisation": known.hf_id if known is not None else cfg.llm_model}
    return prompts, sampling, LazyLLM(cfg), provenance

