"""``benchmarks/feedback_loop.py`` (issue 79's traffic simulator): the fast checks of its pieces, then one tiny run on
the fixture catalogue with the test LLM (6 tools, 1 request per tool, bm25 / dense / dense-ft / dense-ft-plain,
one LoRA step): the record's structure, receipts written by the gateway and read by ``toolret feedback``'s reader,
no test query in any receipt, and a rerun with one more checkpoint that continues after the finished round."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import feedback_loop  # noqa: E402

TOOLS = 6  # the fewer tools, the fewer requests the test LLM writes (most of the run's time)


def test_traffic_is_a_seeded_shuffle_per_pass() -> None:
    pool = list(range(7))
    a, b = feedback_loop.Traffic(pool, 3), feedback_loop.Traffic(pool, 3)
    first = [a[i] for i in range(21)]
    assert first == [b[i] for i in range(21)]  # reproducible (a resumed round serves the same queries)
    assert all(sorted(first[p * 7:(p + 1) * 7]) == pool for p in range(3))  # each pass: every query once
    assert first[:7] != first[7:14]  # a new order per pass
    assert [feedback_loop.Traffic(pool, 4)[i] for i in range(7)] != first[:7]


def test_options_are_checked() -> None:
    with pytest.raises(SystemExit):
        feedback_loop.parse_args(["--catalog", "x", "--searches", "40,20"])
    with pytest.raises(SystemExit):
        feedback_loop.parse_args(["--catalog", "x", "--c-pos", "1.5"])
    args = feedback_loop.parse_args(["--catalog", "x", "--finetune", "epochs=1,max_train_pairs=64,lr=1e-3",
                                     "--candidates", "bm25, dense-ft"])
    assert args.checkpoints == [1000, 4000, 16000] and args.candidates == ["bm25", "dense-ft"]
    assert args.finetune == {"epochs": 1, "max_train_pairs": 64, "lr": 1e-3}


def test_adapt_candidates_can_be_restricted(tmp_path: Path) -> None:
    from toolret.adapt.candidates import candidates
    from toolret.adapt.run import restrict_candidates
    from toolret.catalog.model import Catalog, Tool
    from toolret.config import load_params
    from toolret.errors import AdaptInputError

    tools = Catalog("toy", [Tool(id="t0", name="a", docs={"original": "a tool"}, tool="p0")], [], {})
    pool = candidates(tools, load_params(), tmp_path, "fast", 2)
    assert [c.name for c in restrict_candidates(pool, ["dense-ft", "bm25", "dense-ft-plain"])] == ["bm25", "dense-ft"]
    assert restrict_candidates(pool, None) == pool
    for bad, why in ((["dense-ft"], "untrained"), (["bm25", "nope"], "not adapt candidates"),
                     (["bm25", "hybrid-ft"], "weight from")):
        with pytest.raises(AdaptInputError, match=why):
            restrict_candidates(pool, bad)


def _run(fixture: Path, work: Path, out: Path, searches: str, llm) -> dict:
    assert feedback_loop.main(["--catalog", str(fixture), "--searches", searches, "--n", "1",
                               "--finetune", "epochs=1,max_train_pairs=32",
                               "--candidates", "bm25,dense,dense-ft,dense-ft-plain", "--llm-model",
                               "smollm2-135m-instruct", "--compare-bias", "--explore", "0.5", "--c-pos", "0.9",
                               "--c-neg", "0.05", "--seed", "1", "--work", str(work), "--out", str(out),
                               "--quiet"], llm=llm) == 0
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.integration  # starts the catalogue's MCP server for the gateway
@pytest.mark.timeout(1800)
def test_a_tiny_loop_runs_and_resumes(tmp_path: Path) -> None:
    from make_fixture import write_fixture_catalog

    from toolret.catalog.io import load_catalog
    from toolret.feedback.clicks import read_clicks
    from toolret.gateway.receipts import read_receipts

    from toolret.llm.models import ensure_local_model
    from toolret.llm.transformers_backend import TransformersGenerator

    llm = TransformersGenerator(model=str(ensure_local_model()), batch_size=8, progress=False)  # loaded once
    fixture = write_fixture_catalog(tmp_path / "fixture", n_tools=TOOLS, n_train=30, n_test=10, seed=0)
    test_texts = {" ".join(q.text.split()).lower() for q in load_catalog(fixture).split("test")}
    work, out = tmp_path / "work", tmp_path / "record.json"
    record = _run(fixture, work, out, "24", llm)

    assert record["complete"] and [r["searches"] for r in record["rounds"]] == [0, 24]
    model = record["click_model"]
    assert (model["eta"], model["c_pos"], model["c_neg"], model["session_searches"]) == (1.0, 0.9, 0.05, 3)
    assert record["catalog"]["test_queries"] == 10 and record["catalog"]["traffic_pool"] == 30
    assert "promoted when it beats" in record["promotion"]["rule"]
    for r in record["rounds"]:
        t = r["test"]
        assert 0 <= t["recall@5_ci95"][0] <= t["recall@5"] <= t["recall@5_ci95"][1] <= 1 and t["n_queries"] == 10
        expected = ["bm25", "dense", "dense-ft"] + (["dense-ft-plain"] if r["round"] else [])  # plain: feedback only
        assert r["adapt"]["candidates"] == expected and r["champion"] in expected
    one = record["rounds"][1]
    assert one["traffic"]["searches"] == one["traffic"]["searches_in_receipts"] == 24
    assert one["traffic"]["served_by"] == record["rounds"][0]["champion"]
    # the round's adapt champion is a challenger; toolret promote's held-out-feedback rule decides, in MLflow
    decision = one["promotion"]
    assert decision["decision"] == ("promote" if decision["feedback"]["challenger_wins"] else "keep")
    assert one["champion"] == (one["challenger"] if decision["decision"] == "promote"
                               else record["rounds"][0]["champion"])
    from toolret.tracking import get_client

    client = get_client(f"sqlite:///{work / 'mlflow.db'}")
    run = client.get_run(decision["mlflow_run"])
    assert run.data.tags["toolret.kind"] == "promotion" and run.data.params["decision"] == decision["decision"]
    assert 0 <= one["challenger_test"]["recall@5"] <= 1
    assert one["adapt"]["feedback"]["train_queries"] > 0
    bias = one["bias_comparison"]
    assert {bias["weighted"]["candidate"], bias["plain"]["candidate"]} == {"dense-ft", "dense-ft-plain"}
    assert 0 <= bias["p_value_recall@5"] <= 1 and bias["n_queries"] == 10

    # the receipts are the gateway's (its re-index receipt, the explorer's ranks and propensities) and
    # toolret feedback's reader credits the agent's calls to them; no test query was ever searched
    log = work / "rounds" / "1" / "receipts.jsonl"
    receipts = read_receipts(log)
    assert receipts[0]["event"] == "tools" and len(receipts[0]["tools"]) == TOOLS
    searches = [r for r in receipts if r["event"] == "search"]
    assert len(searches) == 24 and all({"rank", "ranked", "propensity"} <= set(s["shown"][0]) for s in searches)
    assert not {" ".join(s["query"].split()).lower() for s in searches} & test_texts
    clicks, counts = read_clicks([log])
    assert counts["searches"] == 24 and clicks and counts["calls_credited"] == one["traffic"]["calls"]
    assert all(c.tool.startswith("catalog__") and c.source == "receipt" for c in clicks)

    # a rerun with one more checkpoint continues after round 1: nothing of it is recomputed; a round killed
    # part-way (its receipts begun, no round.json) is redone from its start
    finished = (work / "rounds" / "1" / "round.json")
    stamp, text = finished.stat().st_mtime_ns, finished.read_text()
    champion_stamp = (work / "rounds" / "1" / "champion").stat().st_mtime_ns
    (work / "rounds" / "2").mkdir()
    (work / "rounds" / "2" / "receipts.jsonl").write_text(json.dumps(
        {"ts": "2000-01-01T00:00:00.000Z", "event": "search", "session": "killed", "query": "KILLED", "shown": []}) + "\n")
    record = _run(fixture, work, out, "24,48", llm)
    assert [r["searches"] for r in record["rounds"]] == [0, 24, 48]
    assert finished.stat().st_mtime_ns == stamp and finished.read_text() == text
    assert (work / "rounds" / "1" / "champion").stat().st_mtime_ns == champion_stamp
    two = record["rounds"][2]
    assert two["traffic"]["from"] == 24 and two["traffic"]["searches"] == 24
    assert two["feedback"]["searches"] == 48  # toolret feedback read both rounds' receipts
    assert "KILLED" not in (work / "rounds" / "2" / "receipts.jsonl").read_text()
    # other settings in the same work folder are refused
    with pytest.raises(SystemExit, match="other settings"):
        feedback_loop.main(["--catalog", str(fixture), "--searches", "24", "--eta", "2", "--work", str(work),
                            "--out", str(out), "--quiet"])
