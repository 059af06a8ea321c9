"""The evaluation API (toolret.evaluate_api): parity with ranx, file round trips, input errors, compare."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

import toolret.evaluate_api as api
from toolret.evaluate_api import EvalResult, Qrels, Run, compare, evaluate, holm_adjust
from toolret.errors import EvaluationError
from toolret.metrics import aggregate, bootstrap_cis, per_query_metrics
from toolret.roles import Ranking

KS = (1, 3, 5, 10)

# Hand-written: every judged query is in the run (ranx needs the same query set on both sides).
QRELS = {
    "q1": {"t01": 1},                                      # gold at rank 1
    "q2": {"t03": 1, "t07": 1},                            # ranks 2 and 6
    "q3": {"t02": 1, "t04": 1, "t06": 1, "t08": 1},        # more gold than k=3; one gold at 12 (beyond 10)
    "q4": {"t09": 1},                                      # never retrieved
    "q5": {"t05": 1, "t11": 1},                            # first hit at rank 11: mrr 1/11, recall@10 = 0
    "q6": {"t10": 1, "t12": 1, "t13": 1},                  # rank 1 and 3, short ranking
}
RANKED = {
    "q1": ["t01", "t02", "t03", "t04"],
    "q2": ["t01", "t03", "t02", "t04", "t05", "t07", "t08"],
    "q3": ["t02", "t01", "t04", "t03", "t05", "t06", "t07", "t09", "t10", "t11", "t12", "t08"],
    "q4": ["t01", "t02", "t03"],
    "q5": ["t01", "t02", "t03", "t04", "t06", "t07", "t08", "t09", "t10", "t12", "t11", "t13"],
    "q6": ["t10", "t01", "t13"],
}


def _scored(ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Strictly decreasing scores, so no library reorders ties."""
    return {q: {t: float(len(r) - i) for i, t in enumerate(r)} for q, r in ranked.items()}


def test_docstring_example_runs() -> None:
    assert doctest.testmod(api).failed == 0


@pytest.mark.integration  # ranx compiles its metrics with numba (tens of seconds in a fresh venv)
@pytest.mark.xdist_group("ranx")  # on one worker: ranx's numba metrics compiled (and cached) once, not per worker
def test_parity_with_ranx_per_query_and_mean() -> None:
    import ranx

    res = evaluate(Run.from_dict(_scored(RANKED)), Qrels.from_dict(QRELS), ks=KS, bootstrap_samples=0)
    rrun = ranx.Run(_scored(RANKED))
    names = [f"{m}@{k}" for k in KS for m in ("recall", "ndcg")] + ["mrr"]
    means = ranx.evaluate(ranx.Qrels(QRELS), rrun, names, threads=1)
    assert res.query_ids == tuple(QRELS)
    for name in names:
        assert_allclose(res.per_query[name], [rrun.scores[name][q] for q in res.query_ids], atol=1e-12, err_msg=name)
        assert res.means[name] == pytest.approx(means[name], abs=1e-12), name
    # the data exercise the edges, or the parity would say little
    assert res.per_query["mrr"][4] == pytest.approx(1 / 11) and res.per_query["recall@10"][4] == 0.0
    assert 0 < res.per_query["ndcg@5"][1] < 1 and res.per_query["recall@3"][2] == 0.5


def test_hand_computed_values() -> None:
    res = evaluate(Run.from_dict(RANKED), Qrels.from_dict(QRELS), ks=(3,), bootstrap_samples=0)
    assert res.per_query["recall@3"].tolist() == [1.0, 0.5, 0.5, 0.0, 0.0, 2 / 3]
    assert res.per_query["comp@3"].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert res.per_query["mrr"].tolist() == [1.0, 0.5, 1.0, 0.0, 1 / 11, 1.0]
    # q2: one hit at rank 2 of an ideal 2 -> (1/log2 3) / (1 + 1/log2 3)
    assert res.per_query["ndcg@3"][1] == pytest.approx((1 / np.log2(3)) / (1 + 1 / np.log2(3)))


