"""``adapt``: a trained, selected, registered and servable retriever for any catalog of tools.

1. requests written by an LLM from the tool documents (:mod:`toolret.adapt.synthetic`: resumable shards,
   held-out tools so that dev measures unseen ones): single-tool ones per tool, multi-tool ones per group of
   related tools, goal-style ones of held-out tools;
2. the candidates of :mod:`toolret.adapt.candidates` built, trained and measured on the synthetic dev split;
3. the champion: the best on dev's goal-style requests of held-out tools (``SELECT_SUBSET``, ``SELECT_METRIC``;
   at least ``SELECT_TARGET`` of them asked for, :func:`goal_requests_per_tool`;
   all of dev where a catalog has fewer than ``MIN_SELECT`` of them), a fused candidate preferred to a
   single-side best it ties with (:func:`choose_champion`); a trained candidate must beat the best untrained
   one with a paired p < 0.05 there, else the best untrained one stays champion and the report says so;
   With a ``toolret feedback`` folder (``feedback``), its held-out queries choose instead where there are at
   least ``MIN_FEEDBACK_QUERIES`` (:mod:`toolret.adapt.feedback_selection`), and its training positives are
   trained on with the synthetic requests (dense-ft weighted by inverse propensity, dense-ft-plain not);
4. with labelled queries (``queries``): every candidate's served index scored on them, with 95% CIs and a
   paired test against bm25 / dense / hybrid -- reported, never used for the choice;
5. the champion's index written to ``<out>/champion`` (replaced atomically: a half-built champion is never
   there) with its model card (``model_card.json``, ``MODEL_CARD.md``), logged to MLflow and registered with
   the alias ``champion`` -- or, where the registry already holds a champion of the catalog, to
   ``<out>/challenger`` with the alias ``challenger`` (:mod:`toolret.adapt.champions`; ``toolret promote``
   decides).

Re-adapting a changed catalog reuses every generation of an unchanged tool (same prompt, same shard) and,
while the catalog changed by at most ``REUSE_FRACTION`` of its tools, the trained adapter (the new tools are
unseen tools for it, which is what dev measures); the report counts what was generated and what was retrained.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from toolret.adapt.champions import CHALLENGER, CHAMPION, model_name, role_for
from toolret.adapt.candidates import BASELINES, BUDGETS, UNTRAINED, candidates, with_weight_of
from toolret.adapt.feedback_selection import feedback_selection
from toolret.adapt.synthetic import (GOAL_JOB, HOLDOUT, GeneratorSpec, generate, generate_multi, goal_tools,
                                     holdout_units, multi_groups, split_queries)
from toolret.adapt.user_catalog import catalog_fingerprint, load_tools, tool_fingerprints
from toolret.atomic import atomic_directory, write_json
from toolret.catalog.importers.queries import read_queries
from toolret.catalog.model import Catalog
from toolret.config import load_params
from toolret.errors import AdaptInputError
from toolret.evaluation import evaluate_retriever
from toolret.feedback.labelled_set import HELD_OUT, held_out_catalog, load_feedback, with_feedback
from toolret.metrics import paired_test
from toolret.paths import portable_path, project_dir
from toolret.roles import Corpus
from toolret.tracking import get_client, get_or_create_experiment
from toolret.tracking.store import default_tracking_uri, missing_local_store

SELECT_METRIC = "ndcg@5"
SELECT_SUBSET = "goal"  # the dev requests the champion is chosen on (toolret.adapt.synthetic)
MIN_SELECT = 30  # fewer requests of SELECT_SUBSET than this: the choice reads all of dev
# goal-style requests asked for in all, at least: more per held-out tool where few tools are held out (up to
# GOAL_MAX_PER_TOOL each), since a paired test on a few dozen requests rarely tells candidates apart
SELECT_TARGET = 100
GOAL_MAX_PER_TOOL = 10
KS = (1, 3, 5, 10)
ALPHA = 0.05
REUSE_FRACTION = 0.1  # re-adapt: keep the trained adapter while at most this fraction of tools changed
CARD = "model_card.json"
# labelled results also paired-tested against: the propensity-weighted dense-ft against the plain one (feedback)
PAIRED_WITH = {"dense-ft": ("dense-ft-plain",)}
EXPERIMENT = "toolret-adapt"


def evaluate_pipeline(pipeline, catalog, split: str, name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The summary of ``pipeline`` on ``split`` and its per-query scores by metric (``"query_id"``: their ids)."""

    result, rows = evaluate_retriever(pipeline, catalog, method=name, docs="original", ks=KS, k_max=max(KS),
                                      split=split, bootstrap_samples=1000, seed=13, measure_latency=False)
    per_query = {m: np.array([r[m] for r in rows]) for m in ("ndcg@5", "recall@5", "comp@5") if rows and m in rows[0]}
    per_query["query_id"] = np.array([r["query_id"] for r in rows])
    summary = {"metrics": {m: round(v, 4) for m, v in result["metrics"].items()},
               "ci95": {m: [round(x, 4) for x in v] for m, v in result["ci95"].items()},
               "n_queries": result["n_queries"]}
    subsets = (catalog.provenance or {}).get("dev_subsets")
    if split == "dev" and subsets:
        summary["by_subset"] = dev_breakdown(rows, subsets)
    return summary, per_query


