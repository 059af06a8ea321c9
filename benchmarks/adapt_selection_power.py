"""Cold-start power of ``toolret adapt``'s champion choice (issue 79): how many goal-style selection requests
it takes to separate candidates 0.02-0.05 nDCG@5 apart, measured on the four benchmark catalogues, and what
that means for each budget's ``goal_n`` / ``goal_tools`` (:data:`toolret.adapt.candidates.BUDGETS`).

1. **Selection requests, as adapt builds them** (nothing generated): each catalogue's tools as
   ``tools/adapt_benchmarks.py`` hands them to adapt (``prepare``, then :func:`toolret.adapt.user_catalog.load_tools`),
   its held-out tools (:func:`toolret.adapt.synthetic.holdout_units`, ``HOLDOUT``, seed 13), the goal tools
   (:func:`~toolret.adapt.synthetic.goal_tools`, the budget's ``goal_tools``) with
   :func:`toolret.adapt.run.goal_requests_per_tool` requests each, answered by the committed shards
   (``data/adapt/<catalogue>/generations``, copied to a temporary folder, and the project's
   ``data/generations``) through :func:`toolret.adapt.synthetic.generate`; the synthetic dev split by
   :func:`~toolret.adapt.synthetic.split_queries` and its goal-style subset by
   :func:`toolret.adapt.run.selection_queries`. A catalogue whose shards lack any sample is skipped (the record
   says which and how many samples are missing) -- the check runs before ``generate``, which therefore never
   builds an LLM. The multi-tool requests written per group are left out: they are dev's ``multi`` subset, and
   are added after the goal-style ones, so they change neither the goal-style requests nor their dedup.
2. **Per-request nDCG@5** of adapt's untrained single-side candidates -- ``bm25``, ``bm25-stem``
   (``params.bm25`` with the English stemmer and identifier splitting) and ``dense`` (all-MiniLM-L6-v2) -- built
   by :func:`toolret.adapt.candidates.candidates`, fitted and indexed as adapt does, scored on the selection
   requests by :func:`toolret.adapt.run.evaluate_pipeline` (each mean is checked against the committed adapt
   record's ``dev.<candidate>.selection``).
3. **Power**: per catalogue and candidate pair, the paired differences ``d`` (their mean, ``sigma_d`` = their SD,
   adapt's paired p by :func:`toolret.metrics.paired_test`, randomization, seed 13) and the analytic number of
   requests for 80 % power at alpha 0.05 two-sided, ``n = ((z_0.975 + z_0.8) * sigma_d / delta) ** 2``, for
   ``delta`` in ``--deltas``. Empirical check, for each catalogue's pair with the largest ``sigma_d``: one side
   shifted by a constant so that the mean difference is exactly ``delta`` (the spread of ``d`` is the real
   one), ``n`` requests drawn with replacement ``--resamples`` times, the share of draws where
   ``paired_test`` (randomization, ``--permutations`` sign flips, seed 13) gives p < 0.05 -- on a grid of ``n``
   around the analytic one; the smallest grid ``n`` with power >= 0.8 is reported, and the same at
   ``delta = 0`` (the test's size). Requests of one tool are not independent (a tool's goal-style requests, and
   the composed requests that reuse them), which the paired test ignores: per pair, the cluster-robust design
   effect of the mean of ``d`` (clusters: a request's first gold tool, in id order) and the intra-tool
   correlation it implies (``icc_implied``; also the one-way ANOVA ICC over the single-tool requests) give the
   variance inflation ``1 + (goal_n - 1) * ICC`` that ``goal_n`` requests per tool cost.
4. **Recommendation** per budget (``fast``: a 0.03 gap, ``full``: 0.02), from the largest ``sigma_d`` of the
   catalogues' widest pairs (a default has to hold on a catalogue nobody measured) and the median implied ICC:
   the requests needed with independent requests and at the budget's ``goal_n``, the ``goal_tools`` that
   takes, the smallest catalogue that can give it (held-out share ``HOLDOUT``, at most ``GOAL_MAX_PER_TOOL``
   per tool), and per catalogue what today's budget gives and the gap it resolves.

    .venv/bin/python benchmarks/adapt_selection_power.py
    .venv/bin/python benchmarks/adapt_selection_power.py --datasets mtrb-metatool --resamples 50 \\
        --out /tmp/power.json   # a short run
    .venv/bin/python benchmarks/adapt_selection_power.py --rederive benchmarks/results/adapt_selection_power.json
        # the reproduction checks and the recommendation again, from a record's stored numbers (seconds)

Full run: ~9 min on 2 busy cores (dense encoding of ToolBench's 2,479 documents ~4 min, the resampling ~4 min).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from toolret.metrics import paired_test  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DATASETS = ("toollens", "mtrb-metatool", "mtrb-restbench", "toolbench-g1-instruction")
CANDIDATES = ("bm25", "bm25-stem", "dense")
PAIRS = (("bm25-stem", "bm25"), ("dense", "bm25"), ("dense", "bm25-stem"))
METRIC = "ndcg@5"
ALPHA = 0.05
POWER = 0.8
SEED = 13  # adapt's
BUDGET_GAPS = {"fast": 0.03, "full": 0.02}  # the gap each budget's choice should resolve (issue 79)
GRID = (0.7, 0.85, 1.0, 1.15, 1.3)  # the empirical check's n, as multiples of the analytic n


# ----------------------------------------------------------------------------------------------- pure functions
def analytic_n(sigma_d: float, delta: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Requests needed for ``power`` at two-sided ``alpha`` to detect a mean paired difference ``delta`` whose
    per-request SD is ``sigma_d`` (normal approximation): ``ceil(((z_{1-alpha/2} + z_power) * sigma_d / delta)**2)``.

    Raises:
        ValueError: ``delta <= 0`` or ``sigma_d < 0``.
    """
    if delta <= 0 or sigma_d < 0:
        raise ValueError(f"need delta > 0 and sigma_d >= 0, got delta={delta}, sigma_d={sigma_d}")
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    return max(1, math.ceil((z * sigma_d / delta) ** 2 - 1e-9))


