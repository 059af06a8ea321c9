"""Does interleaving pick the better retriever (issue 79, "learning from use")? Over seeded champion /
challenger pairs of real retrievers, the team-draft interleaving verdict of simulated agents' calls against the
sign of the test metric, and the number of searches the verdict needed.

The catalogue (default ToolLens, ``toolret.load_catalog`` as ``benchmarks/feedback_loop.py`` loads its
``--catalog``: a folder, or a dataset name) gives the traffic and the test:

- **test metric**: every retriever ranks the catalogue's TEST queries; Recall@5 and nDCG@5 (and the other
  metrics) by the project's evaluation (:func:`toolret.evaluation.score_ranking`, what
  :func:`~toolret.evaluation.evaluate_retriever` scores a split with), the two members of a pair compared
  per query by :func:`toolret.metrics.paired_test` (sign-flip randomization, two-sided);
- **traffic**: the non-test queries (train and dev) with gold, servable by the gateway and none with a test
  query's text (asserted), as ``feedback_loop.py`` builds its pool; a seeded sample of ``--pool`` of them is
  shared by all pairs; each pair serves them in its own seeded order (``feedback_loop.Traffic``: a new shuffle
  per pass), in sessions of ``--session-searches`` consecutive searches.

Retrievers (``--pairs``; each built and indexed once on the ``original`` documents, and every pool and test
query ranked once, ``--depth`` deep, before any simulation): ``bm25`` (``params.bm25``), ``bm25-stem`` (with the
Snowball stemmer and identifier splitting, adapt's ``bm25-stem``), ``bm25-k1=<x>`` / ``bm25-b=<y>`` /
``bm25-stem-k1=<x>-b=<y>`` (other BM25 parameters), ``dense`` (``params.dense``: all-MiniLM-L6-v2), ``hybrid-w<w>``
(:class:`toolret.retrieval.hybrid.HybridRetriever` of ``bm25`` and ``dense`` with ``params.hybrid``'s fusion,
the dense side at weight ``w``: its own fusion of the two precomputed side rankings), and ``random`` (a seeded
random order per query: the floor, for tests).

For each pair ``i`` (its seed ``--seed * 1000 + i``; a coin of that seed makes one member champion, the other
challenger), searches ``0 .. max(--schedule) - 1``, each as the gateway serves an interleaved search
(:meth:`toolret.gateway.Gateway.search` with ``interleave`` on):

1. both members' top ``--k`` hits of the query, team-draft interleaved by the gateway's
   :class:`~toolret.gateway.interleave.Interleaver` (share 1: every search interleaves; its generator, seeded
   with the pair's seed, tosses team draft's coins), written as the gateway writes it -- a ``search`` receipt
   with the interleaver's ``shown`` (``team`` per entry) and ``interleave`` (the two names) -- by a
   :class:`~toolret.gateway.receipts.ReceiptLog` (never rotated here, so every receipt is read back);
2. the agent of ``feedback_loop.py``'s click model: it examines the tool shown at rank ``r`` with probability
   ``(1/r)**eta`` and calls an examined gold tool with probability ``--c-pos``, another with ``--c-neg``; each
   call a ``call`` receipt of the session, as the gateway writes it;
3. after the last search, the receipts are read back by ``toolret promote --receipts``'s code:
   :func:`toolret.feedback.interleaving.interleaving_credit` (via :func:`toolret.feedback.clicks.read_clicks`:
   every call credited to the search that showed the tool, asserted) and, for the searches ``< N`` at every
   ``--step`` searches and every ``N`` of ``--schedule``,
   :func:`~toolret.feedback.interleaving.interleaving_verdict`: the two-sided binomial sign test over the
   searches whose credit is not tied at p < 0.05. ``challenger_wins`` is the promote rule's verdict; the same
   test with more losses than wins is the champion's win; otherwise no decision.

No gateway process and no MCP server run here (the retrievers' rankings are precomputed, which is what makes
10 pairs x thousands of searches cheap on 2 cores); the interleaving, receipts, click crediting and verdict
are the project's own functions on the gateway's data shapes.

Per pair the record has the two names and roles, each one's test Recall@5 (and, to see what the clicks weigh,
nDCG@5 and Recall@1) with the paired p and the sign, the verdict at each ``N`` of ``--schedule`` (winner or none,
wins / losses / ties, p), ``searches_needed`` (the first ``N`` on the ``--step`` grid from which the verdict is
significant with the same winner at every later grid point up to the last search; ``null`` when it is not
significant at the end) and whether the final verdict agrees with the test's sign. ``summary``: agreements of
the final verdict with the test Recall@5 sign over the pairs whose difference is significant and over all pairs
(a verdict of no decision is no agreement), the same at every ``N`` of the schedule (``agreements_at``), with
the other metrics' signs, and the median searches needed by the agreeing pairs.

    python benchmarks/interleaving_agreement.py --catalog toollens
    python benchmarks/interleaving_agreement.py --catalog DIR --pairs bm25:random --schedule 100,300 \\
        --out /tmp/ia.json   # a tiny run
"""