def dev_breakdown(rows: list[dict[str, Any]], subsets: dict[str, str],
                  metrics: tuple[str, ...] = ("ndcg@5", "recall@5")) -> dict[str, dict[str, Any]]:
    """Per dev subset (requests of trained tools ``seen``, of held-out tools ``unseen``, composed ``multi``),
    the count and the mean of each of ``metrics`` over its per-query ``rows``: where a dev verdict comes from.

    Raises:
        AdaptInputError: a row's query has no subset (the rows are not of this synthetic dev split).
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["query_id"] not in subsets:
            raise AdaptInputError(f"dev query {r['query_id']!r} has no subset in the synthetic catalog")
        groups.setdefault(subsets[r["query_id"]], []).append(r)
    return {name: {"n": len(g), **{m: round(float(np.mean([r[m] for r in g])), 4) for m in metrics}}
            for name, g in sorted(groups.items())}


def _paired(a: np.ndarray, b: np.ndarray) -> float:
    return round(float(paired_test(a, b, method="randomization", seed=13)["p_value"]), 4)


def goal_requests_per_tool(n_goal_tools: int, budget_n: int, target: int = SELECT_TARGET,
                           cap: int = GOAL_MAX_PER_TOOL) -> int:
    """Goal-style requests to write per held-out tool: the budget's ``budget_n``, or more where ``n_goal_tools``
    of them would give fewer than ``target`` in all (at most ``cap`` per tool)."""
    if n_goal_tools <= 0:
        return budget_n
    return max(budget_n, min(cap, -(-target // n_goal_tools)))


def selection_queries(subsets: dict[str, str], subset: str = SELECT_SUBSET,
                      minimum: int | None = None) -> tuple[set[str] | None, str]:
    """The dev query ids the champion is chosen on: those of ``subset`` where there are at least ``minimum``
    (default :data:`MIN_SELECT`; else ``None``: all of dev), and the split's description for the report."""
    minimum = MIN_SELECT if minimum is None else minimum
    ids = {q for q, s in subsets.items() if s == subset}
    if len(ids) >= minimum:
        return ids, f"synthetic dev, {subset}-style requests of held-out tools ({len(ids)})"
    return None, (f"synthetic dev, all {len(subsets)} requests (only {len(ids)} {subset}-style ones, "
                  f"fewer than {minimum})")


def expansion_requests(synthetic, per_tool: list[list[str]], goal_selection: bool) -> list[list[str]]:
    """What the expansion candidates expand each tool with while measured on dev: choosing on the goal-style
    requests (which no index holds), every request, as served -- a tool added later is expanded when
    re-adapted while the adapter is not retrained for it, as a held-out tool here; choosing on all of dev, the
    train split's single-tool requests only (a held-out tool keeps its plain document)."""
    if goal_selection:
        return per_tool
    return [[q.text for q in synthetic.queries if q.split == "train" and synthetic.gold(q.id) == {t.id}]
            for t in synthetic.tools]


