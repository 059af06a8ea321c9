"""TREC run files written by every evaluation: ranx and pytrec_eval read them back (with qrels written the
same way) to the metrics the result JSON holds; ids with whitespace round-trip."""

from __future__ import annotations

import json

import pytest

from toolret.catalog.loaders.beir import load_beir
from toolret.cli import main
from toolret.evaluate_api import Qrels, Run
from toolret.errors import EvaluationError
from toolret.evaluation import qrels_from_catalog, run_path_for


def test_the_evaluate_command_writes_a_run_file_ranx_and_trec_eval_score_the_same(fixture_catalog_dir, tmp_path):
    ranx = pytest.importorskip("ranx")
    pytrec_eval = pytest.importorskip("pytrec_eval")
    out = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", "bm25", "--k", "1,5,10",
                 "--output", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    run_file = run_path_for(out)
    assert run_file.name == "r.run.trec" and run_file.is_file()
    catalog = load_beir(fixture_catalog_dir)
    qrels_file = qrels_from_catalog(catalog, [q.id for q in catalog.split("test")]).to_trec(tmp_path / "test.qrels")
    # a query with no hit has no line in a run file: scored 0 over every judged query (ranx's make_comparable,
    # trec_eval -c)
    judged = {q: dict(r) for q, r in Qrels.from_trec(qrels_file).items()}
    ran = Run.from_trec(run_file)
    assert len(ran) < len(judged) == result["n_queries"]  # the fixture has a query BM25 finds nothing for
    got = ranx.evaluate(ranx.Qrels.from_file(str(qrels_file), kind="trec"),
                        ranx.Run.from_file(str(run_file), kind="trec"), ["recall@5", "ndcg@5", "recall@10", "mrr"],
                        make_comparable=True)
    for metric in ("recall@5", "ndcg@5", "recall@10", "mrr"):
        assert got[metric] == pytest.approx(result["metrics"][metric], abs=1e-9), metric
    as_dict = {q: dict(zip(ran[q], ran.scores(q))) for q in ran}
    per_query = pytrec_eval.RelevanceEvaluator(judged, {"recall_5", "ndcg_cut_5"}).evaluate(as_dict)
    mean = {m: sum(v[m] for v in per_query.values()) / len(judged) for m in ("recall_5", "ndcg_cut_5")}
    assert mean["recall_5"] == pytest.approx(result["metrics"]["recall@5"], abs=1e-9)
    assert mean["ndcg_cut_5"] == pytest.approx(result["metrics"]["ndcg@5"], abs=1e-9)


def test_ids_with_whitespace_and_percent_round_trip(tmp_path):
    run = Run.from_dict({"q 1": {"Weather API/get forecast": 2.5, "100% tool": 1.25}, "q2": {"a": 0.5}})
    path = run.to_trec(tmp_path / "x.run", tag="bm25[my grid]")
    lines = path.read_text().splitlines()
    assert all(len(line.split()) == 6 for line in lines)
    assert lines[0] == "q%201 Q0 Weather%20API/get%20forecast 1 2.5 bm25[my%20grid]"
    back = Run.from_trec(path)
    assert dict(back) == dict(run) and back.scores("q 1") == (2.5, 1.25)
    qrels = Qrels.from_dict({"q 1": {"Weather API/get forecast": 1, "100% tool": 0}})
    assert dict(Qrels.from_trec(qrels.to_trec(tmp_path / "x.qrels"))) == dict(qrels)


def test_a_malformed_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "bad.run"
    path.write_text("q1 Q0 a 1 0.5 tag\nq2 Q0 b 1\n")
    with pytest.raises(EvaluationError, match=r"bad\.run:2: a TREC run line has 6 fields, found 4"):
        Run.from_trec(path)
