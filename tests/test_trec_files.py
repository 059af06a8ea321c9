"""TREC run files written by every evaluation: ranx and pytrec_eval read them back (with qrels written the
same way) to the metrics the result JSON holds; ids with whitespace round-trip. The committed result records
(results/records): each has its gzipped run file, which trec_eval reads back to the record's metrics (ties
are written strictly ranked), and carries its condition and what produced it."""

from __future__ import annotations

import json

import pytest

from toolret.catalog.loaders.beir import load_beir
from toolret.cli import main
from toolret.evaluate_api import Qrels, Run, _trec_id
from toolret.errors import EvaluationError
from toolret.evaluation import qrels_from_catalog, run_path_for


@pytest.mark.integration  # ranx compiles its metrics with numba (tens of seconds in a fresh venv)
@pytest.mark.xdist_group("ranx")  # on one worker: ranx's numba metrics compiled (and cached) once, not per worker
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


# ------------------------------------------------------------------ committed result records (results/records)
def _committed_records() -> list:
    from toolret.stages import ROOT

    folder = ROOT / "results" / "records"
    records = sorted(p for p in folder.glob("*/*.json") if not p.name.endswith(".run_info.json"))
    assert records, "no result records under results/records"
    return records


def test_a_tie_is_read_back_in_the_ranked_order_by_trec_eval(tmp_path):
    """trec_eval sorts a tie by tool id (descending), not by rank: the record's run file makes every score
    strictly lower than the one above it, so trec_eval reads the order that was evaluated."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from toolret.evaluation import strictly_ranked

    run = Run.from_dict({"q": {"a": 2.0, "b": 2.0, "c": 1.0}, "r": {"z": 0.5, "y": 0.5}})  # ranked a, b, c / z, y
    text = run.to_trec(tmp_path / "plain.run").read_text()
    qrels = {"q": {"a": 1}, "r": {"z": 1}}

    def recall_at_1(trec_text: str) -> dict[str, float]:
        path = tmp_path / "x.run"
        path.write_text(trec_text)
        back = Run.from_trec(path)
        as_dict = {q: dict(zip(back[q], back.scores(q))) for q in back}
        scored = pytrec_eval.RelevanceEvaluator(qrels, {"recall.1"}).evaluate(as_dict)
        return {q: v["recall_1"] for q, v in scored.items()}

    assert recall_at_1(text) == {"q": 0.0, "r": 1.0}  # trec_eval puts b before a (ties: id descending)
    fixed = strictly_ranked(text)
    assert recall_at_1(fixed) == {"q": 1.0, "r": 1.0}
    rows = [line.split() for line in fixed.splitlines()]
    assert [r[2] for r in rows] == ["a", "b", "c", "z", "y"] and [r[3] for r in rows] == ["1", "2", "3", "1", "2"]
    scores = [float(r[4]) for r in rows]
    assert scores[0] == 2.0 and 2.0 - 1e-6 < scores[1] < 2.0 and scores[2] == 1.0 and scores[3] > scores[4]
    assert [line for line in fixed.splitlines() if " b " not in line and " y " not in line] == [
        line for line in text.splitlines() if " b " not in line and " y " not in line]  # the others as written


def test_the_record_run_file_is_gzip_with_the_same_bytes_every_time(tmp_path):
    import gzip

    from toolret.evaluation import gzip_deterministic

    one = gzip_deterministic(b"q Q0 a 1 1 t\n", tmp_path / "one.gz").read_bytes()
    two = gzip_deterministic(b"q Q0 a 1 1 t\n", tmp_path / "sub" / "two.gz").read_bytes()
    assert one == two and gzip.decompress(one) == b"q Q0 a 1 1 t\n"


def _record_ids() -> list[str]:
    return [f"{r.parent.name}/{r.name.removesuffix('.json')}" for r in _committed_records()]


TREC_EVAL_MEASURE = {"recall": "recall_{k}", "ndcg": "ndcg_cut_{k}"}


@pytest.mark.parametrize("record_id", _record_ids())
def test_every_committed_record_has_a_run_file_trec_eval_reads_back_to_its_metrics(record_id):
    """The parity test, one record each: its <stem>.run.trec.gz, read by trec_eval (pytrec_eval) against the gold
    of its per-query file, gives the record's recall@k, ndcg@k and mrr (comp@k, which trec_eval lacks, from the
    run file's lines). trec_eval, not ranx, is the reference here: no numba compile (ranx's parity with the
    project's metrics is tests/metrics/test_metrics_parity.py and the evaluate command's test above)."""
    import gzip

    pytrec_eval = pytest.importorskip("pytrec_eval")
    from toolret.stages import ROOT

    record = ROOT / "results" / "records" / f"{record_id}.json"
    stem = record.name.removesuffix(".json")
    run_file = record.with_name(f"{stem}.run.trec.gz")
    assert run_file.is_file(), f"{record_id}: no run file (re-record it: toolret evaluate ... --record)"
    result = json.loads(record.read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in record.with_name(f"{stem}.per_query.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert len(rows) == result["n_queries"], record
    # the run file holds ids as TREC can (whitespace and "%" percent-encoded): so do these judgements
    qrels = {_trec_id(r["query_id"]): {_trec_id(t): 1 for t in r["gold"]} for r in rows}
    scores: dict[str, dict[str, float]] = {}
    for line in gzip.decompress(run_file.read_bytes()).decode("utf-8").splitlines():
        q, _, t, _, score, _ = line.split()
        scores.setdefault(q, {})[t] = float(score)
    wanted, names = set(), {}
    for m in result["metrics"]:
        kind, _, k = m.partition("@")
        if kind in TREC_EVAL_MEASURE:
            names[m] = TREC_EVAL_MEASURE[kind].format(k=k)
        elif m == "mrr":
            names[m] = "recip_rank"
        if m in names:
            wanted.add(names[m].replace("_cut_", "_cut.").replace("recall_", "recall."))
    per_query = pytrec_eval.RelevanceEvaluator(qrels, wanted).evaluate(scores)
    # a judged query with no line in the run file scores 0 (trec_eval -c): the mean is over every judged query
    got = {m: sum(v[name] for v in per_query.values()) / len(rows) for m, name in names.items()}
    # by descending score, as trec_eval ranks them (the record's run file is strictly ranked)
    ranked = {q: [t for t, _ in sorted(docs.items(), key=lambda kv: -kv[1])] for q, docs in scores.items()}
    for m in (m for m in result["metrics"] if m.startswith("comp@")):
        k = int(m.split("@")[1])
        got[m] = sum(float({_trec_id(t) for t in r["gold"]} <= set(ranked.get(_trec_id(r["query_id"]), [])[:k]))
                     for r in rows) / len(rows)
    bad = [f"{record_id} {m}: trec_eval {got[m]!r} != record {v!r}"
           for m, v in result["metrics"].items() if got[m] != pytest.approx(v, abs=1e-9)]
    assert not bad, "\n".join(bad)


def test_every_committed_record_carries_its_condition_and_what_produced_it():
    bad = []
    for record in _committed_records():
        result = json.loads(record.read_text(encoding="utf-8"))
        condition, produced = result.get("condition") or {}, result.get("produced_by") or {}
        if condition.get("spec") != result["method"] or len(condition.get("params_sha256", "")) != 64 \
                or not isinstance(condition.get("models"), list) \
                or not {"git_commit", "toolret_version", "seconds", "device"} <= set(produced):
            bad.append(f"{record.parent.name}/{record.name}")
    assert not bad, f"records without condition / produced_by (re-record them): {bad}"


def test_no_committed_record_holds_a_query_text():
    """Records name queries by id; a dataset's texts stay under ../shared (never copied into git)."""
    from toolret.stages import ROOT

    holding = [f"{p.parent.name}/{p.name}" for p in sorted((ROOT / "results" / "records").rglob("*.per_query.jsonl"))
               if any("query" in json.loads(line) for line in p.read_text(encoding="utf-8").split("\n") if line)]
    assert not holding, f"per-query records with query texts (re-record them): {holding}"
