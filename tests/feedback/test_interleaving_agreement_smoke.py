"""``benchmarks/interleaving_agreement.py`` (issue 79: does interleaving pick the better retriever?): one tiny run
on the fixture catalogue -- bm25 against a seeded random order (the floor) and hybrid against dense, a few hundred
searches each -- through the gateway's interleaver, receipts written by ``ReceiptLog`` and read back by
``toolret promote``'s credit and verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import interleaving_agreement as ia  # noqa: E402


def test_options_are_checked() -> None:
    for bad in (["--pairs", "bm25"], ["--pairs", "bm25:bm25"], ["--pairs", "bm25:nope"],
                ["--pairs", "bm25:hybrid-w1.5"], ["--schedule", "0,10"], ["--c-pos", "2"], ["--keep-receipts"]):
        with pytest.raises(SystemExit):
            ia.parse_args(bad)
    args = ia.parse_args(["--pairs", "bm25-stem-k1=1.5-b=0.3:hybrid-w0.7, dense:random", "--schedule", "500,100"])
    assert args.pair_list == [("bm25-stem-k1=1.5-b=0.3", "hybrid-w0.7"), ("dense", "random")]
    assert args.schedule == [100, 500]
    assert ia.parse_name("bm25-stem-k1=1.5-b=0.3") == {"kind": "bm25", "stem": True, "k1": 1.5, "b": 0.3}
    assert len(ia.parse_args([]).pair_list) == 10


@pytest.mark.timeout(300)
def test_a_tiny_run_finds_the_better_retriever(tmp_path: Path) -> None:
    from make_fixture import write_fixture_catalog

    from toolret.catalog.io import load_catalog
    from toolret.gateway.receipts import read_receipts

    fixture = write_fixture_catalog(tmp_path / "fixture", n_tools=30, n_train=40, n_test=20, seed=0)
    out, work = tmp_path / "record.json", tmp_path / "work"
    assert ia.main(["--catalog", str(fixture), "--pairs", "bm25:random,hybrid-w0.5:dense", "--schedule", "100,300",
                    "--step", "10", "--seed", "3", "--work", str(work), "--keep-receipts", "--bootstrap", "200",
                    "--out", str(out), "--quiet"]) == 0
    record = json.loads(out.read_text())
    assert [p["pair"] for p in record["pairs"]] == [["bm25", "random"], ["hybrid-w0.5", "dense"]]

    good = record["pairs"][0]
    assert {good["champion"], good["challenger"]} == {"bm25", "random"}
    # the test metric: bm25 far above a random order, significantly
    t = good["test"]["recall@5"]
    assert t["bm25"] > t["random"] and t["significant"] and t["better"] == "bm25"
    # the interleaving verdict: bm25, at both checkpoints, with (almost) every non-tied search won by bm25's team
    assert good["winner"] == "bm25" and good["agrees"] and good["agrees_with"]["recall@5"]
    assert [v["winner"] for v in good["verdicts"]] == ["bm25", "bm25"]
    last = good["verdicts"][-1]
    bm25_wins = last["wins"] if good["challenger"] == "bm25" else last["losses"]
    assert last["n"] > 50 and bm25_wins > 0.8 * last["n"] and last["p"] < 0.05
    assert [v["promote"] for v in good["verdicts"]] == [good["challenger"] == "bm25"] * 2
    assert good["searches_needed"] is not None and good["searches_needed"] <= 100
    assert record["summary"]["agreements_significant_test"] >= 1
    assert all(record["summary"]["agreements_at"][n]["all"] >= 1 for n in ("100", "300"))

    # the receipts are the gateway's: every search interleaved the pair (teams from both), calls credited
    catalog = load_catalog(fixture)
    test_texts = {q.text for q in catalog.split("test")}
    for i, p in enumerate(record["pairs"]):
        recs = read_receipts(work / f"pair-{i}.jsonl")
        searches = [r for r in recs if r["event"] == "search"]
        calls = [r for r in recs if r["event"] == "call"]
        assert len(searches) == 300 and p["traffic"]["searches"] == 300
        assert len(calls) == p["traffic"]["calls"] == p["receipts_read"]["calls_credited"] > 0
        assert all(r["interleave"]["champion"] == p["champion"] and r["interleave"]["challenger"] == p["challenger"]
                   for r in searches)
        teams = {h["team"] for r in searches for h in r["shown"]}
        assert teams == {"champion", "challenger"}
        assert not {r["query"] for r in searches} & test_texts  # test queries are never traffic
        # the verdict's counts grow with the searches and never exceed the searches with a call
        a, b = p["verdicts"]
        assert a["searches_with_clicks"] <= b["searches_with_clicks"] <= p["traffic"]["searches_with_calls"]
        assert b["wins"] + b["losses"] + b["ties"] == b["searches_with_clicks"]
    assert record["settings"]["schedule"] == [100, 300]
    assert str(tmp_path) not in json.dumps({k: v for k, v in record.items() if k != "command"})
