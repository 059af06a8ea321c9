"""QTA's DPO preference data (paper Sec. 4.2, "Generating DPO samples") as a versioned JSONL artifact.

For every training query q and round r < rounds: sample T_sub (s tool documents, seeded by query and
round), sample two rewrites q1, q2 of q at a high temperature (sample indices 2r and 2r+1), rank the
whole catalog with the frozen retriever for q, q1 and q2, score each with eq. 4 over q's gold tools,
then chosen = the best of {q, q1, q2} and rejected = the worst (``choose_pair``; a round with no
preference is kept with ``skip: "tie"``). The stored pair is that default rule's; training picks each
round's pair again under ``qta.pair_rule`` from the stored rewards (``dpo_pairs``), so another rule needs
no new samples. The adapter for m trains on the pairs of rounds < m.

``data/qta/<dataset>/preferences.jsonl``: one line per (query, round)::

    {"query_id", "round", "query", "gold", "tools" (T_sub tool ids), "prompt" (chat messages),
     "candidates": [{"source": "query"|"sample0"|"sample1", "text" (what is searched), "completion"
                     (what DPO trains on), "raw", "status", "fallback", "reason", "ranks", "reward"}],
     "chosen", "rejected" (candidate indices or null), "skip" (null or "tie")}

plus ``preferences.meta.json`` (sampling settings, LLM, retriever, prompt version, counts); timings and
cache hits go to the run-info sidecar. Written atomically; the samples are in the LLM cache as they are
generated, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolret.catalog.model import Catalog
from toolret.errors import CatalogError
from toolret.jsonl_artifacts import meta_path, read_jsonl, write_jsonl
from toolret.llm.base import SampleRequest
from toolret.methods.qta.config import QTAConfig
from toolret.methods.qta.generation import (
    PROMPT_VERSION,
    QTALLM,
    generate,
    parse_rewrite,
    rewrite_prompt,
    sample_tools,
    training_sampling,
)
from toolret.methods.qta.reward import gold_ranks, query_reward


PAIR_RULES = ("best_worst", "beat_query", "rewrites_only")


def choose_pair(rewards: Sequence[float], rule: str = "best_worst") -> tuple[int, int] | None:
    """``(chosen, rejected)`` candidate indices of one round (``rewards[0]``: the query, then its rewrites),
    or ``None`` (no pair). Ties: the first best is chosen, the last worst rejected.

    - ``best_worst``: the best and the worst of {q, q1, q2}; no pair when all tie (our default reading);
    - ``beat_query``: the same pair, but only in a round where some rewrite scores above q;
    - ``rewrites_only``: the best and the worst rewrite; q only decides whether the round yields a pair (its
      best rewrite must score above q, and the two rewrites must differ in score).
    """
    if rule not in PAIR_RULES:
        raise ValueError(f"qta.pair_rule {rule!r}: expected one of {PAIR_RULES}")
    if rule != "best_worst" and max(rewards[1:], default=rewards[0]) <= rewards[0]:
        return None
    first = 1 if rule == "rewrites_only" else 0
    pool = list(rewards[first:])
    best, worst = max(pool), min(pool)
    if best == worst:
        return None
    chosen = first + next(i for i, r in enumerate(pool) if r == best)
    rejected = first + max(i for i, r in enumerate(pool) if r == worst)
    return chosen, rejected


def round_pair(record: dict[str, Any], rule: str = "best_worst") -> tuple[int, int] | None:
    """A preference record's pair under ``rule``; ``None`` also when both completions are the same text."""
    cands = record["candidates"]
    pair = choose_pair([c["reward"] for c in cands], rule)
    if pair is not None and cands[pair[0]]["completion"] == cands[pair[1]]["completion"]:
        return None
    return pair


def score_texts(retriever, texts: Sequence[str], gold: Sequence[Sequence[int]],
                n: int) -> list[tuple[list[int], float]]:
    """``(gold ranks, eq. 4 reward)`` of each text under the retriever's ranking of every tool."""
    n_tools = len(retriever.tool_ids)
    ranking = retriever.search(list(texts), n_tools)
    out = []
    for row, g in enumerate(gold):
        ranks = gold_ranks(ranking.indices[row], g)
        out.append((ranks, query_reward(ranks, n)))
    return out