from __future__ import annotations

import argparse
import bisect
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from feedback_loop import Traffic, _norm  # noqa: E402  (the same traffic order and test-text rule)

RESULTS = ROOT / "benchmarks" / "results"
KS = (1, 3, 5, 10)
METRIC = "recall@5"  # the test metric whose sign the verdict is compared with
COMPARED = (METRIC, "ndcg@5", "recall@1")  # also compared (diagnostics: what the clicks weigh)
CALLER = "interleaving-agreement"
# 10 pairs, gaps from large (hybrid / bm25 vs dense) to small (neighbouring fusion weights, BM25 variants)
DEFAULT_PAIRS = ("bm25:dense,hybrid-w0.5:bm25,hybrid-w0.5:dense,bm25-stem:bm25,hybrid-w0.3:hybrid-w0.5,"
                 "hybrid-w0.7:hybrid-w0.5,bm25:bm25-b=0.3,hybrid-w0.7:dense,bm25-stem:dense,hybrid-w0.3:bm25")
NAME = re.compile(r"^(?:(?P<bm25>bm25(?P<stem>-stem)?(?:-k1=(?P<k1>\d+(?:\.\d+)?))?(?:-b=(?P<b>\d+(?:\.\d+)?))?)"
                  r"|(?P<dense>dense)|hybrid-w(?P<w>\d+(?:\.\d+)?)|(?P<random>random))$")


# ---------------------------------------------------------------------------------------------- retrievers
def parse_name(name: str) -> dict[str, Any]:
    m = NAME.match(name)
    if not m:
        raise SystemExit(f"--pairs: unknown retriever {name!r} (bm25[-stem][-k1=X][-b=Y], dense, hybrid-wW, random)")
    if m["bm25"]:
        return {"kind": "bm25", "stem": bool(m["stem"]), "k1": float(m["k1"]) if m["k1"] else None,
                "b": float(m["b"]) if m["b"] else None}
    if m["w"] is not None:
        w = float(m["w"])
        if not 0 <= w <= 1:
            raise SystemExit(f"--pairs: {name}: the dense side's weight is in [0, 1]")
        return {"kind": "hybrid", "w": w}
    return {"kind": "dense" if m["dense"] else "random"}


def bm25_config(params, spec: dict[str, Any]):
    cfg = params.bm25
    if spec["stem"]:
        cfg = cfg.replace(stemmer="english", split_identifiers=True)  # adapt's bm25-stem
    return cfg.replace(**{k: spec[k] for k in ("k1", "b") if spec[k] is not None})


