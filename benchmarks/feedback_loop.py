"""The learning loop under simulated traffic (issue 79): does a retriever served by the gateway get better as
agents use it?

A catalogue's tools are offered by an MCP server (``benchmarks/mcp_catalog_server.py`` over stdio, each tool
``{name, description: its document, inputSchema}``), and the gateway's own conversion of them
(:func:`toolret.gateway.tool_index.gateway_tool`) is the catalogue ``toolret adapt`` adapts, as ``toolret
import-mcp`` would give it: the served documents and the adapted ones are the same (so the numbers are not
those of docs/ADAPT.md, which adapt the curated documents). Then, round after round:

0. ``adapt`` (no feedback) makes the first champion;
1. the champion serves the next searches through :class:`toolret.gateway.Gateway` (its tool index, its
   :class:`~toolret.gateway.explore.Explorer` with ``--explore``, its :class:`~toolret.gateway.receipts.ReceiptLog`
   writing the receipts; calls forwarded to the server): the traffic is the catalogue's non-test queries
   (train, and dev if any; a query whose text is also a test query's is left out), in a seeded random
   order (a new shuffle per pass), in sessions of ``--session-searches`` consecutive searches;
2. the agent is a position-biased click model: it examines the tool shown at rank ``r`` with probability
   ``(1 / r) ** eta``, calls an examined gold tool with probability ``c_pos`` and an examined other one with
   ``c_neg`` (noise);
3. ``toolret feedback`` (:func:`toolret.feedback.query_set.build_feedback`) over all receipts so far, then
   ``toolret adapt --feedback`` (:func:`toolret.adapt.adapt`, the same adapt folder: its generations are
   reused) makes the round's challenger;
4. ``toolret promote``'s rule (:func:`toolret.adapt.promotion.feedback_verdict`): the challenger replaces the
   serving champion only when it beats it on the round's held-out feedback (the newest traffic, never trained
   on) with paired ``p < 0.05``; each decision is an MLflow run in ``<work>/mlflow.db`` and in the record.

Each round's champion is scored on the catalogue's TEST queries (never in traffic: asserted, and every
round's receipts are checked): Recall@5 (and nDCG@5 ...) with bootstrap 95% CIs
(:func:`toolret.evaluation.evaluate_retriever`), with the searches served so far. With ``--compare-bias``
adapt also scores its candidates on the test queries (never used to choose): the propensity-weighted
``dense-ft`` against the plain ``dense-ft-plain`` (paired randomization test, :func:`toolret.metrics.paired_test`).

Resumable: each finished round (receipts, feedback folder, champion, adapt report, metrics:
``<work>/rounds/<i>/``, its ``round.json`` written last) is kept; a rerun with the same settings continues
after the last finished round (an unfinished one is redone from its start), and a larger ``--searches``
adds rounds. The JSON record (``--out``) is rewritten atomically after each round (``complete`` false until
the last).

    python benchmarks/feedback_loop.py --catalog data/curated/toollens --searches 1000,4000,16000 --compare-bias
    python benchmarks/feedback_loop.py --catalog DIR --searches 30 --n 2 --finetune epochs=1,max_train_pairs=64 \\
        --candidates bm25,dense,dense-ft --llm-model smollm2-135m-instruct --out /tmp/loop.json   # a tiny run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_latency import mcp_name  # noqa: E402  (the same valid, unique MCP names as the gateway benchmark)

SERVER_SCRIPT = Path(__file__).resolve().parent / "mcp_catalog_server.py"
SERVER = "catalog"  # the gateway's namespace of the catalogue's tools (ids catalog__<name>)
RESULTS = ROOT / "benchmarks" / "results" / "feedback_loop"
KS = (1, 3, 5, 10)
STATE = "round.json"


# ---------------------------------------------------------------------------------------------- the catalogue
@dataclass
class Setup:
    name: str
    catalog_dir: Path        # the gateway's tools as a catalogue without queries: what adapt reads
    tools_jsonl: Path        # what the MCP server offers
    labelled: Path           # the test queries (gateway ids) for adapt --queries (scored, never chosen on)
    test: Any                # Catalog: the gateway's tools + the test queries
    traffic: list[Any]       # the non-test queries traffic is drawn from
    gold: dict[str, set[str]]  # traffic query id -> gold gateway ids
    test_texts: set[str]
    info: dict[str, Any]


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def prepare(catalog, catalog_ref: str, work: Path, documents: str = "served") -> Setup:
    """The catalogue's tools as the MCP server offers them and the gateway converts them; the test split
    mapped to the gateway's ids; the traffic pool (non-test queries, none with a test query's text).

    ``documents``: what adapt adapts -- ``served``, the gateway's conversion (the documents it indexes);
    ``catalogue``, each tool's own catalogue document under its gateway id (the gateway still indexes the
    served ones), so that the request generations already made for the catalogue answer adapt's prompts."""
    import mcp_types as types

    from toolret.catalog.io import save_catalog
    from toolret.catalog.model import Catalog
    from toolret.catalog.tool_records import tool_record
    from toolret.gateway.gateway import MAX_QUERY_CHARS
    from toolret.gateway.tool_index import gateway_tool

    taken: set[str] = set()
    rows, to_gateway, gateway_tools = [], {}, []
    for tool in catalog.tools:
        name = mcp_name(tool.id, taken)
        schema = tool_record(tool).get("input_schema") or {"type": "object", "properties": {}}
        rows.append({"name": name, "description": tool.text, "inputSchema": schema})
        gt = gateway_tool(SERVER, types.Tool(name=name, description=tool.text, input_schema=schema))
        to_gateway[tool.id] = gt.id
        gateway_tools.append(gt.tool)
    work.mkdir(parents=True, exist_ok=True)
    from toolret.atomic import write_text

    if documents == "catalogue":
        import dataclasses

        adapted = [dataclasses.replace(t, id=to_gateway[t.id]) for t in catalog.tools]
    else:
        adapted = gateway_tools

    tools_jsonl = work / "tools.jsonl"
    write_text(tools_jsonl, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    catalog_dir = save_catalog(Catalog(catalog.name, adapted, [], {},
                                       {"source": f"{catalog_ref} via the gateway's MCP conversion"
                                        + (" (ids; the catalogue's own documents)" if documents == "catalogue" else ""),
                                        "purpose": "serving"}), work / "catalog")

    def gold(qid: str) -> set[str]:
        return {to_gateway[t] for t in catalog.gold(qid) if t in to_gateway}

    tests = [q for q in catalog.split("test") if gold(q.id)]
    if not tests:
        raise SystemExit(f"--catalog {catalog_ref}: no judged test queries to score the champions on")
    test_texts = {_norm(q.text) for q in tests}
    test_ids = {q.id for q in tests}
    candidates = [q for q in catalog.queries if q.split != "test" and gold(q.id)]
    servable = [q for q in candidates if q.text.strip() and len(q.text) <= MAX_QUERY_CHARS]
    traffic = [q for q in servable if _norm(q.text) not in test_texts]
    if {q.id for q in traffic} & test_ids or {_norm(q.text) for q in traffic} & test_texts:
        raise AssertionError("a test query is in the traffic pool")
    if not traffic:
        raise SystemExit(f"--catalog {catalog_ref}: no judged non-test (train / dev) queries to make traffic of")
    test = Catalog(catalog.name, gateway_tools, tests, {q.id: {t: 1 for t in gold(q.id)} for q in tests},
                   {"purpose": "evaluation"})
    labelled = work / "labelled-test.jsonl"
    write_text(labelled, "".join(json.dumps({"_id": q.id, "text": q.text, "gold": sorted(gold(q.id))},
                                            ensure_ascii=False) + "\n" for q in tests))
    splits: dict[str, int] = {}
    for q in traffic:
        splits[q.split] = splits.get(q.split, 0) + 1
    info = {"name": catalog.name, "ref": catalog_ref, "n_tools": len(catalog.tools), "test_queries": len(tests),
            "traffic_pool": len(traffic), "traffic_splits": splits,
            "left_out_same_text_as_a_test_query": len(servable) - len(traffic),
            "left_out_not_servable": len(candidates) - len(servable),
            "documents": "each tool's catalogue document as its MCP description, converted by the gateway "
                         "(tool_index.gateway_tool), which indexes and serves those; adapt adapts "
                         + ("the same documents" if documents == "served" else
                            "each tool's catalogue document under its gateway id (--documents catalogue)")}
    return Setup(catalog.name, catalog_dir, tools_jsonl, labelled, test, traffic,
                 {q.id: gold(q.id) for q in traffic}, test_texts, info)


class Traffic:
    """The ``i``-th search's query: pass ``i // len(pool)`` over the pool, each pass a seeded shuffle."""

    def __init__(self, pool: list[Any], seed: int) -> None:
        self.pool, self.seed, self._orders = pool, seed, {}

    def __getitem__(self, i: int) -> Any:
        n = len(self.pool)
        if i // n not in self._orders:
            order = list(range(n))
            random.Random(f"{self.seed}-traffic-{i // n}").shuffle(order)
            self._orders = {i // n: order}
        return self.pool[self._orders[i // n][i % n]]


# ---------------------------------------------------------------------------------------------- serving
def serve(setup: Setup, champion: Path, start: int, stop: int, log: Path, rnd: int, args) -> dict[str, Any]:
    """Searches ``start .. stop - 1`` served by the gateway over ``champion``; the agent's calls."""
    import anyio
    from tqdm import tqdm

    from toolret.gateway import Gateway
    from toolret.gateway.config import GatewayConfig, ServerConfig

    command = shlex.join([sys.executable, str(SERVER_SCRIPT), str(setup.tools_jsonl)])
    config = GatewayConfig(servers=(ServerConfig(name=SERVER, command=command),), index=str(champion),
                           heartbeat_s=0, relist_s=0, timeout_s=300, explore=args.explore,
                           explore_seed=args.seed * 1000 + rnd)
    rng = random.Random(f"{args.seed}-clicks-{rnd}")
    counts = {"searches": 0, "calls": 0, "calls_of_gold": 0, "gold_shown": 0, "gold_at_1": 0}
    traffic = Traffic(setup.traffic, args.seed)

    async def main() -> None:
        async with Gateway(config, receipts=log) as gw:
            if gw.down() or len(gw.index) != len(setup.test.tools):
                raise SystemExit(f"the gateway indexed {len(gw.index)} of {len(setup.test.tools)} tools "
                                 f"(servers down: {sorted(gw.down())})")
            for i in tqdm(range(start, stop), desc=f"round {rnd}: searches", unit="search",
                          disable=args.quiet, mininterval=2):
                q = traffic[i]
                gold = setup.gold[q.id]
                session = f"r{rnd}-s{i // args.session_searches}"
                answer = await gw.search(q.text, k=args.k, session=session)
                counts["searches"] += 1
                ids = [h["tool_id"] for h in answer["hits"]]
                counts["gold_shown"] += bool(gold & set(ids))
                counts["gold_at_1"] += bool(ids and ids[0] in gold)
                for rank, tool in enumerate(ids, 1):
                    if rng.random() >= (1.0 / rank) ** args.eta:
                        continue  # not examined
                    if rng.random() < (args.c_pos if tool in gold else args.c_neg):
                        await gw.call_tool(tool, {}, session=session)
                        counts["calls"] += 1
                        counts["calls_of_gold"] += tool in gold

    anyio.run(main)
    return counts


def check_receipts(log: Path, test_texts: set[str]) -> dict[str, int]:
    """The round's receipts: no test query among the searches (asserted); how many searches explored."""
    from toolret.gateway.receipts import iter_receipts

    searches = explored = 0
    for where, rec in iter_receipts(log):
        if rec.get("event") == "search":
            searches += 1
            explored += bool((rec.get("explore") or {}).get("swap"))
            if _norm(rec["query"]) in test_texts:
                raise AssertionError(f"{where}: a test query was served as traffic")
    return {"searches_in_receipts": searches, "explored_searches": explored}


# ---------------------------------------------------------------------------------------------- adapt, scoring
def run_adapt(setup: Setup, work: Path, feedback: Path | None, args, llm: Any = None) -> dict[str, Any]:
    """``toolret adapt`` (``--feedback`` from round 1) into ``<work>/adapt``; ``llm``: an engine already loaded
    (tests: one model load for every generation job), else adapt builds ``--llm-model``'s when it must generate."""
    from toolret.adapt import GeneratorSpec, adapt

    say = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    return adapt(setup.catalog_dir, work / "adapt", queries=setup.labelled if args.compare_bias and feedback else None,
                 budget=args.adapt_budget, generator=GeneratorSpec(model=args.llm_model), n=args.n,
                 finetune_overrides=args.finetune or None, register=False, feedback=feedback,
                 only=args.candidates, llm=llm, say=say)


def score(champion: Path, setup: Setup) -> dict[str, Any]:
    """The champion on the test queries: metrics with bootstrap 95% CIs (the project's evaluation)."""
    from toolret.evaluation import evaluate_retriever
    from toolret.pipeline import Pipeline

    pipe = Pipeline.load(champion)
    result, _ = evaluate_retriever(pipe, setup.test, method=pipe.name, docs="original", ks=KS, k_max=max(KS),
                                   split="test", bootstrap_samples=1000, seed=13, measure_latency=False)
    return {"pipeline": pipe.name, "n_queries": result["n_queries"],
            "recall@5": round(result["metrics"]["recall@5"], 4),
            "recall@5_ci95": [round(x, 4) for x in result["ci95"]["recall@5"]],
            "metrics": {m: round(v, 4) for m, v in result["metrics"].items()},
            "ci95": {m: [round(x, 4) for x in v] for m, v in result["ci95"].items()}}


def bias_comparison(report: dict[str, Any]) -> dict[str, Any] | None:
    """dense-ft (inverse-propensity weighted feedback) against dense-ft-plain (unweighted) on the test queries."""
    lab = report.get("labelled") or {}
    if "dense-ft" not in lab or "dense-ft-plain" not in lab:
        return None
    w, p = lab["dense-ft"], lab["dense-ft-plain"]
    return {"weighted": {"candidate": "dense-ft", "recall@5": w["metrics"]["recall@5"],
                         "recall@5_ci95": w["ci95"]["recall@5"], "ndcg@5": w["metrics"]["ndcg@5"]},
            "plain": {"candidate": "dense-ft-plain", "recall@5": p["metrics"]["recall@5"],
                      "recall@5_ci95": p["ci95"]["recall@5"], "ndcg@5": p["metrics"]["ndcg@5"]},
            "diff_recall@5": round(w["metrics"]["recall@5"] - p["metrics"]["recall@5"], 4),
            "p_value_recall@5": w["vs"]["dense-ft-plain"]["recall@5"],
            "p_value_ndcg@5": w["vs"]["dense-ft-plain"]["ndcg@5"],
            "test": "paired sign-flip randomization, two-sided (toolret.metrics.paired_test, via adapt's "
                    "labelled scoring: the test queries scored only, never used to choose)",
            "n_queries": w["n_queries"]}


PROMOTION_RULE = ("the round's adapt champion is the challenger; it is promoted when it beats the serving champion on "
                  "the round's held-out feedback (the newest traffic, never trained on) with paired p < 0.05 "
                  "(toolret.adapt.promotion.feedback_verdict, toolret promote's rule), else the champion keeps "
                  "serving; every decision is an MLflow run (<work>/mlflow.db, experiment toolret-adapt)")


def decide(champion: Path, challenger: Path, feedback: Path, catalog: str, work: Path, rnd: int) -> dict[str, Any]:
    """toolret promote's held-out-feedback verdict on the serving champion and the round's challenger, logged to
    the work folder's MLflow store (:func:`toolret.adapt.promotion.log_decision`)."""
    from toolret.adapt.promotion import log_decision, feedback_verdict
    from toolret.adapt.run import EXPERIMENT
    from toolret.tracking import get_client

    verdict = feedback_verdict(champion, challenger, feedback)
    decision = {"catalog": catalog, "round": rnd, "champion": str(champion.relative_to(work)),
                "challenger": str(challenger.relative_to(work)), "alpha": verdict["alpha"],
                "decision": "promote" if verdict["challenger_wins"] else "keep", "feedback": verdict,
                "interleaving": None}
    decision["mlflow_run"] = log_decision(get_client(f"sqlite:///{work / 'mlflow.db'}"), EXPERIMENT, decision)
    return decision


def seed_generations(source: Path, adapt_dir: Path) -> int:
    """Copy the generation shards under ``source`` (e.g. ``data/adapt/<catalogue>/generations``) that
    ``adapt_dir`` lacks: adapt answers every prompt they hold from them (prompts depend on documents only)."""
    from toolret.atomic import atomic_path

    copied = 0
    for path in sorted(source.rglob("shard-*")):
        dst = adapt_dir / "generations" / path.relative_to(source)
        if not dst.exists():
            with atomic_path(dst) as tmp:
                shutil.copyfile(path, tmp)
            copied += 1
    return copied


def copy_champion(src: Path, dst: Path) -> None:
    from toolret.atomic import atomic_directory

    with atomic_directory(dst) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)


def adapt_summary(report: dict[str, Any]) -> dict[str, Any]:
    sel = report["selection"]
    return {"champion": sel["champion"], "why": sel["why"], "chosen_on": sel["split"],
            "candidates": list(report["dev"]), "seconds": report["seconds"],
            "generated_this_run": report["generation"]["generated_this_run"],
            "selection": {c: r["selection"] for c, r in report["dev"].items()},
            "feedback": report.get("feedback")}


# ---------------------------------------------------------------------------------------------- the loop
def settings(args, setup: Setup) -> dict[str, Any]:
    """What a work folder's rounds depend on (all but ``--searches`` and ``--out``)."""
    return {"catalog": setup.info["ref"], "seed": args.seed, "k": args.k, "explore": args.explore, "eta": args.eta,
            "c_pos": args.c_pos, "c_neg": args.c_neg, "session_searches": args.session_searches,
            "holdout": args.holdout, "adapt_budget": args.adapt_budget, "n": args.n, "finetune": args.finetune,
            "candidates": args.candidates, "llm_model": args.llm_model, "compare_bias": args.compare_bias,
            "documents": args.documents}


def parse_finetune(text: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in (text or "").split(","):
        if item.strip():
            key, sep, value = item.partition("=")
            if not sep:
                raise SystemExit(f"--finetune {text!r}: KEY=VALUE,KEY=VALUE")
            try:
                out[key.strip()] = json.loads(value)
            except ValueError:
                out[key.strip()] = value.strip()
    return out


def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--catalog", required=True, help="a catalogue folder (e.g. data/curated/toollens) or dataset name")
    p.add_argument("--searches", default="1000,4000,16000", help="cumulative searches at which a round ends")
    p.add_argument("--explore", type=float, default=0.1, help="the gateway's exploration share")
    p.add_argument("--eta", type=float, default=1.0, help="the agent examines rank r with probability (1/r)**eta")
    p.add_argument("--c-pos", type=float, default=0.9, help="P(call | examined, gold)")
    p.add_argument("--c-neg", type=float, default=0.05, help="P(call | examined, not gold): noise")
    p.add_argument("--k", type=int, default=5, help="tools shown per search")
    p.add_argument("--session-searches", type=int, default=3, help="consecutive searches per agent session")
    p.add_argument("--holdout", type=float, default=0.2, help="toolret feedback's newest share held out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--adapt-budget", choices=["fast", "full"], default="fast")
    p.add_argument("--n", type=int, help="adapt: requests per tool (default: the budget's)")
    p.add_argument("--finetune", help="adapt's dense-ft training overrides, e.g. epochs=1,max_train_pairs=64")
    p.add_argument("--candidates", help="adapt: these candidates only, comma-separated (default: all)")
    p.add_argument("--llm-model", default="qwen2.5-coder-0.5b-instruct", help="adapt's request generator")
    p.add_argument("--compare-bias", action="store_true", help="adapt also scores its candidates on the test "
                   "queries: dense-ft (propensity-weighted) vs dense-ft-plain, paired p")
    p.add_argument("--documents", choices=["served", "catalogue"], default="served",
                   help="what adapt adapts: the gateway's conversion of each tool (served) or the tool's catalogue "
                        "document under its gateway id (catalogue: the catalogue's committed generations answer)")
    p.add_argument("--generations", help="a folder of generation shards made for these documents (e.g. "
                   "data/adapt/toollens/generations): copied into the work folder's adapt before round 0")
    p.add_argument("--work", help="the work folder (default data/feedback_loop/<catalog>-seed<seed>; not in git)")
    p.add_argument("--out", help="the record (default benchmarks/results/feedback_loop/<catalog>-seed<seed>.json)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or adapt messages")
    args = p.parse_args(argv)
    try:
        args.checkpoints = [int(s) for s in args.searches.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"--searches {args.searches!r}: comma-separated numbers") from None
    if not args.checkpoints or any(b <= a for a, b in zip([0, *args.checkpoints], args.checkpoints)):
        raise SystemExit(f"--searches {args.searches!r}: increasing positive cumulative counts")
    for name in ("explore", "c_pos", "c_neg"):
        if not 0 <= getattr(args, name) <= 1:
            raise SystemExit(f"--{name.replace('_', '-')}: a probability in [0, 1]")
    args.finetune = parse_finetune(args.finetune)
    args.candidates = [c.strip() for c in args.candidates.split(",") if c.strip()] if args.candidates else None
    return args


def main(argv: list[str] | None = None, llm: Any = None) -> int:
    """The loop (see the module docstring); ``llm``: adapt's generator, already loaded (tests)."""
    t_start = time.perf_counter()
    args = parse_args(argv)
    import toolret

    catalog = toolret.load_catalog(args.catalog)
    slug = f"{catalog.name}-seed{args.seed}"
    work = Path(args.work) if args.work else ROOT / "data" / "feedback_loop" / slug
    out = Path(args.out) if args.out else RESULTS / f"{slug}.json"
    setup = prepare(catalog, args.catalog, work, args.documents)
    config = settings(args, setup)
    config_file = work / "settings.json"
    from toolret.atomic import write_json

    if config_file.is_file():
        before = json.loads(config_file.read_text(encoding="utf-8"))
        if before != json.loads(json.dumps(config)):
            changed = sorted(k for k in set(before) | set(config) if before.get(k) != config.get(k))
            raise SystemExit(f"{work}: rounds of other settings ({', '.join(changed)} differ): give another --work")
    write_json(config_file, config)

    record: dict[str, Any] = {
        "complete": False, "catalog": setup.info,
        "command": "python benchmarks/feedback_loop.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "checkpoints": args.checkpoints, "settings": config,
        "gateway": {"server": f"{SERVER_SCRIPT.name} over stdio ({SERVER}__<name>)", "k": args.k,
                    "explore": args.explore, "explore_seed": "seed * 1000 + round",
                    "propensity_model": "policy-aware, (1/rank)**1 (toolret.gateway.explore defaults)",
                    "pipeline": "the round's champion folder (gateway config index)"},
        "click_model": {"examination": "(1/rank)**eta", "eta": args.eta, "c_pos": args.c_pos, "c_neg": args.c_neg,
                        "session_searches": args.session_searches,
                        "traffic": "non-test queries, a seeded shuffle per pass over them"},
        "feedback": {"receipts": "every round's so far", "holdout": args.holdout},
        "adapt": {"budget": args.adapt_budget, "n": args.n, "finetune_overrides": args.finetune,
                  "candidates": args.candidates or "all", "llm_model": args.llm_model, "registered": False,
                  "compare_bias": args.compare_bias},
        "promotion": {"rule": PROMOTION_RULE}, "rounds": [],
        "machine": {"cpus": len(os.sched_getaffinity(0)), "platform": platform.platform()}}

    def write_record() -> None:
        record["seconds_this_run"] = round(time.perf_counter() - t_start, 1)
        write_json(out, record)

    rounds = work / "rounds"
    for rnd in range(len(args.checkpoints) + 1):
        folder = rounds / str(rnd)
        state = folder / STATE
        expected = 0 if rnd == 0 else args.checkpoints[rnd - 1]
        if state.is_file():
            done = json.loads(state.read_text(encoding="utf-8"))
            if done["searches"] != expected:
                raise SystemExit(f"{state}: round {rnd} ended at {done['searches']} searches, --searches asks "
                                 f"{expected}: the checkpoints must extend the finished ones (or another --work)")
            record["rounds"].append(done)
            continue
        shutil.rmtree(folder, ignore_errors=True)  # an unfinished round is redone from its start
        folder.mkdir(parents=True)
        t0 = time.perf_counter()
        entry: dict[str, Any] = {"round": rnd, "searches": expected}
        if rnd == 0:
            if args.generations:
                entry["generation_shards_copied"] = seed_generations(Path(args.generations), work / "adapt")
            report = run_adapt(setup, work, None, args, llm)
        else:
            previous = rounds / str(rnd - 1)
            start = args.checkpoints[rnd - 2] if rnd > 1 else 0
            log = folder / "receipts.jsonl"
            served_by = json.loads((previous / STATE).read_text(encoding="utf-8"))["champion"]
            entry["traffic"] = {"served_by": served_by, "from": start, "to": expected,
                                **serve(setup, previous / "champion", start, expected, log, rnd, args),
                                **check_receipts(log, setup.test_texts)}
            from toolret.feedback.query_set import build_feedback

            logs = [rounds / str(r) / "receipts.jsonl" for r in range(1, rnd + 1)]
            fb = build_feedback(logs, folder / "feedback", holdout=args.holdout)
            entry["feedback"] = {k: fb[k] for k in ("searches", "calls", "clicks", "propensity_from_receipts",
                                                    "train", "test", "duplicates_merged")}
            report = run_adapt(setup, work, folder / "feedback", args, llm)
            if args.compare_bias:
                entry["bias_comparison"] = bias_comparison(report)
        write_json(folder / "adapt_report.json", report)
        entry["adapt"] = adapt_summary(report)
        if rnd == 0:
            copy_champion(work / "adapt" / "champion", folder / "champion")
            entry["champion"] = report["selection"]["champion"]
            entry["promotion"] = {"decision": "first champion"}
        else:
            copy_champion(work / "adapt" / "champion", folder / "challenger")
            entry["challenger"] = report["selection"]["champion"]
            entry["promotion"] = decide(previous / "champion", folder / "challenger", folder / "feedback",
                                        setup.name, work, rnd)
            promoted = entry["promotion"]["decision"] == "promote"
            copy_champion(folder / "challenger" if promoted else previous / "champion", folder / "champion")
            entry["champion"] = entry["challenger"] if promoted else served_by
            entry["challenger_test"] = score(folder / "challenger", setup)  # scored only, never chosen on
        entry["test"] = score(folder / "champion", setup)
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        write_json(state, entry)  # the round is finished once this exists
        record["rounds"].append(entry)
        write_record()
        if not args.quiet:
            print(f"round {rnd}: {expected} searches, champion {entry['champion']}: test recall@5 "
                  f"{entry['test']['recall@5']:.3f} {entry['test']['recall@5_ci95']}", file=sys.stderr, flush=True)
    record["complete"] = True
    record["curve"] = [{"searches": r["searches"], "champion": r["champion"], "recall@5": r["test"]["recall@5"],
                        "ci95": r["test"]["recall@5_ci95"]} for r in record["rounds"]]
    write_record()
    print(json.dumps(record["curve"], indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