def sample_preferences(catalog: Catalog, cfg: QTAConfig, llm: QTALLM, retriever, docs: str = "original",
                       rounds: int | None = None) -> list[dict[str, Any]]:
    """Preference records of every judged train query (``rounds`` default ``cfg.rounds``)."""
    train = catalog.split("train")
    if not train:
        raise CatalogError(f"qta: dataset {catalog.name!r} has no training queries to sample preferences from "
                           "(a dataset without a train split is evaluated on k folds: catalog.folds / catalog.fold)")
    if cfg.train_queries and len(train) > cfg.train_queries:
        import random

        keep = set(random.Random(cfg.seed).sample(sorted(q.id for q in train), cfg.train_queries))
        train = [q for q in train if q.id in keep]
    rounds = cfg.rounds if rounds is None else rounds
    documents = catalog.docs(docs)
    tool_ids = catalog.tool_ids
    records, requests = [], []
    for q in train:
        gold = sorted(catalog.tool_position(t) for t in catalog.gold(q.id))
        for r in range(rounds):
            tools = sample_tools(len(documents), cfg.s, cfg.seed, q.id, r)
            prompt = rewrite_prompt(q.text, [documents[i] for i in tools], cfg.doc_chars)
            records.append({"query_id": q.id, "round": r, "query": q.text, "gold": [tool_ids[g] for g in gold],
                            "tools": [tool_ids[i] for i in tools], "prompt": prompt, "_gold": gold})
            requests += [SampleRequest(prompt, 2 * r), SampleRequest(prompt, 2 * r + 1)]
    gens = generate(llm, requests, training_sampling(cfg))
    for i, rec in enumerate(records):
        cands = [{"source": "query", "text": rec["query"], "completion": rec["query"], "raw": None, "status": "ok",
                  "fallback": False, "reason": None}]
        for j in (0, 1):
            g = gens[2 * i + j]
            parsed = parse_rewrite(g.text, g.finish_reason, rec["query"], cfg.max_rewrite_chars)
            cands.append({"source": f"sample{j}", "text": parsed["rewrite"],
                          "completion": g.text.strip() if parsed["fallback"] else parsed["rewrite"], "raw": g.text,
                          "status": parsed["status"], "fallback": parsed["fallback"], "reason": parsed["reason"]})
        rec["candidates"] = cands
    needed = list(dict.fromkeys((c["text"], tuple(rec["_gold"])) for rec in records for c in rec["candidates"]))
    by_text = dict(zip(needed, score_texts(retriever, [t for t, _ in needed], [g for _, g in needed], cfg.n)))
    for rec in records:
        gold = tuple(rec.pop("_gold"))
        for c in rec["candidates"]:
            c["ranks"], c["reward"] = by_text[(c["text"], gold)]
        pair = round_pair(rec)  # the stored pair: best_worst's (qta.pair_rule picks again at training)
        rec["chosen"], rec["rejected"] = pair if pair else (None, None)
        rec["skip"] = None if pair else "tie"
    return records


def summarize(records: Sequence[dict[str, Any]], rule: str = "best_worst") -> dict[str, Any]:
    """Counts for the meta / the report under ``rule``: pairs, rounds without one, who was chosen / rejected,
    parse outcomes of the samples."""
    pairs = [(r, p) for r in records if (p := round_pair(r, rule)) is not None]
    samples = [c for r in records for c in r["candidates"] if c["source"] != "query"]
    return {
        "rule": rule, "records": len(records), "pairs": len(pairs), "ties": len(records) - len(pairs),
        "chosen": dict(Counter(r["candidates"][p[0]]["source"] for r, p in pairs)),
        "rejected": dict(Counter(r["candidates"][p[1]]["source"] for r, p in pairs)),
        "chosen_copies_query": sum(r["candidates"][p[0]]["completion"].strip() == r["query"].strip()
                                   for r, p in pairs),
        "sample_status": dict(Counter(c["status"] for c in samples)),
        "sample_fallback_reasons": dict(Counter(c["reason"] for c in samples if c["fallback"])),
        "samples_beating_query": sum(1 for r in records for c in r["candidates"][1:]
                                     if c["reward"] > r["candidates"][0]["reward"]),
    }


def preference_key(catalog: Catalog, cfg: QTAConfig, retriever_model: str, docs: str) -> dict[str, Any]:
    """What a preference artifact was made from (a stored one is reused only when this matches)."""
    return {"dataset": catalog.name, "train_query_ids": sorted(q.id for q in catalog.split("train")),
            "docs": docs, "retriever": retriever_model, "prompt_version": PROMPT_VERSION, **cfg.sampling_key()}


def build_preferences(catalog: Catalog, cfg: QTAConfig, llm: QTALLM, retriever, out: str | Path | None, *,
                      docs: str = "original", retriever_model: str = "") -> tuple[list[dict], dict]:
    """Sample and score the preference data, write it (+ meta) to ``out`` when given."""
    t0 = time.perf_counter()
    records = sample_preferences(catalog, cfg, llm, retriever, docs)
    meta = {"kind": "qta_preferences", "key": preference_key(catalog, cfg, retriever_model, docs),
            "rounds": cfg.rounds, "llm": llm.describe(), "counts": summarize(records),
            "run_info": {"seconds": round(time.perf_counter() - t0, 1), "llm_calls": llm.stats}}
    if out is not None:
        write_jsonl(out, records, meta)
        meta.pop("run_info", None)
    return records, meta


def load_preferences(path: str | Path, key: dict[str, Any], rounds: int) -> list[dict] | None:
    """The stored records when they were made with ``key`` and hold at least ``rounds`` rounds, else ``None``."""
    path = Path(path)
    mp = meta_path(path)
    if not (path.is_file() and mp.is_file()):
        return None
    meta = json.loads(mp.read_text(encoding="utf-8"))
    if meta.get("key") != json.loads(json.dumps(key)) or meta.get("rounds", 0) < rounds:
        return None
    return read_jsonl(path)


def dpo_pairs(records: Sequence[dict[str, Any]], m: int, rule: str = "best_worst") -> list[dict[str, Any]]:
    """trl's conversational preference rows of the rounds < ``m`` that yield a pair under ``rule``."""
    rows = []
    for r in records:
        if r["round"] >= m:
            continue
        try:
            pair = round_pair(r, rule)
            if pair is None:
                continue
            chosen, rejected = r["candidates"][pair[0]], r["candidates"][pair[1]]
            rows.append({"prompt": r["prompt"], "chosen": [{"role": "assistant", "content": chosen["completion"]}],
                         "rejected": [{"role": "assistant", "content": rejected["completion"]}]})
        except (KeyError, IndexError, TypeError) as e:
            raise CatalogError(f"preference record {r.get('query_id')!r} round {r.get('round')!r}: "
                               f"malformed ({e!r})") from None
    return rows


__all__ = ["PAIR_RULES", "build_preferences", "choose_pair", "round_pair", "dpo_pairs", "load_preferences", "preference_key", "sample_preferences",
           "score_texts", "summarize"]