def rank_all(names: list[str], catalog, texts: list[str], qids: list[str], depth: int, params,
             quiet: bool) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Every retriever's ranking of the queries (``depth`` deep, at most the catalogue), each built and indexed
    once; a hybrid fuses the rankings of its two sides (built once, shared)."""
    from tqdm import tqdm

    from toolret.roles import Ranking
    from toolret.retrieval.bm25 import BM25Retriever
    from toolret.retrieval.dense import DenseRetriever
    from toolret.retrieval.hybrid import HybridConfig, HybridRetriever, HybridSide

    ids, docs = catalog.tool_ids, [t.text for t in catalog.tools]
    specs = {n: parse_name(n) for n in names}
    hybrid_cfg = HybridConfig(**{**params.hybrid.model_dump(), "select_on_dev": False,
                                 "sides": [HybridSide(component="bm25"), HybridSide(component="dense")]})
    deep = min(max(depth, hybrid_cfg.depth), len(ids))
    base: dict[str, Any] = {}  # name -> (retriever, ranking)
    need = sorted({n for n, s in specs.items() if s["kind"] in ("bm25", "dense")}
                  | ({"bm25", "dense"} if any(s["kind"] == "hybrid" for s in specs.values()) else set()))
    info: dict[str, dict[str, Any]] = {}
    for n in tqdm(need, desc="index + rank", unit="retriever", disable=quiet):
        t0 = time.perf_counter()
        spec = parse_name(n)
        if spec["kind"] == "bm25":
            retriever = BM25Retriever(bm25_config(params, spec))
            info[n] = {"retriever": "bm25", "config": retriever.config.to_dict()}
        else:
            retriever = DenseRetriever(params.dense)
            info[n] = {"retriever": "dense", "model": params.dense.model}
        retriever.index(ids, docs)
        base[n] = (retriever, retriever.search(texts, deep, qids))
        info[n]["seconds"] = round(time.perf_counter() - t0, 1)
    out = {}
    for n, spec in specs.items():
        if spec["kind"] in ("bm25", "dense"):
            r = base[n][1]
        elif spec["kind"] == "hybrid":
            hybrid = HybridRetriever([base["bm25"][0], base["dense"][0]], hybrid_cfg, weight=spec["w"])
            hybrid.tool_ids = list(ids)
            # the hybrid's own fusion (what its search does after searching both sides) of the side rankings
            r = hybrid._fuse([base["bm25"][1], base["dense"][1]], spec["w"], deep)
            info[n] = {"retriever": "hybrid", "sides": ["bm25", "dense"], "dense_weight": spec["w"],
                       "fusion": hybrid_cfg.fusion, "rrf_k": hybrid_cfg.rrf_k, "depth": deep}
        else:
            idx = np.array([random.Random(f"random-{q}").sample(range(len(ids)), deep) for q in qids],
                           dtype=np.int64).reshape(len(qids), deep)
            r = Ranking(list(qids), list(ids), idx, np.tile(-np.arange(deep, dtype=np.float32), (len(qids), 1)))
            info[n] = {"retriever": "random", "what": "a seeded random order of the tools per query"}
        out[n] = r
    return out, info


def subset(ranking, rows: np.ndarray, k: int):
    from toolret.roles import Ranking

    return Ranking([ranking.query_ids[i] for i in rows], ranking.tool_ids, ranking.indices[rows, :k],
                   ranking.scores[rows, :k])


def hits(ranking, row: int, k: int) -> list[dict[str, Any]]:
    """The gateway's hit dicts (``tool_id``, ``score``) of one query's top ``k``."""
    out = []
    for j in range(min(k, ranking.indices.shape[1])):
        pos = int(ranking.indices[row, j])
        if pos >= 0:
            out.append({"tool_id": ranking.tool_ids[pos], "score": round(float(ranking.scores[row, j]), 6)})
    return out


# ---------------------------------------------------------------------------------------------- the catalogue
def prepare(catalog, pool_size: int, seed: int) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """The judged test queries and the traffic pool (``feedback_loop.prepare``'s rule, the catalogue's ids)."""
    from toolret.gateway.gateway import MAX_QUERY_CHARS

    tests = [q for q in catalog.split("test") if catalog.gold(q.id)]
    if not tests:
        raise SystemExit(f"--catalog {catalog.name}: no judged test queries")
    test_texts = {_norm(q.text) for q in tests}
    candidates = [q for q in catalog.queries if q.split != "test" and catalog.gold(q.id)]
    servable = [q for q in candidates if q.text.strip() and len(q.text) <= MAX_QUERY_CHARS]
    traffic = [q for q in servable if _norm(q.text) not in test_texts]
    if {q.id for q in traffic} & {q.id for q in tests} or {_norm(q.text) for q in traffic} & test_texts:
        raise AssertionError("a test query is in the traffic pool")
    if not traffic:
        raise SystemExit(f"--catalog {catalog.name}: no judged non-test queries to make traffic of")
    pool = traffic if pool_size <= 0 or pool_size >= len(traffic) else \
        random.Random(f"{seed}-pool").sample(traffic, pool_size)
    splits: dict[str, int] = {}
    for q in pool:
        splits[q.split] = splits.get(q.split, 0) + 1
    return tests, pool, {"name": catalog.name, "n_tools": len(catalog.tools), "test_queries": len(tests),
                         "traffic_candidates": len(traffic), "pool": len(pool), "pool_splits": splits,
                         "left_out_same_text_as_a_test_query": len(servable) - len(traffic),
                         "left_out_not_servable": len(candidates) - len(servable)}


# ---------------------------------------------------------------------------------------------- test metric
def test_scores(rankings: dict[str, Any], rows: np.ndarray, catalog, bootstrap: int) -> dict[str, Any]:
    """Each retriever's metrics on the test queries (the project's evaluation) and per-query values."""
    from toolret.evaluation import score_ranking

    out = {}
    for name, r in rankings.items():
        scores, per_rows = score_ranking(subset(r, rows, max(KS)), catalog, KS, bootstrap, 13)
        out[name] = {"n_queries": scores["n_queries"],
                     "metrics": {m: round(float(v), 4) for m, v in scores["metrics"].items()},
                     "ci95": {m: [round(x, 4) for x in v] for m, v in scores["ci95"].items()},
                     "per_query": {m: np.array([row[m] for row in per_rows]) for m in COMPARED},
                     "query_ids": [row["query_id"] for row in per_rows]}
    return out


def compare_on_test(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str], alpha: float) -> dict[str, Any]:
    from toolret.metrics import paired_test

    if a["query_ids"] != b["query_ids"]:
        raise AssertionError("the two rankings scored different test queries")
    out: dict[str, Any] = {}
    for m in COMPARED:
        t = paired_test(a["per_query"][m], b["per_query"][m], method="randomization", seed=13)
        diff = float(np.mean(a["per_query"][m]) - np.mean(b["per_query"][m]))
        out[m] = {names[0]: round(float(np.mean(a["per_query"][m])), 4),
                  names[1]: round(float(np.mean(b["per_query"][m])), 4),
                  "diff": round(diff, 4), "p": round(float(t["p_value"]), 6), "significant": t["p_value"] < alpha,
                  "better": names[0] if diff > 0 else names[1] if diff < 0 else None}
    return out


# ---------------------------------------------------------------------------------------------- simulation
def simulate(i: int, pair: tuple[str, str], rankings: dict[str, Any], row_of: dict[str, int], pool: list[Any],
             gold: dict[str, set[str]], work: Path, args) -> dict[str, Any]:
    """Pair ``i``'s searches, receipts written and read back; the verdict at every grid point."""
    from tqdm import tqdm

    from toolret.feedback.interleaving import ALPHA, interleaving_credit, interleaving_verdict
    from toolret.feedback.team_draft import CHALLENGER, CHAMPION
    from toolret.gateway.interleave import Interleaver
    from toolret.gateway.receipts import ReceiptLog

    seed = args.seed * 1000 + i
    swap = random.Random(f"{seed}-roles").random() < 0.5
    champion, challenger = (pair[1], pair[0]) if swap else pair
    names = {CHAMPION: champion, CHALLENGER: challenger}
    traffic = Traffic(pool, seed)
    interleaver = Interleaver(1.0, seed)
    rng = random.Random(f"{seed}-clicks")
    log_path = work / f"pair-{i}.jsonl"
    log_path.unlink(missing_ok=True)
    log = ReceiptLog(log_path, max_bytes=0)  # never rotated: every receipt is read back
    last = max(args.schedule)
    counts = {"searches": 0, "calls": 0, "calls_of_gold": 0, "searches_with_calls": 0}
    try:
        for n in tqdm(range(last), desc=f"pair {i} {champion} vs {challenger}", unit="search",
                      disable=args.quiet, mininterval=2):
            q = traffic[n]
            session = f"p{i}-s{n // args.session_searches}"
            if not interleaver.draw():
                raise AssertionError("share 1: every search interleaves")
            row = row_of[q.id]
            shown, fields = interleaver.show(hits(rankings[champion], row, args.k),
                                             hits(rankings[challenger], row, args.k), args.k, names)
            log.write("search", caller=CALLER, session=session, query=q.text, k=args.k, min_score=None,
                      server=None, category=None, **fields, withheld=[], latency_ms=0.0)
            counts["searches"] += 1
            called = 0
            for rank, h in enumerate(shown, 1):  # feedback_loop.py's agent
                if rng.random() >= (1.0 / rank) ** args.eta:
                    continue  # not examined
                if rng.random() < (args.c_pos if h["tool_id"] in gold[q.id] else args.c_neg):
                    log.write("call", caller=CALLER, session=session, tool=h["tool_id"], server=None,
                              shown_before=True, is_error=False, latency_ms=0.0)
                    called += 1
                    counts["calls_of_gold"] += h["tool_id"] in gold[q.id]
            counts["calls"] += called
            counts["searches_with_calls"] += called > 0
    finally:
        log.close()
    credits, read = interleaving_credit([log_path], pair=(champion, challenger))
    if read["searches"] != last or read["calls_credited"] != counts["calls"]:
        raise AssertionError(f"pair {i}: receipts read back {read}, written {counts}")
    if not args.keep_receipts:
        log_path.unlink()

    starts = [c.search for c in credits]  # credits come in search order

    def verdict(n: int) -> dict[str, Any]:
        v = interleaving_verdict(credits[:bisect.bisect_left(starts, n)], ALPHA)
        if v["challenger_wins"]:
            winner = challenger
        elif v["losses"] > v["wins"] and v["p"] < ALPHA:
            winner = champion
        else:
            winner = None
        return {"searches": n, "winner": winner, "promote": v["challenger_wins"],
                **{k: v[k] for k in ("searches_with_clicks", "n", "wins", "losses", "ties", "p")}}

    grid = sorted(set(range(args.step, last + 1, args.step)) | set(args.schedule))
    at = {n: verdict(n) for n in grid}
    final = at[last]["winner"]
    needed = None
    if final is not None:
        needed = last
        for n in reversed(grid):
            if at[n]["winner"] != final:
                break
            needed = n
    return {"seed": seed, "champion": champion, "challenger": challenger, "traffic": counts,
            "receipts_read": read, "verdicts": [at[n] for n in args.schedule], "winner": final,
            "searches_needed": needed}