def test_evaluate_is_the_metrics_package_composed() -> None:
    """Means, CIs and per-query values are exactly those of toolret.metrics (no second implementation)."""
    qrels, run = Qrels.from_dict(QRELS), Run.from_dict(RANKED)
    res = evaluate(run, qrels, ks=KS, bootstrap_samples=500, seed=7)
    qids, pq = per_query_metrics(RANKED, {q: {t for t, r in g.items() if r > 0} for q, g in QRELS.items()}, KS)
    assert list(res.query_ids) == qids
    assert list(res.per_query) == list(pq)  # recall@k, ndcg@k, comp@k per k, then mrr: the JSON's key order
    for m in pq:
        assert res.per_query[m].tobytes() == pq[m].tobytes()
    assert res.means == aggregate(pq)
    assert res.ci == bootstrap_cis(pq, n_samples=500, seed=7)
    assert evaluate(run, qrels, ks=KS, bootstrap_samples=500, seed=8).ci != res.ci  # the seed is used


def test_named_metrics_and_families() -> None:
    res = evaluate(Run.from_dict(RANKED), Qrels.from_dict(QRELS), ks=(1, 3), metrics=["recall", "mrr@3", "precision@2",
                                                                                     "mrr"], bootstrap_samples=0)
    assert list(res.means) == ["recall@1", "recall@3", "mrr@3", "precision@2", "mrr"]
    assert res.per_query["mrr@3"].tolist() == [1.0, 0.5, 1.0, 0.0, 0.0, 1.0]
    assert res.per_query["precision@2"].tolist() == [0.5, 0.5, 0.5, 0.0, 0.0, 0.5]
    with pytest.raises(EvaluationError, match="unknown metric 'map@5'"):
        evaluate(Run.from_dict(RANKED), Qrels.from_dict(QRELS), metrics=["map@5"])


def test_judged_query_missing_from_the_run_scores_zero_and_empty_gold_is_skipped() -> None:
    qrels = Qrels.from_dict({"a": {"t1": 1}, "b": {"t2": 1}, "c": {"t3": 0}})
    res = evaluate(Run.from_dict({"a": ["t1"], "c": ["t3"]}), qrels, ks=(1,), bootstrap_samples=0)
    assert res.query_ids == ("a", "b")
    assert res.per_query["recall@1"].tolist() == [1.0, 0.0]


# ------------------------------------------------------------------------------------------ files
def test_qrels_round_trip_through_tsv(tmp_path: Path) -> None:
    qrels = Qrels.from_dict({"q 1": {"t/a": 1, "t:b": 2}, "q2": {"t-c": 0}, "q3": {"t-d": 1}})
    path = qrels.to_tsv(tmp_path / "test.tsv")
    assert path.read_text(encoding="utf-8").splitlines()[:2] == ["query-id\tcorpus-id\tscore", "q 1\tt/a\t1"]
    back = Qrels.from_tsv(path)
    assert back == qrels and list(back) == ["q 1", "q2", "q3"]
    assert back.gold("q 1") == {"t/a", "t:b"} and back.gold("q2") == frozenset()