def restrict(per_query: dict[str, np.ndarray], ids: set[str] | None) -> dict[str, np.ndarray]:
    """``per_query`` (:func:`_evaluate`'s) on the queries ``ids`` only (``None``: all)."""
    if ids is None:
        return per_query
    keep = np.array([q in ids for q in per_query["query_id"]], dtype=bool)
    return {m: v[keep] for m, v in per_query.items()}


def choose_champion(per_query: dict[str, dict[str, np.ndarray]], kinds: dict[str, str],
                    metric: str = SELECT_METRIC, fused: frozenset[str] | set[str] = frozenset(),
                    on: str = "dev") -> tuple[str, str]:
    """``(champion, why)`` from per-query scores of the selection queries only (``on``: what they are, for
    the reasons: synthetic ``dev``, or the held-out feedback).

    1. The best candidate by mean ``metric``; where it has one side only and a trained or expanded ``fused``
       candidate (a lexical and a dense side) is not worse than it with paired p < :data:`ALPHA` and passes 2.,
       the best such fused candidate instead (an untrained one is 2.'s to weigh, as the best untrained):
       requests an LLM wrote can teach a single encoder their own phrasing in ways no synthetic dev shows,
       and an untrained BM25 side bounds what that costs on real requests (BEIR: BM25 is the robust one out
       of domain). On ToolLens, dense-ft alone led the goal-style dev requests by 0.001
       over hybrid-exp-ft and scored below the untrained dense on the real queries.
    2. A trained (or expanded) pick must beat the best untrained candidate with paired p < :data:`ALPHA`,
       else the best untrained one stays champion.
    """
    score = {n: round(float(np.mean(per_query[n][metric])), 4) for n in per_query}
    order = list(score)

    def top(names):
        return max(names, key=lambda n: (score[n], -order.index(n)))

    best = top(score)
    best_untrained = top([n for n in score if kinds[n] == "untrained"])

    def passes(n: str) -> bool:
        return kinds[n] == "untrained" or _paired(per_query[n][metric], per_query[best_untrained][metric]) < ALPHA

    pick, how = best, f"{best} is the best on {on} ({metric} {score[best]:.3f})"
    if best not in fused:
        tied = [n for n in fused if n in score and kinds[n] != "untrained" and passes(n)
                and _paired(per_query[n][metric], per_query[best][metric]) >= ALPHA]
        if tied:
            pick = top(tied)
            how = (f"{pick} ({score[pick]:.3f}) is not worse on {on} than the best single-side {best} "
                   f"({score[best]:.3f}, paired p {_paired(per_query[pick][metric], per_query[best][metric])}): "
                   f"the fused one is kept")
    if kinds[pick] == "untrained":
        return pick, f"{how}; no trained candidate beats it" if pick == best else how
    p = _paired(per_query[pick][metric], per_query[best_untrained][metric])
    if p < ALPHA:
        return pick, (f"{how}; it beats the best untrained {best_untrained} ({metric} {score[pick]:.3f} vs "
                      f"{score[best_untrained]:.3f}, paired p {p})")
    return best_untrained, (f"nothing trained helps significantly: {pick} {score[pick]:.3f} vs "
                            f"{best_untrained} {score[best_untrained]:.3f} on {on} (paired p {p}); "
                            f"the untrained {best_untrained} stays champion")


def restrict_candidates(pool: list[Any], only: list[str] | tuple[str, ...] | None) -> list[Any]:
    """The candidates of ``pool`` named in ``only`` (``None``: all), in the pool's order. A name that is not a
    candidate here is ignored where it is one with feedback only (``dense-ft-plain``).

    Raises:
        AdaptInputError: an unknown name, no untrained candidate kept (the choice needs one), or a fused
            candidate kept without the candidate whose weight it takes (``weight_from``).
    """
    if only is None:
        return pool
    names = {c.name for c in pool}
    unknown = sorted(set(only) - names - {"dense-ft-plain"})
    if unknown:
        raise AdaptInputError(f"candidates {unknown}: not adapt candidates (known: {sorted(names)})")
    kept = [c for c in pool if c.name in set(only)]
    if not any(c.kind == "untrained" for c in kept):
        raise AdaptInputError(f"candidates {list(only)}: keep at least one untrained one {list(UNTRAINED)}")
    missing = sorted({c.weight_from for c in kept if c.weight_from and c.weight_from not in set(only)})
    if missing:
        raise AdaptInputError(f"candidates {list(only)}: the fused ones take their weight from {missing}: keep it")
    return kept