def detectable_gap(sigma_d: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The gap ``n`` requests detect with ``power`` (the inverse of :func:`analytic_n`)."""
    return (norm.ppf(1 - alpha / 2) + norm.ppf(power)) * sigma_d / math.sqrt(n)


def empirical_power(a: np.ndarray, b: np.ndarray, n: int, delta: float, *, resamples: int = 200,
                    permutations: int = 1000, alpha: float = ALPHA, seed: int = 0) -> float:
    """Share of ``resamples`` draws of ``n`` requests (with replacement) in which :func:`paired_test`
    (randomization, ``permutations`` sign flips, seed 13 as adapt) gives ``p < alpha``, after ``a`` is shifted
    by a constant so that ``mean(a - b) == delta`` (the per-request spread of ``a - b`` is kept)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    shifted = a + (delta - float(np.mean(a - b)))
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(resamples):
        idx = rng.integers(0, a.size, size=n)
        p = paired_test(shifted[idx], b[idx], method="randomization", n_samples=permutations, seed=SEED)["p_value"]
        hits += p < alpha
    return hits / resamples


def smallest_n(power_by_n: dict[int, float], target: float = POWER) -> int | None:
    """The smallest ``n`` whose power reaches ``target`` and stays there at every larger ``n`` of the grid
    (``None``: not reached)."""
    ns = sorted(power_by_n)
    for i, n in enumerate(ns):
        if all(power_by_n[m] >= target for m in ns[i:]):
            return n
    return None


def intra_cluster_correlation(values: np.ndarray, clusters: list[str]) -> float:
    """One-way ANOVA estimate of the intra-cluster correlation of ``values`` (clipped at 0; 0 where no cluster
    has two members)."""
    values = np.asarray(values, dtype=np.float64)
    groups: dict[str, list[float]] = {}
    for v, c in zip(values, clusters):
        groups.setdefault(c, []).append(float(v))
    k, n = len(groups), values.size
    if k < 2 or n <= k:
        return 0.0
    grand = values.mean()
    ssb = sum(len(g) * (np.mean(g) - grand) ** 2 for g in groups.values())
    ssw = sum(((np.asarray(g) - np.mean(g)) ** 2).sum() for g in groups.values())
    msb, msw = ssb / (k - 1), ssw / (n - k)
    m0 = (n - sum(len(g) ** 2 for g in groups.values()) / n) / (k - 1)
    denom = msb + (m0 - 1) * msw
    return float(max(0.0, (msb - msw) / denom)) if denom > 0 else 0.0


def design_effect(icc: float, per_cluster: float) -> float:
    """Variance inflation of a mean over clusters of ``per_cluster`` requests with intra-cluster correlation
    ``icc``: ``1 + (per_cluster - 1) * icc``."""
    return 1.0 + max(per_cluster - 1.0, 0.0) * icc


def cluster_design_effect(values: np.ndarray, clusters: list[str]) -> tuple[float, float]:
    """``(design effect, mean cluster size)`` of the mean of ``values``: its cluster-robust variance (sum over
    clusters of the squared sum of centred values, times ``G / (G - 1)``) over the variance that treats the
    values as independent (``s**2 / n``), and the request-weighted cluster size ``sum(m**2) / n``; 1 where
    every cluster is a single value."""
    values = np.asarray(values, dtype=np.float64)
    n = values.size
    e = values - values.mean()
    iid = float((e ** 2).sum() / (n - 1) / n) if n > 1 else 0.0
    sums: dict[str, float] = {}
    sizes: dict[str, int] = {}
    for v, c in zip(e, clusters):
        sums[c] = sums.get(c, 0.0) + float(v)
        sizes[c] = sizes.get(c, 0) + 1
    g = len(sums)
    if iid == 0.0 or g < 2:
        return 1.0, 1.0
    robust = sum(x ** 2 for x in sums.values()) / n ** 2 * g / (g - 1)
    return robust / iid, sum(m ** 2 for m in sizes.values()) / n


def implied_icc(deff: float, mean_cluster: float) -> float:
    """The intra-cluster correlation a design effect ``deff`` at clusters of ``mean_cluster`` implies."""
    return (deff - 1.0) / (mean_cluster - 1.0) if mean_cluster > 1.0 else 0.0


# ----------------------------------------------------------------------------- the catalogues' selection requests
def shard_gaps(tools, out: Path, spec, n: int, goal_ids: set[str], goal_n: int) -> dict[str, int]:
    """Samples the shards lack, per job, for the requests :func:`toolret.adapt.synthetic.generate` will ask
    for (the store it reads: ``<out>/generations/<model>`` with the project's committed shards absorbed)."""
    from toolret.adapt.synthetic import GOAL_JOB, JOB
    from toolret.llm.models import model_slug
    from toolret.llm.prompts import QUERY_GEN_PARAMS, goal_request_prompt, query_generation_prompt
    from toolret.llm.shards import ShardStore, store_root

    store = ShardStore(out / "generations" / model_slug(spec.model), spec.model, spec.engine)
    shared = store_root(spec.model)
    if shared.is_dir() and shared.resolve() != store.root.resolve():
        store.absorb(ShardStore(shared, spec.model, spec.engine))
    gaps = {}
    for job, k, prompt_of, only in ((JOB, n, query_generation_prompt, None),
                                    (GOAL_JOB, goal_n, goal_request_prompt, goal_ids)):
        prompts = [prompt_of(d) for t, d in zip(tools.tools, tools.docs("original")) if only is None or t.id in only]
        sampling = dataclasses.replace(QUERY_GEN_PARAMS, n=k, max_new_tokens=spec.max_new_tokens,
                                       temperature=spec.temperature, top_p=spec.top_p, seed=spec.seed)
        gaps[job] = len(store.missing(prompts, sampling))
    return gaps


def selection_scores(dataset: str, work: Path, params, budget: str, quiet: bool) -> dict[str, Any]:
    """The catalogue's goal-style selection requests rebuilt as adapt builds them and each untrained
    candidate's per-request nDCG@5 on them (or ``{"skipped": why}``)."""
    from adapt_benchmarks import prepare
    from tqdm import tqdm

    from toolret.adapt.candidates import BUDGETS, candidates
    from toolret.adapt.run import evaluate_pipeline, goal_requests_per_tool, selection_queries
    from toolret.adapt.synthetic import (GOAL_JOB, HOLDOUT, GeneratorSpec, generate, goal_tools, holdout_units,
                                         split_queries)
    from toolret.adapt.user_catalog import load_tools
    from toolret.catalog.model import Catalog
    from toolret.roles import Corpus

    t0 = time.perf_counter()
    catalog_dir, _ = prepare(dataset, work)
    tools = load_tools(catalog_dir)
    committed = ROOT / "data" / "adapt" / dataset / "generations"
    out = work / "adapt"
    if committed.is_dir():  # a copy: nothing is ever written next to the committed shards
        shutil.copytree(committed, out / "generations")
    settings = params.adapt
    spec = GeneratorSpec(model=settings.llm_model, engine=settings.llm_engine)
    n = settings.n or BUDGETS[budget]["n"]
    kind, held = holdout_units(tools, HOLDOUT, SEED)
    goal_ids = goal_tools(tools, held, BUDGETS[budget]["goal_tools"], SEED)
    goal_n = goal_requests_per_tool(len(goal_ids), BUDGETS[budget]["goal_n"])
    gaps = shard_gaps(tools, out, spec, n, goal_ids, goal_n)
    if any(gaps.values()):
        return {"skipped": f"the committed shards lack samples ({gaps}); nothing is generated here"}
    say = (lambda *_: None) if quiet else (lambda msg: tqdm.write(f"{dataset}: {msg}"))
    gen = generate(tools, out, n, spec, say=say)
    goal = generate(tools, out, goal_n, spec, say=say, job=GOAL_JOB, only=goal_ids)
    if gen.samples_generated or goal.samples_generated:
        raise RuntimeError(f"{dataset}: samples were generated ({gen.samples_generated}, {goal.samples_generated})")
    synthetic, info = split_queries(tools, gen.per_tool, seed=SEED, goal=goal.per_tool)
    subsets = synthetic.provenance["dev_subsets"]
    ids, how = selection_queries(subsets)
    ids = ids if ids is not None else {q for q, s in subsets.items() if s == "goal"}
    queries = [q for q in synthetic.queries if q.id in ids]
    selection = Catalog(synthetic.name, list(synthetic.tools), queries, {q.id: synthetic.qrels[q.id] for q in queries},
                        synthetic.provenance)
    pool = {c.name: c for c in candidates(tools, params, work / "work", budget, n)}
    per_query, means, seconds = {}, {}, {}
    for name in tqdm(CANDIDATES, desc=f"{dataset} candidates", unit="candidate", disable=quiet):
        t1 = time.perf_counter()
        pipe = pool[name].build([])  # untrained: no expansion
        pipe.fit(synthetic)
        pipe.index(Corpus.from_catalog(tools))
        summary, pq = evaluate_pipeline(pipe, selection, "dev", name)
        per_query[name] = pq
        means[name] = summary["metrics"][METRIC]
        seconds[name] = round(time.perf_counter() - t1, 1)
    order = per_query[CANDIDATES[0]]["query_id"]
    for name in CANDIDATES:
        assert list(per_query[name]["query_id"]) == list(order), "candidates scored different requests"
    gold = {q.id: sorted(selection.gold(q.id)) for q in queries}
    return {"tools": len(tools.tools), "holdout_unit": kind, "held_out_tools": len(held),
            "goal_tools": len(goal_ids), "goal_n": goal_n, "split": info, "selection_split": how,
            "query_ids": [str(q) for q in order], "gold": gold,
            "scores": {name: per_query[name][METRIC] for name in CANDIDATES}, "means": means,
            "seconds": {"candidates": seconds, "total": round(time.perf_counter() - t0, 1)}}


def committed_selection(dataset: str) -> dict[str, Any] | None:
    """The committed adapt record's selection means of the candidates (what the rebuild must reproduce)."""
    import json

    path = ROOT / "benchmarks" / "results" / "adapt" / f"{dataset}.json"
    if not path.is_file():
        return None
    report = json.loads(path.read_text(encoding="utf-8"))["report"]
    return {"budget": report["budget"], "n": report["dev"]["bm25"].get("by_subset", {}).get("goal", {}).get("n"),
            "means": {c: report["dev"][c]["selection"][METRIC] for c in CANDIDATES if c in report["dev"]}}


# ------------------------------------------------------------------------------------------------------ analysis
def analyse(data: dict[str, Any], deltas: list[float], resamples: int, permutations: int, quiet: bool,
            seed: int) -> dict[str, Any]:
    """Per pair: mean difference, sigma_d, adapt's paired p, analytic n per delta, the intra-tool correlation;
    for the pair with the largest sigma_d, the empirical power grid."""
    from tqdm import tqdm

    scores, qids, gold = data["scores"], data["query_ids"], data["gold"]
    single = [i for i, q in enumerate(qids) if len(gold[q]) == 1]
    pairs = {}
    for a, b in PAIRS:
        d = scores[a] - scores[b]
        icc = intra_cluster_correlation(d[single], [gold[qids[i]][0] for i in single])
        deff, size = cluster_design_effect(d, [gold[q][0] for q in qids])
        pairs[f"{a} - {b}"] = {
            "a": a, "b": b, "mean_a": round(float(scores[a].mean()), 4), "mean_b": round(float(scores[b].mean()), 4),
            "mean_diff": round(float(d.mean()), 4), "sigma_d": round(float(d.std(ddof=1)), 4),
            "share_of_requests_differing": round(float(np.mean(d != 0)), 3),
            "paired_p": round(float(paired_test(scores[a], scores[b], method="randomization", seed=SEED)["p_value"]), 4),
            "icc_single_requests_by_tool": round(icc, 3),
            "design_effect_clustered_by_first_gold_tool": round(deff, 3), "mean_cluster_size": round(size, 2),
            "icc_implied": round(implied_icc(deff, size), 4),
            "analytic_n": {str(x): analytic_n(float(d.std(ddof=1)), x) for x in deltas}}
    widest = max(pairs, key=lambda k: pairs[k]["sigma_d"])
    a, b = pairs[widest]["a"], pairs[widest]["b"]
    grid_of = {x: sorted({max(10, round(pairs[widest]["analytic_n"][str(x)] * g)) for g in GRID}) for x in deltas}
    total = sum(len(v) for v in grid_of.values()) + 1
    power: dict[str, Any] = {}
    with tqdm(total=total, desc=f"power {widest}", unit="n", disable=quiet) as bar:
        for x in deltas:
            by_n = {}
            for i, n in enumerate(grid_of[x]):
                by_n[n] = empirical_power(scores[a], scores[b], n, x, resamples=resamples, permutations=permutations,
                                          seed=seed + i)
                bar.update()
            power[str(x)] = {"analytic_n": pairs[widest]["analytic_n"][str(x)],
                             "power_by_n": {str(n): p for n, p in by_n.items()},
                             "smallest_n_reaching_80": smallest_n(by_n)}
        n0 = pairs[widest]["analytic_n"][str(deltas[len(deltas) // 2])]
        size = empirical_power(scores[a], scores[b], n0, 0.0, resamples=resamples, permutations=permutations,
                               seed=seed + 99)
        bar.update()
    return {"pairs": pairs, "empirical": {"pair": widest, "how": "a shifted by a constant to mean(a - b) = delta",
                                          "by_delta": power, "size_at_delta_0": {"n": n0, "rejection_rate": size}}}


def plan_goal_n(requests_iid: int, icc: float, per_sample: float, held_out_tools: int, floor: int,
                cap: int) -> dict[str, Any]:
    """The smallest goal-style requests per tool ``goal_n`` in ``floor .. cap`` with which every one of
    ``held_out_tools`` gives enough selection requests: ``held_out_tools * goal_n * per_sample >=
    requests_iid * design_effect(icc, goal_n)`` (``reachable`` false, and ``goal_n`` the cap, where none does)."""
    for m in range(max(floor, 1), cap + 1):
        need = math.ceil(requests_iid * design_effect(icc, m))
        if held_out_tools * m * per_sample >= need:
            return {"goal_n": m, "requests_needed": need, "requests": round(held_out_tools * m * per_sample),
                    "reachable": True}
    return {"goal_n": cap, "requests_needed": math.ceil(requests_iid * design_effect(icc, cap)),
            "requests": round(held_out_tools * cap * per_sample), "reachable": False}


def gap_resolved(sigma_d: float, requests: int, icc: float, per_tool: float) -> float:
    """The gap ``requests`` selection requests (``per_tool`` of each tool) detect with 80 % power."""
    return detectable_gap(sigma_d, max(requests, 1)) * math.sqrt(design_effect(icc, per_tool))


def recommend(catalogues: dict[str, Any], budgets: dict[str, Any], cap: int, holdout: float,
              select_target: int, throughput: float) -> dict[str, Any]:
    """Per budget (its gap, :data:`BUDGET_GAPS`): the selection requests the gap needs at the planning
    ``sigma_d`` (the largest over the catalogues' widest pairs) for independent requests and with ``goal_n`` of
    each tool (the design effect at the planning ICC), the ``(goal_tools, goal_n)`` it implies, and per
    catalogue what today's budget gives (requests, the gap resolved) against what it would need and what the
    proposal gives (``throughput``: goal-style samples per second, for its generation time)."""
    from toolret.adapt.run import goal_requests_per_tool

    measured = {k: c for k, c in catalogues.items() if "pairs" in c}
    widest = {k: c["pairs"][c["empirical"]["pair"]] for k, c in measured.items()}
    sigma_plan = max(p["sigma_d"] for p in widest.values())
    sigma_median = statistics.median(p["sigma_d"] for p in widest.values())
    icc_plan = max(0.0, statistics.median(p["icc_implied"] for p in widest.values()))
    per_sample = {k: c["n_requests"] / (c["goal_tools"] * c["goal_n"]) for k, c in measured.items()}
    r_plan = min(per_sample.values())
    out: dict[str, Any] = {
        "sigma_d_plan": sigma_plan,
        "sigma_d_plan_is": "the largest over the catalogues of each one's widest pair (the pair of its largest "
                           "sigma_d): a default must hold on a catalogue nobody measured, and the median "
                           "would leave half of these four under-powered",
        "sigma_d_median": sigma_median, "icc_plan": round(icc_plan, 4),
        "icc_plan_is": "the median over the catalogues of the widest pair's ICC implied by its cluster-robust "
                       "design effect (clusters: a request's first gold tool)",
        "selection_requests_per_requested_sample": {k: round(v, 3) for k, v in per_sample.items()},
        "per_sample_plan": round(r_plan, 3),
        "per_sample_plan_is": "the smallest (a catalogue whose tools compose no multi-tool request: MetaTool); "
                              "composed requests reuse the single ones' texts, so counting them as new requests "
                              "overstates what they add",
        "generation_throughput_samples_per_s": throughput, "budgets": {}}
    for budget, gap in BUDGET_GAPS.items():
        cur = budgets[budget]
        n_iid = analytic_n(sigma_plan, gap)
        need_at_floor = math.ceil(n_iid * design_effect(icc_plan, cur["goal_n"]))
        rows = {}
        for k, c in measured.items():
            held = c["held_out_tools"]
            tools_now = min(cur["goal_tools"], held)
            n_now = goal_requests_per_tool(tools_now, cur["goal_n"], select_target, cap)
            requests_now = round(tools_now * n_now * per_sample[k])
            plan = plan_goal_n(n_iid, icc_plan, per_sample[k], held, cur["goal_n"], cap)
            rows[k] = {"tools": c["tools"], "held_out_tools": held,
                       "today": {"goal_tools": tools_now, "goal_n": n_now, "selection_requests": requests_now,
                                 "gap_resolved": round(gap_resolved(sigma_plan, requests_now, icc_plan, n_now), 4),
                                 "gap_resolved_own_sigma": round(gap_resolved(widest[k]["sigma_d"], requests_now,
                                                                              icc_plan, n_now), 4)},
                       "needed": {"goal_tools": held, **plan},
                       "gap_resolved_at_most": round(gap_resolved(sigma_plan, round(held * cap * per_sample[k]),
                                                                  icc_plan, cap), 4)}
        tools_needed = math.ceil(need_at_floor / (cur["goal_n"] * r_plan))
        proposal = {"goal_n": cur["goal_n"], "goal_tools": tools_needed, "select_target": need_at_floor}
        for k, row in rows.items():
            tools_new = min(tools_needed, row["held_out_tools"])
            n_new = goal_requests_per_tool(tools_new, cur["goal_n"], need_at_floor, cap)
            requests_new = round(tools_new * n_new * per_sample[k])
            row["with_proposal"] = {"goal_tools": tools_new, "goal_n": n_new, "selection_requests": requests_new,
                                    "gap_resolved": round(gap_resolved(sigma_plan, requests_new, icc_plan, n_new), 4),
                                    "generation_minutes": round(tools_new * n_new / throughput / 60, 1)}
        out["budgets"][budget] = {
            "proposal": proposal,
            "proposal_is": "goal_n kept (the floor), goal_tools for select_target selection requests at it, "
                           "select_target in place of SELECT_TARGET (goal_requests_per_tool raises goal_n up to "
                           "GOAL_MAX_PER_TOOL on catalogues with fewer held-out tools)",
            "generation_minutes_at_most": round(tools_needed * cur["goal_n"] / throughput / 60, 1),
            "gap": gap, "requests_needed_independent": n_iid,
            "requests_needed_independent_median_sigma": analytic_n(sigma_median, gap),
            "requests_needed_at_budget_goal_n": need_at_floor,
            "goal_tools_needed_at_budget_goal_n": tools_needed,
            "smallest_catalogue_that_reaches_it": math.ceil(
                math.ceil(n_iid * design_effect(icc_plan, cap)) / (cap * r_plan) / holdout),
            "catalogues": rows}
    return out


def reproduction(catalogue: dict[str, Any]) -> dict[str, Any] | None:
    """The rebuilt selection against the committed adapt record: the number of requests and each candidate's
    mean (equal: within rounding). A candidate that differs while the count and the others match scored the
    same requests with code changed since the record was written."""
    committed = catalogue.get("committed")
    if not committed:
        return None
    cands = {c: {"rebuilt": catalogue["means"][c], "committed": v, "equal": abs(catalogue["means"][c] - v) < 6e-5}
             for c, v in committed["means"].items()}
    same_n = committed["n"] == catalogue["n_requests"]
    out = {"same_number_of_requests": same_n, "candidates": cands,
           "all_equal": same_n and all(x["equal"] for x in cands.values())}
    equal, differ = [c for c, x in cands.items() if x["equal"]], [c for c, x in cands.items() if not x["equal"]]
    if same_n and equal and differ:
        out["note"] = (f"the count and {', '.join(equal)} equal the record's, so the requests are the same; "
                       f"{', '.join(differ)} differ by at most "
                       f"{max(abs(cands[c]['rebuilt'] - cands[c]['committed']) for c in differ):.4f}: their code "
                       "changed after the record was written")
    return out


def derive(record: dict[str, Any]) -> None:
    """The record's derived parts, from its ``catalogues``: each one's reproduction check, the recommendation."""
    from toolret.adapt.candidates import BUDGETS
    from toolret.adapt.run import GOAL_MAX_PER_TOOL, SELECT_TARGET
    from toolret.adapt.synthetic import DEFAULT_THROUGHPUT, HOLDOUT

    from toolret.config import load_params

    catalogues = record["catalogues"]
    for c in catalogues.values():
        if "pairs" in c:
            c.pop("reproduces_committed", None)
            c["reproduction"] = reproduction(c)
    throughput = DEFAULT_THROUGHPUT.get(load_params().adapt.llm_model, 1.0)
    record["recommendation"] = recommend(catalogues, BUDGETS, GOAL_MAX_PER_TOOL, HOLDOUT, SELECT_TARGET,
                                         throughput) if any("pairs" in c for c in catalogues.values()) else None


# ----------------------------------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--budget", default="fast", help="the budget the committed runs used (their shards)")
    parser.add_argument("--deltas", default="0.02,0.03,0.05")
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--permutations", type=int, default=1000,
                        help="sign flips per paired test in the power check (adapt's test uses 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "adapt_selection_power.json"))
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--rederive", metavar="RECORD",
                        help="only re-derive the reproduction checks and the recommendation from RECORD's stored "
                             "catalogues (no retrieval, no resampling); written to --out")
    args = parser.parse_args(argv)
    args.delta_list = sorted(float(x) for x in args.deltas.split(","))
    if any(x <= 0 for x in args.delta_list) or args.resamples < 1 or args.permutations < 1:
        parser.error("deltas, --resamples and --permutations must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    t_start = time.perf_counter()
    args = parse_args(argv)
    from toolret.adapt.candidates import BUDGETS
    from toolret.adapt.run import GOAL_MAX_PER_TOOL, SELECT_TARGET
    from toolret.adapt.synthetic import HOLDOUT
    from toolret.atomic import write_json
    from toolret.config import load_params

    if args.rederive:
        import json

        record = json.loads(Path(args.rederive).read_text(encoding="utf-8"))
        derive(record)
        record["rederived"] = {"command": " ".join(["python benchmarks/adapt_selection_power.py",
                                                    *(sys.argv[1:] if argv is None else argv)]),
                               "what": "the reproduction checks and the recommendation, from the stored catalogues"}
        write_json(Path(args.out), record)
        print(f"written {args.out}", file=sys.stderr)
        return 0
    params = load_params()
    catalogues: dict[str, Any] = {}
    for dataset in args.datasets:
        with tempfile.TemporaryDirectory(prefix=f"adapt-power-{dataset}-") as tmp:
            data = selection_scores(dataset, Path(tmp), params, args.budget, args.quiet)
        if "skipped" in data:
            catalogues[dataset] = data
            print(f"{dataset}: skipped: {data['skipped']}", file=sys.stderr)
            continue
        committed = committed_selection(dataset)
        analysis = analyse(data, args.delta_list, args.resamples, args.permutations, args.quiet, args.seed)
        n_req = len(data["query_ids"])
        catalogues[dataset] = {
            "tools": data["tools"], "holdout_unit": data["holdout_unit"], "held_out_tools": data["held_out_tools"],
            "goal_tools": data["goal_tools"], "goal_n": data["goal_n"], "split": data["split"],
            "selection_split": data["selection_split"], "n_requests": n_req,
            "n_single_tool_requests": sum(len(g) == 1 for g in data["gold"].values()),
            "means": data["means"], "committed": committed, **analysis, "seconds": data["seconds"]}
        c = catalogues[dataset]
        print(f"{dataset}: {n_req} requests; " + "; ".join(
            f"{k} diff {p['mean_diff']:+.4f} sigma_d {p['sigma_d']:.3f} n(0.02/0.03/0.05) "
            + "/".join(str(p['analytic_n'][str(x)]) for x in args.delta_list) for k, p in c["pairs"].items())
            + f"; committed record reproduced: {(reproduction(c) or {}).get('all_equal')}", file=sys.stderr, flush=True)
    record = {
        "command": " ".join(["python benchmarks/adapt_selection_power.py", *(sys.argv[1:] if argv is None else argv)]),
        "settings": {"datasets": args.datasets, "budget_of_the_shards": args.budget, "deltas": args.delta_list,
                     "alpha": ALPHA, "power": POWER, "metric": METRIC, "candidates": list(CANDIDATES),
                     "pairs": [f"{a} - {b}" for a, b in PAIRS], "seed": SEED, "resample_seed": args.seed,
                     "resamples": args.resamples, "permutations": args.permutations, "grid": list(GRID),
                     "budgets_now": {k: {x: v[x] for x in ("goal_n", "goal_tools")} for k, v in BUDGETS.items()},
                     "holdout": HOLDOUT, "select_target": SELECT_TARGET, "goal_max_per_tool": GOAL_MAX_PER_TOOL,
                     "budget_gaps": BUDGET_GAPS,
                     "analytic_n": "ceil(((z_0.975 + z_0.8) * sigma_d / delta) ** 2), scipy.stats.norm",
                     "empirical": "per catalogue, its pair with the largest sigma_d: side a shifted by a constant to "
                                  "mean(a - b) = delta; n requests drawn with replacement `resamples` times; power = "
                                  "share with toolret.metrics.paired_test (randomization, `permutations` flips, "
                                  "seed 13) p < alpha; n on the grid (multiples of the analytic n)"},
        "catalogues": catalogues,
        "seconds": round(time.perf_counter() - t_start, 1),
        "machine": {"cpus": len(os.sched_getaffinity(0)), "platform": platform.platform(),
                    "python": platform.python_version(), "load_average_at_end": os.getloadavg()},
    }
    derive(record)
    write_json(Path(args.out), record)
    print(f"written {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