def test_qrels_tsv_without_header_and_with_a_repeated_line(tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    path.write_text("q1\tt1\t1\nq1\tt1\t1\nq2\tt2\t1\n", encoding="utf-8")
    assert Qrels.from_tsv(path) == Qrels.from_dict({"q1": {"t1": 1}, "q2": {"t2": 1}})


def test_run_round_trip_through_jsonl(tmp_path: Path) -> None:
    run = Run.from_dict(_scored(RANKED))
    back = Run.from_jsonl(run.to_jsonl(tmp_path / "run.jsonl"))
    assert back == run and back.scores("q3") == run.scores("q3") and back.has_scores
    plain = Run.from_jsonl(Run.from_dict(RANKED).to_jsonl(tmp_path / "plain.jsonl"))
    assert plain == run and not plain.has_scores
    qrels = Qrels.from_dict(QRELS)
    assert evaluate(back, qrels, bootstrap_samples=50).means == evaluate(run, qrels, bootstrap_samples=50).means


def test_run_and_qrels_from_a_per_query_file_as_evaluate_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "original.per_query.jsonl"
    rows = [{"query_id": q, "query": "text", "recall@1": 0.0, "ranked": RANKED[q][:10],
             "gold": sorted(QRELS[q]), "gold_names": [], "top5_names": []} for q in QRELS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run, qrels = Run.from_jsonl(path), Qrels.from_jsonl(path)
    assert run["q3"] == tuple(RANKED["q3"][:10]) and qrels.gold("q3") == set(QRELS["q3"])
    res = evaluate(run, qrels, ks=(5,), bootstrap_samples=0)
    assert res.per_query["recall@5"].tolist() == [1.0, 0.5, 0.5, 0.0, 0.0, 2 / 3]


def test_run_from_a_ranking() -> None:
    ranking = Ranking(["qa", "qb"], ["x", "y", "z"], np.array([[2, 0, -1], [1, -1, -1]]),
                      np.array([[0.9, 0.5, -np.inf], [0.3, -np.inf, -np.inf]], dtype=np.float32))
    run = Run.from_ranking(ranking)
    assert dict(run) == {"qa": ("z", "x"), "qb": ("y",)}
    assert run.scores("qa") == pytest.approx((0.9, 0.5))
    renamed = Run.from_ranking(ranking, query_ids=["a", "b"], tool_ids=["t0", "t1", "t2"])
    assert dict(renamed) == {"a": ("t2", "t0"), "b": ("t1",)}
    with pytest.raises(EvaluationError, match="3 query ids"):
        Run.from_ranking(ranking, query_ids=["a", "b", "c"])


# ----------------------------------------------------------------------------------------- errors
def test_a_run_query_missing_from_the_qrels_is_named() -> None:
    with pytest.raises(EvaluationError, match=r"run query 'q-typo' is not in the qrels"):
        evaluate(Run.from_dict({**RANKED, "q-typo": ["t01"]}), Qrels.from_dict(QRELS))


def test_a_non_integer_relevance_is_named(tmp_path: Path) -> None:
    with pytest.raises(EvaluationError, match=r"query 'q2'.*tool 't7'.*1.5, not an integer"):
        Qrels.from_dict({"q1": {"t1": 1}, "q2": {"t7": 1.5}})
    with pytest.raises(EvaluationError, match=r"query 'q1'.*True, not an integer"):
        Qrels.from_dict({"q1": {"t1": True}})
    path = tmp_path / "bad.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq1\tt1\t1\nq9\tt2\t0.5\n", encoding="utf-8")
    with pytest.raises(EvaluationError, match=r"bad.tsv:3: query 'q9': relevance of tool 't2' is '0.5'"):
        Qrels.from_tsv(path)


def test_duplicate_tools_in_one_ranked_list_are_named(tmp_path: Path) -> None:
    with pytest.raises(EvaluationError, match=r"query 'q2': tool 't3' is ranked twice \(ranks 1 and 3\)"):
        Run.from_dict({"q1": ["t1"], "q2": ["t3", "t4", "t3"]})
    ranking = Ranking(["qa"], ["x", "y"], np.array([[1, 0, 1]]), np.zeros((1, 3)))
    with pytest.raises(EvaluationError, match=r"query 'qa': tool 'y' is ranked twice"):
        Run.from_ranking(ranking)
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"query_id": "q5", "ranked": ["a", "b", "a"]}) + "\n", encoding="utf-8")
    with pytest.raises(EvaluationError, match=r"query 'q5': tool 'a' is ranked twice"):
        Run.from_jsonl(path)


# ---------------------------------------------------------------------------------------- compare
@pytest.mark.parametrize(("p", "expected"), [
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
    ([0.5, 0.6], [1.0, 1.0]),  # 2 x 0.5 capped at 1, then the running max
    ([0.02, 0.021], [0.04, 0.04]),  # 0.021 x 1 < 0.04: the step-down max keeps the order
    ([0.2], [0.2]),
    ([], []),
])
def test_holm_matches_hand_computed_values(p: list[float], expected: list[float]) -> None:
    assert holm_adjust(p) == pytest.approx(expected)


def _system(hits: list[int]) -> tuple[Run, Qrels]:
    """``len(hits)`` queries with gold ``g<i>``; the system ranks it first where ``hits[i]``, else a miss."""
    qrels = Qrels.from_gold({f"q{i:02d}": [f"g{i}"] for i in range(len(hits))})
    return Run.from_dict({f"q{i:02d}": [f"g{i}"] if h else ["other"] for i, h in enumerate(hits)}), qrels