# ---------------------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--catalog", default="toollens", help="a catalogue folder or dataset name (default toollens)")
    p.add_argument("--pairs", default=DEFAULT_PAIRS, help="comma-separated A:B retriever pairs (see the docstring)")
    p.add_argument("--schedule", default="250,500,1000,2000,4000,8000,16000",
                   help="searches at which the verdict is reported")
    p.add_argument("--step", type=int, default=10, help="grid of searches for searches_needed")
    p.add_argument("--pool", type=int, default=5000, help="traffic queries sampled once for all pairs (0: all)")
    p.add_argument("--k", type=int, default=5, help="tools shown per search")
    p.add_argument("--depth", type=int, default=10, help="ranking depth kept per query (>= k and 10)")
    p.add_argument("--eta", type=float, default=1.0, help="the agent examines rank r with probability (1/r)**eta")
    p.add_argument("--c-pos", type=float, default=0.9, help="P(call | examined, gold)")
    p.add_argument("--c-neg", type=float, default=0.05, help="P(call | examined, not gold): noise")
    p.add_argument("--session-searches", type=int, default=3, help="consecutive searches per agent session")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples of the test metrics' CIs")
    p.add_argument("--work", help="where the receipts are written (default: a temporary folder)")
    p.add_argument("--keep-receipts", action="store_true", help="keep each pair's receipts in --work")
    p.add_argument("--out", help="the record (default benchmarks/results/interleaving_agreement.json)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    try:
        args.schedule = sorted({int(s) for s in args.schedule.split(",") if s.strip()})
    except ValueError:
        raise SystemExit(f"--schedule {args.schedule!r}: comma-separated numbers") from None
    if not args.schedule or args.schedule[0] < 1 or args.step < 1 or args.k < 1 or args.session_searches < 1:
        raise SystemExit("--schedule, --step, --k and --session-searches: positive")
    for name in ("c_pos", "c_neg"):
        if not 0 <= getattr(args, name) <= 1:
            raise SystemExit(f"--{name.replace('_', '-')}: a probability in [0, 1]")
    args.pair_list = []
    for item in args.pairs.split(","):
        a, sep, b = item.strip().partition(":")
        if not sep or not a or not b or a == b:
            raise SystemExit(f"--pairs: {item!r} is not A:B of two different retrievers")
        parse_name(a), parse_name(b)
        args.pair_list.append((a, b))
    if args.keep_receipts and not args.work:
        raise SystemExit("--keep-receipts needs --work")
    args.depth = max(args.depth, args.k, max(KS))
    return args


def main(argv: list[str] | None = None) -> int:
    t_start = time.perf_counter()
    args = parse_args(argv)
    import toolret
    from toolret.atomic import write_json
    from toolret.config import load_params
    from toolret.feedback.interleaving import ALPHA

    catalog = toolret.load_catalog(args.catalog)
    params = load_params()
    tests, pool, cat_info = prepare(catalog, args.pool, args.seed)
    qids = [q.id for q in pool] + [q.id for q in tests]
    texts = [q.text for q in pool] + [q.text for q in tests]
    names = sorted({n for pair in args.pair_list for n in pair})
    t0 = time.perf_counter()
    rankings, info = rank_all(names, catalog, texts, qids, args.depth, params, args.quiet)
    rank_s = time.perf_counter() - t0
    row_of = {q.id: i for i, q in enumerate(pool)}
    test_rows = np.arange(len(pool), len(qids))
    test = test_scores(rankings, test_rows, catalog, args.bootstrap)
    gold = {q.id: set(catalog.gold(q.id)) for q in pool}

    out = Path(args.out) if args.out else RESULTS / "interleaving_agreement.json"
    pairs = []
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="interleaving-agreement-") as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for i, pair in enumerate(args.pair_list):
            sim = simulate(i, pair, rankings, row_of, pool, gold, work, args)
            cmp = compare_on_test(test[pair[0]], test[pair[1]], pair, ALPHA)
            better = cmp[METRIC]["better"]
            pairs.append({"pair": list(pair), **{k: sim[k] for k in ("seed", "champion", "challenger")},
                          "test": cmp, "verdicts": sim["verdicts"], "winner": sim["winner"],
                          "searches_needed": sim["searches_needed"],
                          "agrees": sim["winner"] is not None and sim["winner"] == better,
                          "agrees_with": {m: sim["winner"] is not None and sim["winner"] == cmp[m]["better"]
                                          for m in COMPARED},
                          "traffic": sim["traffic"], "receipts_read": sim["receipts_read"]})
            if not args.quiet:
                print(f"pair {i}: {pair[0]} {cmp[METRIC][pair[0]]:.3f} vs {pair[1]} {cmp[METRIC][pair[1]]:.3f} "
                      f"(p {cmp[METRIC]['p']:.4f}); interleaving winner {sim['winner']} after "
                      f"{max(args.schedule)} (needed {sim['searches_needed']})", file=sys.stderr, flush=True)
    sim_s = time.perf_counter() - t1

    significant = [p for p in pairs if p["test"][METRIC]["significant"]]
    needed = [p["searches_needed"] for p in pairs if p["searches_needed"] is not None and p["agrees"]]
    summary = {
        "pairs": len(pairs),
        "agreements_all": sum(p["agrees"] for p in pairs),
        "significant_test_pairs": len(significant),
        "agreements_significant_test": sum(p["agrees"] for p in significant),
        "agreements_all_by_metric": {m: sum(p["agrees_with"][m] for p in pairs) for m in COMPARED},
        "agreements_at": {str(n): {"all": sum(p["verdicts"][j]["winner"] == p["test"][METRIC]["better"] for p in pairs),
                                   "significant_test": sum(p["verdicts"][j]["winner"] == p["test"][METRIC]["better"]
                                                           for p in significant),
                                   "no_decision": sum(p["verdicts"][j]["winner"] is None for p in pairs)}
                          for j, n in enumerate(args.schedule)},
        "no_decision": sum(p["winner"] is None for p in pairs),
        "wrong_winner": sum(p["winner"] is not None and not p["agrees"] for p in pairs),
        "median_searches_needed": statistics.median(needed) if needed else None,
        "searches_needed_of_agreeing_pairs": sorted(needed),
        "max_searches": max(args.schedule),
        "issue_bar": "verdict agrees with the test Recall@5 sign in >= 9 of 10 pairs",
        "issue_bar_met": len(pairs) == 10 and sum(p["agrees"] for p in pairs) >= 9,
    }
    record = {
        "command": " ".join(["python benchmarks/interleaving_agreement.py", *(sys.argv[1:] if argv is None else argv)]),
        "catalog": cat_info,
        "settings": {"pairs": [list(p) for p in args.pair_list], "schedule": args.schedule, "step": args.step,
                     "pool": args.pool, "k": args.k, "depth": args.depth, "seed": args.seed,
                     "pair_seed": "seed * 1000 + pair index", "alpha": ALPHA, "bootstrap": args.bootstrap},
        "click_model": {"examination": "(1/rank)**eta", "eta": args.eta, "c_pos": args.c_pos, "c_neg": args.c_neg,
                        "session_searches": args.session_searches,
                        "traffic": "the pool in a seeded shuffle per pass, per pair (feedback_loop.Traffic)"},
        "interleaving": "toolret.gateway.interleave.Interleaver (share 1, seed = the pair's) -> search receipts by "
                        "toolret.gateway.receipts.ReceiptLog; credit "
                        "toolret.feedback.interleaving.interleaving_credit; "
                        "verdict interleaving_verdict (two-sided binomial sign test over non-tied searches, p < alpha)",
        "test_metric": f"{METRIC} (and {', '.join(COMPARED[1:])}) on the test queries, "
                       "toolret.evaluation.score_ranking; pairs compared by toolret.metrics.paired_test "
                       "(randomization, seed 13)",
        "retrievers": {n: {**info[n], "test": {k: test[n][k] for k in ("n_queries", "metrics", "ci95")}}
                       for n in names},
        "pairs": pairs, "summary": summary,
        "seconds": {"rank": round(rank_s, 1), "simulate": round(sim_s, 1),
                    "total": round(time.perf_counter() - t_start, 1)},
        "machine": {"cpus": len(os.sched_getaffinity(0)), "platform": platform.platform(),
                    "python": platform.python_version()},
    }
    write_json(out, record)
    if not args.quiet:
        for p in pairs:
            t = p["test"][METRIC]
            print(f"{p['pair'][0]:>14} vs {p['pair'][1]:<14} test R@5 {t[p['pair'][0]]:.3f} / {t[p['pair'][1]]:.3f} "
                  f"p {t['p']:.4f} | winner {p['winner']} needed {p['searches_needed']} agrees {p['agrees']}")
        print({k: summary[k] for k in ("agreements_all", "significant_test_pairs", "agreements_significant_test",
                                       "median_searches_needed", "issue_bar_met")})
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
