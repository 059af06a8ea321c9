"""``toolret adapt --feedback``: the candidates train on the synthetic requests plus the feedback's training
positives (dense-ft weighted, dense-ft-plain not), the held-out feedback chooses only with enough queries, and
a query planted in the receipts' newest (held-out) share reaches no training catalog."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from receipt_lines import call, search, write

from toolret.adapt.candidates import candidates
from toolret.adapt.feedback_selection import MIN_FEEDBACK_QUERIES, feedback_selection
from toolret.adapt.run import choose_champion
from toolret.adapt.synthetic import split_queries
from toolret.catalog.model import Catalog, Tool
from toolret.config import load_params
from toolret.evaluation import evaluate_retriever
from toolret.feedback.labelled_set import held_out_catalog, load_feedback, with_feedback
from toolret.feedback.query_set import build_feedback
from toolret.pipeline import Pipeline
from toolret.retrieval.bm25 import BM25Retriever
from toolret.roles import Corpus

PLANTED = "PLANTED: translate this contract into Finnish"


def _tools() -> Catalog:
    words = ["weather forecast", "currency exchange", "send email", "calendar event", "translate text",
             "stock price", "book flight", "moon phase"]
    return Catalog("toy", [Tool(id=f"t{i}", name=w, docs={"original": f"{w}: a tool to {w}"}, tool=f"p{i}")
                           for i, w in enumerate(words)], [], {})


def _feedback(tmp_path: Path, tools: Catalog):
    recs = []
    for i in range(20):  # one search a minute, the gold tool shown at rank 1 + i % 3
        gold = tools.tools[i % len(tools.tools)]
        text = PLANTED if i == 19 else f"please {gold.name} number {i}"
        shown = [t.id for t in tools.tools if t.id != gold.id][: i % 3] + [gold.id]
        recs += [search(60 * i, f"s{i}", text, shown), call(60 * i + 1, f"s{i}", gold.id)]
    build_feedback([write(tmp_path / "r.jsonl", recs)], tmp_path / "fb", holdout=0.2)
    return load_feedback(tmp_path / "fb", tools.tool_ids)


def test_a_planted_held_out_query_reaches_no_candidates_training(tmp_path: Path) -> None:
    tools = _tools()
    fb = _feedback(tmp_path, tools)
    synthetic, _ = split_queries(tools, [[f"synthetic {t.name} {j}" for j in range(3)] for t in tools.tools], seed=3)
    weighted, plain = with_feedback(synthetic, fb, weighted=True), with_feedback(synthetic, fb, weighted=False)
    pool = {c.name: c for c in candidates(tools, load_params(), tmp_path / "work", "fast", 3,
                                          feedback=(weighted, plain))}
    assert pool["dense-ft-plain"].kind == "trained"
    trained_on = {name: pool[name].build([]).retriever for name in ("dense-ft", "dense-ft-plain")}
    assert trained_on["dense-ft"]._training_catalog() is weighted
    assert trained_on["dense-ft-plain"]._training_catalog() is plain
    assert trained_on["dense-ft"].artifact != trained_on["dense-ft-plain"].artifact  # two adapters
    for catalog in (weighted, plain):
        texts = [q.text for q in catalog.split("train")]
        assert PLANTED not in texts and "please weather forecast number 0" in texts
        assert not {q.text for q in catalog.split("dev")} & {q.text for q in fb.split("test")}
    # clicks at rank 3 weigh 3: three copies weighted, one plain; the synthetic requests are all there
    assert [q.text for q in weighted.split("train")].count("please book flight number 14") == 3
    assert [q.text for q in plain.split("train")].count("please book flight number 14") == 1
    assert len(plain.split("train")) == len(synthetic.split("train")) + len(fb.split("train"))
    held = held_out_catalog(tools, fb)
    assert PLANTED in [q.text for q in held.split("test")] and held.gold(next(
        q.id for q in held.split("test") if q.text == PLANTED)) == {"t3"}
    # the held-out catalog is what a candidate is scored on when it chooses
    pipe = Pipeline(BM25Retriever(load_params().bm25), name="bm25")
    pipe.fit(synthetic)
    pipe.index(Corpus.from_catalog(tools))
    result, rows = evaluate_retriever(pipe, held, method="bm25", docs="original", ks=(5,), k_max=5, split="test",
                                      measure_latency=False)
    assert result["n_queries"] == len(fb.split("test")) == 4 and len(rows) == 4


def test_the_held_out_feedback_chooses_only_with_enough_queries() -> None:
    use, why = feedback_selection(MIN_FEEDBACK_QUERIES - 1)
    assert not use and "fewer than 50" in why and "synthetic dev" in why
    use, why = feedback_selection(MIN_FEEDBACK_QUERIES)
    assert use and "50 queries" in why


def test_the_reasons_name_the_set_that_chose() -> None:
    qids = np.array([f"q{i}" for i in range(60)])
    rng = np.random.default_rng(0)
    pq = {"bm25": {"ndcg@5": rng.uniform(0.1, 0.3, 60), "query_id": qids},
          "dense-ft-plain": {"ndcg@5": rng.uniform(0.6, 0.9, 60), "query_id": qids}}
    champion, why = choose_champion(pq, {"bm25": "untrained", "dense-ft-plain": "trained"},
                                    on="the held-out feedback")
    assert champion == "dense-ft-plain" and "best on the held-out feedback" in why and " dev" not in why