def test_compare_collapses_identical_systems_and_holm_counts_distinct_comparisons() -> None:
    base_run, qrels = _system([1] + [0] * 11)
    strong_run, _ = _system([1] * 11 + [0])
    mid_run, _ = _system([1, 1, 1] + [0] * 9)
    results = {name: evaluate(run, qrels, ks=(1,), bootstrap_samples=0) for name, run in
               [("base", base_run), ("strong", strong_run), ("strong-copy", strong_run),
                ("mid", mid_run), ("base-copy", base_run)]}
    cmp = compare(results, baseline=["base", "base-copy"], metric="recall@1")
    assert cmp.systems == ["base", "strong", "mid"]
    assert cmp.identical == {"base": ["base-copy"], "strong": ["strong-copy"]}
    assert cmp.reference == {"recall@1": "base"}
    assert [t.system for t in cmp.tests] == ["strong", "mid"]  # neither copy is tested
    # exact sign-flip test (2**12 <= n_samples): strong - base is +1 on 10 queries, 0 on 2, so only the two
    # all-same-sign flips of the 10 (times 2**2 flips of the zeros) are as extreme: p = 8 / 4096; mid: +1 on 2 -> 0.5
    raw = {t.system: t.p_value for t in cmp.tests}
    assert raw == {"strong": pytest.approx(8 / 4096), "mid": pytest.approx(0.5)}
    holm = {t.system: t.p_holm for t in cmp.tests}
    assert holm["strong"] == pytest.approx(2 * 8 / 4096)  # 2 distinct comparisons, not 4
    assert holm == dict(zip(raw, holm_adjust(list(raw.values()))))
    assert [t.significant for t in cmp.tests] == [True, False]
    assert cmp.table()[0] == {"metric": "recall@1", "system": "strong", "reference": "base", "test": "randomization",
                              "p_value": raw["strong"], "mean_diff": 10 / 12, "n": 12, "p_holm": holm["strong"],
                              "significant": True}


def test_compare_picks_the_strongest_baseline_and_pairs_by_query_id() -> None:
    weak, qrels = _system([1, 0, 0, 0, 0, 0, 0, 0])
    better, _ = _system([1, 1, 0, 0, 0, 0, 0, 0])
    sys_a, _ = _system([1, 1, 1, 1, 1, 0, 0, 0])
    results = {n: evaluate(r, qrels, ks=(1,), bootstrap_samples=0) for n, r in
               [("weak", weak), ("better", better), ("a", sys_a)]}
    cmp = compare(results, baseline=["weak", "better"], metric=["recall@1", "mrr"])
    assert cmp.reference == {"recall@1": "better", "mrr": "better"}
    assert {(t.metric, t.system) for t in cmp.tests} == {(m, s) for m in ("recall@1", "mrr") for s in ("weak", "a")}
    assert compare(results, metric="recall@1").reference == {"recall@1": "a"}  # no baseline: every system
    # pairing by id: the same values in another query order give the same test
    a = results["a"]
    order = list(reversed(range(len(a.query_ids))))
    shuffled = EvalResult(tuple(a.query_ids[i] for i in order), {m: v[order] for m, v in a.per_query.items()}, a.means)
    again = compare({"weak": results["weak"], "better": results["better"], "a": shuffled},
                    baseline=["weak", "better"], metric=["recall@1", "mrr"])
    assert [(t.p_value, t.mean_diff) for t in again.tests] == [(t.p_value, t.mean_diff) for t in cmp.tests]
    with pytest.raises(EvaluationError, match="baseline 'bm25' is not among the results"):
        compare(results, baseline="bm25")


# ------------------------------------------------------------------------------------- no imports
@pytest.mark.integration
def test_the_api_imports_no_catalog_mlflow_or_dagster() -> None:
    """In a fresh interpreter, importing and using the whole API (lazy imports included) loads none of them."""
    code = """
import json, sys
from toolret.evaluate_api import Qrels, Run, compare, evaluate
qrels = Qrels.from_dict({"q1": {"a": 1}, "q2": {"b": 1}})
r = evaluate(Run.from_dict({"q1": ["a"], "q2": ["c", "b"]}), qrels, bootstrap_samples=20)
compare({"x": r, "y": evaluate(Run.from_dict({"q1": ["b"]}), qrels, bootstrap_samples=20)}, baseline="x")
print(json.dumps(sorted(sys.modules)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    modules = set(json.loads(out.stdout))
    assert "toolret.evaluate_api" in modules and "toolret.metrics" in modules  # the probe did import it
    assert "mlflow" not in modules
    assert not {m for m in modules if m == "dagster" or m.startswith("dagster.")}
    assert not {m for m in modules if m == "toolret.catalog" or m.startswith("toolret.catalog.")}
    assert not {m for m in modules if m.startswith("toolret.tracking")}