def _labelled(path: str | Path, tools) -> Any:
    queries, qrels = read_queries(path, tools.tool_ids)
    return Catalog(f"{tools.name}-labelled", list(tools.tools), queries, qrels, {"purpose": "evaluation"})


def _previous(out: Path) -> dict[str, Any] | None:
    card = out / "champion" / CARD
    return json.loads(card.read_text(encoding="utf-8")) if card.is_file() else None


def adapt(catalog_dir: str | Path, out: str | Path, *, queries: str | Path | None = None, budget: str | None = None,
          generator: GeneratorSpec | None = None, n: int | None = None, params: Any = None, llm: Any = None,
          seed: int = 13, finetune_overrides: dict[str, Any] | None = None, register: bool = True,
          tracking_uri: str | None = None, retrain: bool = False, shard_prompts: int = 50,
          feedback: str | Path | None = None, only: list[str] | tuple[str, ...] | None = None,
          say=print) -> dict[str, Any]:
    """Adapt a retriever to the catalog at ``catalog_dir``; the champion lands in ``<out>/champion``.

    ``feedback``: a ``toolret feedback`` folder: its training positives are trained on with the synthetic
    requests (dense-ft inverse-propensity weighted, dense-ft-plain unweighted; the adapter is retrained), and
    its held-out queries choose the champion where there are enough (:mod:`toolret.adapt.feedback_selection`).
    ``only``: these candidates only (:func:`restrict_candidates`; e.g. a quick run of ``bm25, dense, dense-ft``).
    ``budget``, ``generator``, ``n``, ``only`` not given and ``finetune_overrides`` under the given ones come
    from ``params.adapt`` (:class:`toolret.config.AdaptSettings`).

    Returns the report (also ``<out>/adapt_report.json`` and the champion's model card).

    Raises:
        AdaptInputError: an empty catalog, duplicate ids, empty documents, a generator that is down or
            returns garbage -- the previous champion is left in place.
    """

    t_start = time.perf_counter()
    params = params or load_params()
    settings = params.adapt
    budget = budget or settings.budget
    if budget not in BUDGETS:
        raise AdaptInputError(f"--budget {budget!r}: choose one of {sorted(BUDGETS)}")
    generator = generator or GeneratorSpec(model=settings.llm_model, base_url=settings.llm_base_url,
                                           engine="openai" if settings.llm_base_url else settings.llm_engine)
    n = n or settings.n or BUDGETS[budget]["n"]
    only = only if only is not None else settings.candidates
    finetune_overrides = {**settings.finetune, **(finetune_overrides or {})}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tools = load_tools(catalog_dir)
    fingerprint = catalog_fingerprint(tools)
    fps = tool_fingerprints(tools)
    labelled = _labelled(queries, tools) if queries else None  # read (and checked) before any cost
    fb = load_feedback(feedback, tools.tool_ids) if feedback else None
    previous = _previous(out)
    changes = _changes(previous, fps)
    say(f"adapt: {tools.name}: {len(tools.tools)} tools (fingerprint {fingerprint[:12]}); "
        + (f"changed since the last adapt: {changes}" if previous else "first adapt"))

    gen = generate(tools, out, n, generator, generator=llm, shard_prompts=shard_prompts, say=say)
    _, held = holdout_units(tools, HOLDOUT, seed)
    goal_ids = goal_tools(tools, held, BUDGETS[budget]["goal_tools"], seed)
    goal = generate(tools, out, goal_requests_per_tool(len(goal_ids), BUDGETS[budget]["goal_n"]), generator,
                    generator=llm, shard_prompts=shard_prompts, say=say, job=GOAL_JOB, only=goal_ids)
    groups = multi_groups(tools, held, BUDGETS[budget]["multi_groups"], seed)
    multi = generate_multi(tools, out, groups, generator, generator=llm, shard_prompts=shard_prompts, say=say)
    synthetic, split_info = split_queries(tools, gen.per_tool, seed=seed, goal=goal.per_tool,
                                          multi=list(zip(groups, multi.per_tool)))
    select_ids, select_split = selection_queries(synthetic.provenance["dev_subsets"])
    if not synthetic.split("train") or not synthetic.split("dev"):
        raise AdaptInputError(f"{tools.name}: too few requests to train and select on ({split_info})")
    as_served = select_ids is not None  # expansion measured with every request, as it is served
    expand_with = expansion_requests(synthetic, gen.per_tool, goal_selection=as_served)

    work = out / "work"
    reuse = fb is None and _reuse_adapter(previous, changes, len(fps), retrain, work)  # feedback: new data
    if not reuse:
        shutil.rmtree(work / "dense-ft", ignore_errors=True)
        shutil.rmtree(work / "dense-ft-plain", ignore_errors=True)
    trained_on = (with_feedback(synthetic, fb, weighted=True), with_feedback(synthetic, fb, weighted=False)) \
        if fb else None
    pool = candidates(tools, params, work, budget, n, finetune_overrides, reuse_adapter=reuse, feedback=trained_on)
    pool = restrict_candidates(pool, only)
    on_feedback, feedback_why = feedback_selection(len(fb.split(HELD_OUT))) if fb else (False, None)
    held_catalog = held_out_catalog(tools, fb) if on_feedback else None
    held_pq: dict[str, dict[str, np.ndarray]] = {}
    kinds = {c.name: c.kind for c in pool}
    dev, dev_pq, pipelines, cost = {}, {}, {}, {}
    for cand in pool:
        t0 = time.perf_counter()
        pipe = cand.build(expand_with)
        if cand.weight_from is not None:
            with_weight_of(pipe, pipelines[cand.weight_from])
        if cand.name == "dense-ft" and reuse:
            say("adapt: dense-ft: the previous adapter is kept (few tools changed; they are unseen tools for it)")
        pipe.fit(synthetic)
        pipe.index(Corpus.from_catalog(tools))
        dev[cand.name], dev_pq[cand.name] = evaluate_pipeline(pipe, synthetic, "dev", cand.name)
        chosen_on = restrict(dev_pq[cand.name], select_ids)
        dev[cand.name]["selection"] = {m: round(float(np.mean(chosen_on[m])), 4) for m in ("ndcg@5", "recall@5")}
        if held_catalog is not None:  # the held-out feedback: in no index, never trained on
            dev[cand.name]["feedback"], held_pq[cand.name] = evaluate_pipeline(pipe, held_catalog, "test", cand.name)
            dev[cand.name]["selection"] = {m: dev[cand.name]["feedback"]["metrics"][m] for m in ("ndcg@5", "recall@5")}
        pipelines[cand.name] = pipe
        cost[cand.name] = round(time.perf_counter() - t0, 1)
        say(f"adapt: {cand.name:14s} dev {SELECT_METRIC} {dev[cand.name]['metrics'][SELECT_METRIC]:.3f}, on the "
            f"selection requests {dev[cand.name]['selection'][SELECT_METRIC]:.3f} ({cost[cand.name]} s)")
    choice_scores = held_pq if on_feedback else {c: restrict(pq, select_ids) for c, pq in dev_pq.items()}
    champion, why = choose_champion(choice_scores, kinds, fused={c.name for c in pool if c.fused},
                                    on="the held-out feedback" if on_feedback else "dev")
    if on_feedback:
        select_split = feedback_why
    elif fb is not None:
        select_split = f"{select_split}; {feedback_why}"
    say(f"adapt: champion {champion}: {why}")

    # served indexes: expansion with every request (dev tools' included; as measured where chosen on goal-style)
    final: dict[str, Any] = {}
    names = list(pipelines) if labelled is not None else [champion]
    for name in names:
        cand = next(c for c in pool if c.name == name)
        if cand.kind == "expansion" and not as_served:
            final[name] = served_expansion(cand, pipelines[name], gen.per_tool, synthetic, tools)
        else:
            final[name] = pipelines[name]
    labelled_results = _score_labelled(final, labelled) if labelled is not None else None

    report = {
        "catalog": {"name": tools.name, "n_tools": len(tools.tools), "fingerprint": fingerprint},
        "budget": budget, "requests_per_tool": n, "generator": gen.model,
        "generation": {"samples": gen.samples_requested, "generated_this_run": gen.samples_generated,
                       "tools_generated_this_run": gen.tools_generated, "seconds": gen.seconds,
                       "samples_per_s": gen.samples_per_s, "unparsed": gen.unparsed,
                       "goal": {"tools": len(goal_ids), "samples": goal.samples_requested,
                                "generated_this_run": goal.samples_generated, "seconds": goal.seconds,
                                "unparsed": goal.unparsed},
                       "multi": {"groups": len(groups), "samples": multi.samples_requested,
                                 "generated_this_run": multi.samples_generated, "seconds": multi.seconds,
                                 "unparsed": multi.unparsed}},
        "training_data": split_info, "changes": changes, "adapter_reused": reuse,
        "feedback": None if fb is None else {
            "folder": fb.folder, "train_queries": len(fb.split("train")),
            "train_pairs": sum(len(fb.weights[q.id]) for q in fb.split("train")),
            "held_out_queries": len(fb.split(HELD_OUT)), "pairs_of_tools_not_in_the_catalog": fb.dropped,
            "chose_the_champion": on_feedback, "why": feedback_why,
            "trained": "dense-ft (and the candidates on it): inverse-propensity weighted (clipped) by replication; "
                       "dense-ft-plain: unweighted"},
        "selection": {"metric": SELECT_METRIC, "split": select_split, "champion": champion, "why": why,
                      "kinds": kinds, "expansion_measured_as_served": as_served,
                      "candidates_only": list(only) if only is not None else None},
        "dev": dev, "labelled": labelled_results, "candidate_seconds": cost,
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    champion_pipe = final[champion]
    champion_pipe.catalog_info = {"name": tools.name, "n_tools": len(tools.tools), "fingerprint": fingerprint}
    role = role_for(get_client(tracking_uri), tools.name) if register else CHAMPION
    report["role"] = role  # the registry alias (and folder) of this adapt's model (toolret.adapt.champions)
    if role == CHALLENGER:
        say(f"adapt: {tools.name} has a registered champion: this model is the challenger "
            f"(toolret promote --catalog {tools.name} decides)")
    with atomic_directory(out / role) as tmp:
        champion_pipe.save(tmp / "index", self_contained=True)  # a later adapt retrains work/ in place
        for item in (tmp / "index").iterdir():  # the champion folder is the servable index itself
            shutil.move(str(item), tmp / item.name)
        (tmp / "index").rmdir()
        write_json(tmp / CARD, {**report, "tool_fingerprints": fps})
        (tmp / "MODEL_CARD.md").write_text(model_card_markdown(report), encoding="utf-8")
    write_json(out / "adapt_report.json", report)
    if register:
        report["mlflow"] = log_and_register(out, report, tracking_uri, role=role)
        write_json(out / "adapt_report.json", report)
    say(f"adapt: {role} {champion} written to {out / role} ({report['seconds']} s in all)")
    return report


def served_expansion(cand, dev_pipe, all_requests, synthetic, tools):
    """An expansion candidate rebuilt with every request (the dev tools' too) for serving. A fused one keeps
    the weight it was chosen with on dev, while its expansion held train requests only: refitted, the dev
    requests now inside the documents would choose the weight for it (the expanded side would look perfect)."""

    pipe = cand.build(all_requests)
    if hasattr(dev_pipe.retriever, "weight") and hasattr(pipe.retriever, "weight"):
        with_weight_of(pipe, dev_pipe)
    pipe.fit(synthetic)
    pipe.index(Corpus.from_catalog(tools))
    return pipe


def _changes(previous: dict[str, Any] | None, fps: dict[str, str]) -> dict[str, int]:
    if not previous:
        return {"added": len(fps), "removed": 0, "changed": 0, "unchanged": 0}
    old = previous.get("tool_fingerprints") or {}
    return {"added": sum(1 for t in fps if t not in old), "removed": sum(1 for t in old if t not in fps),
            "changed": sum(1 for t in fps if t in old and old[t] != fps[t]),
            "unchanged": sum(1 for t in fps if old.get(t) == fps[t])}


def _reuse_adapter(previous, changes: dict[str, int], n_tools: int, retrain: bool, work: Path) -> bool:
    moved = changes["added"] + changes["removed"] + changes["changed"]
    return (bool(previous) and not retrain and (work / "dense-ft" / "model").is_dir()
            and moved <= REUSE_FRACTION * max(n_tools, 1))


def _score_labelled(final: dict[str, Any], labelled) -> dict[str, Any]:
    results, pq = {}, {}
    for name, pipe in final.items():
        results[name], pq[name] = evaluate_pipeline(pipe, labelled, "test", name)
    for name in results:
        against = (*BASELINES, *PAIRED_WITH.get(name, ()))
        results[name]["vs"] = {b: {m: _paired(pq[name][m], pq[b][m]) for m in pq[name] if m != "query_id"}
                               for b in against if b in pq and b != name}
    return results


def model_card_markdown(report: dict[str, Any]) -> str:
    """The champion's card: what it is for, what it was trained on, how it was chosen, what it scores."""
    c, sel = report["catalog"], report["selection"]
    lines = [f"# {c['name']}: {sel['champion']}", "",
             f"Tool retriever adapted by `toolret adapt` to {c['n_tools']} tools (catalog fingerprint "
             f"`{c['fingerprint'][:16]}`), budget `{report['budget']}`.", "",
             f"**Chosen on** {sel['split']} ({sel['metric']}): {sel['why']}.", "",
             *([f"**Feedback** ({report['feedback']['folder']}): {report['feedback']['train_queries']} agents' "
                f"queries trained on, {report['feedback']['held_out_queries']} held out; "
                f"{report['feedback']['why']}.", ""] if report.get("feedback") else []),
             f"**Training data**: {report['requests_per_tool']} requests per tool written by "
             f"`{report['generator'].get('model')}` ({report['generator'].get('engine')}); "
             + ", ".join(f"{k} {v}" for k, v in report["training_data"].items()) + ".", "",
             f"**Cost**: {report['seconds']} s in all; generation {report['generation']['seconds']} s for "
             f"{report['generation']['generated_this_run']} new samples.", "",
             "| candidate | kind | selection ndcg@5 | dev ndcg@5 [95% CI] | dev recall@5 |" + (" labelled ndcg@5 [95% CI] | labelled recall@5 | p vs bm25 / dense / hybrid |" if report.get("labelled") else ""),
             "|---|---|---|---|---|" + ("---|---|---|" if report.get("labelled") else "")]
    for name, r in report["dev"].items():
        ci = r["ci95"]["ndcg@5"]
        row = f"| {name}{' (champion)' if name == sel['champion'] else ''} | {sel['kinds'][name]} | " \
              f"{r['selection']['ndcg@5']:.3f} | " \
              f"{r['metrics']['ndcg@5']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | {r['metrics']['recall@5']:.3f} |"
        lab = (report.get("labelled") or {}).get(name)
        if lab:
            ci = lab["ci95"]["ndcg@5"]
            ps = " / ".join(str(lab["vs"].get(b, {}).get("ndcg@5", "-")) for b in BASELINES)
            row += f" {lab['metrics']['ndcg@5']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | {lab['metrics']['recall@5']:.3f} | {ps} |"
        lines.append(row)
    if sel.get("expansion_measured_as_served"):
        lines += ["", "The expansion candidates were measured as served (their documents expanded with every "
                      "request): their dev columns include requests their documents hold; the selection column "
                      "(goal-style requests, in no index) is the one the choice reads."]
    if report.get("labelled"):
        lines += ["", "Labelled queries were scored only: never used for training or for the choice."]
    return "\n".join(lines) + "\n"


def log_and_register(out: Path, report: dict[str, Any], tracking_uri: str | None = None,
                     role: str = CHAMPION) -> dict[str, Any]:
    """An MLflow run of the adapt (params, dev and labelled metrics, the card) and a registered model
    version of the model in ``<out>/<role>`` with the alias ``role`` (``champion``, or ``challenger`` while
    a champion exists: :mod:`toolret.adapt.champions`), linked to the run."""

    client = get_client(tracking_uri, project_dir())  # the store resolve_index looks in
    exp = get_or_create_experiment(client, EXPERIMENT)
    name = report["catalog"]["name"]
    run = client.create_run(exp, run_name=f"{name}/adapt", tags={"toolret.catalog": name,
                                                                 "toolret.champion": report["selection"]["champion"]})
    rid = run.info.run_id
    for k, v in {"budget": report["budget"], "requests_per_tool": report["requests_per_tool"],
                 "generator": report["generator"].get("model"), "champion": report["selection"]["champion"],
                 "fingerprint": report["catalog"]["fingerprint"][:16],
                 "n_tools": report["catalog"]["n_tools"]}.items():
        client.log_param(rid, k, v)
    for cand, r in report["dev"].items():
        for m in ("ndcg@5", "recall@5"):
            client.log_metric(rid, f"dev_{m.replace('@', '_at_')}/{cand}", r["metrics"][m])
    for cand, r in (report.get("labelled") or {}).items():
        for m in ("ndcg@5", "recall@5"):
            client.log_metric(rid, f"labelled_{m.replace('@', '_at_')}/{cand}", r["metrics"][m])
    client.log_metric(rid, "seconds", report["seconds"])
    client.log_param(rid, "role", role)
    client.log_artifact(rid, str(out / role / "MODEL_CARD.md"))
    client.set_terminated(rid)
    from mlflow.exceptions import MlflowException

    model = model_name(name)
    try:
        client.get_registered_model(model)
    except MlflowException:
        client.create_registered_model(model, description=f"`toolret adapt` champions of the catalog {name}")
    source = portable_path(str((out / role).resolve()))
    mv = client.create_model_version(model, source=source, run_id=rid,
                                     description=(out / role / "MODEL_CARD.md").read_text(encoding="utf-8"),
                                     tags={"fingerprint": report["catalog"]["fingerprint"][:16],
                                           "candidate": report["selection"]["champion"], "role": role})
    client.set_registered_model_alias(model, role, mv.version)
    return {"run_id": rid, "model": model, "version": str(mv.version), "uri": f"models:/{model}@{role}",
            "role": role}


def resolve_index(ref: str, tracking_uri: str | None = None) -> str:
    """A served index folder from a path or a registry URI ``models:/<name>@<alias>`` / ``models:/<name>/<v>``."""
    if not ref.startswith("models:/"):
        return ref

    uri = tracking_uri or default_tracking_uri(project_dir(), create=False)  # a lookup never makes a store
    missing = missing_local_store(uri)
    if missing is not None:
        raise AdaptInputError(f"{ref}: no MLflow store at {missing} (nothing registered there yet: run `toolret "
                              "adapt` first, or set MLFLOW_TRACKING_URI to the store that has it)")
    client = get_client(uri)
    body = ref[len("models:/"):]
    if "@" in body:
        name, alias = body.split("@", 1)
        mv = client.get_model_version_by_alias(name, alias)
    else:
        name, version = body.rsplit("/", 1)
        mv = client.get_model_version(name, version)
    source = Path(mv.source)
    return str(source if source.is_absolute() else project_dir() / source)


__all__ = ["ALPHA", "CARD", "EXPERIMENT", "MIN_SELECT", "SELECT_METRIC", "SELECT_SUBSET", "SELECT_TARGET", "adapt",
           "choose_champion", "dev_breakdown", "evaluate_pipeline", "expansion_requests", "goal_requests_per_tool",
           "log_and_register", "model_card_markdown", "resolve_index", "restrict", "restrict_candidates",
           "selection_queries"]
