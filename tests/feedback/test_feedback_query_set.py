"""``toolret feedback``: receipts -> clicks (credited to the latest search of the session that showed the tool),
time-split, merged; its folder read back for adapt, the held-out share never reaching training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from receipt_lines import call, search, write

from toolret.catalog.model import Catalog, Query, Tool
from toolret.cli import main
from toolret.errors import CatalogError
from toolret.feedback.clicks import read_clicks
from toolret.feedback.labelled_set import held_out_catalog, load_feedback, with_feedback
from toolret.feedback.query_set import build_feedback, query_id


def test_a_call_is_credited_to_the_latest_search_of_its_session_that_showed_the_tool(tmp_path: Path) -> None:
    log = write(tmp_path / "r.jsonl", [
        search(1, "A", "find the weather", ["a", "b", "c"]),
        call(2, "B", "c"),                       # another session: never shown there
        call(3, "A", "c"),
        call(4, "A", "a"),
        call(5, "A", "c"),                       # a repeat
        call(6, "A", "zz", error="GatewayError: unknown tool"),
        search(7, "A", "convert money", ["d", "c", "e"]),
        call(8, "A", "c"),                       # the newer search showed c: credited there, at rank 2
    ])
    clicks, counts = read_clicks([log])
    got = {(c.query, c.tool): (c.rank, c.propensity, c.source, c.skipped) for c in clicks}
    assert got == {("find the weather", "c"): (3, pytest.approx(1 / 3), "model", ["b"]),  # a was called: not skipped
                   ("find the weather", "a"): (1, 1.0, "model", []),
                   ("convert money", "c"): (2, 0.5, "model", ["d"])}
    assert (counts["calls_not_shown"], counts["repeat_calls"], counts["calls_refused"]) == (1, 1, 1)


def test_a_receipt_propensity_wins_over_the_model(tmp_path: Path) -> None:
    shown = [{"id": "a", "score": 2.0, "rank": 1, "ranked": 2, "propensity": 0.8},
             {"id": "b", "score": 3.0, "rank": 2, "ranked": 1, "propensity": 0.9}]
    log = write(tmp_path / "r.jsonl", [search(1, "s", "q", shown), call(2, "s", "b")])
    (click,), _ = read_clicks([log])
    assert (click.rank, click.propensity, click.source, click.skipped) == (2, 0.9, "receipt", ["a"])


def test_a_malformed_receipt_is_named_by_file_and_line(tmp_path: Path) -> None:
    log = write(tmp_path / "r.jsonl", [search(1, "s", "q", ["a"]), {**search(2, "s", "q", ["a"]), "shown": "a"}])
    with pytest.raises(CatalogError, match=r"r\.jsonl:2: .*'shown'"):
        read_clicks([log])
    with pytest.raises(CatalogError, match="no receipts file"):
        read_clicks([tmp_path / "missing.jsonl"])


def _traffic(tmp_path: Path) -> Path:
    """Ten searches a minute apart, one call each; the two newest are held out at --holdout 0.2. The planted
    query is asked in an old search too (same tool): that training pair must be dropped."""
    recs = []
    for i in range(10):
        text = "PLANTED secret request" if i in (2, 9) else f"request number {i}"
        recs += [search(60 * i, f"s{i}", text, ["t1", "t2", "t3"]), call(60 * i + 1, f"s{i}", "t2")]
    recs += [search(700, "x", "request  number 1", ["t3", "t2"]), call(701, "x", "t2")]  # duplicate of #1 (spaces)
    return write(tmp_path / "r.jsonl", recs)


def test_time_split_merge_and_the_held_out_share(tmp_path: Path) -> None:
    report = build_feedback([_traffic(tmp_path)], tmp_path / "fb", holdout=0.2)
    # 11 searches with a click: ceil(0.2 * 11) = 3 newest held out (#9 at 540 s, the duplicate at 700 s, #8)
    assert report["clicks"] == 11 and report["test"]["clicks"] == 3
    # the old PLANTED pair and the old "request number 1" pair: their texts are held out
    assert report["train_pairs_dropped_as_held_out"] == 2
    assert report["duplicates_merged"] == 0
    queries = [json.loads(line) for line in (tmp_path / "fb" / "queries.jsonl").read_text().splitlines()]
    split = {q["text"]: q["metadata"]["split"] for q in queries}
    assert split["PLANTED secret request"] == "test" and split["request number 0"] == "train"
    assert "request number 1" in split and split["request number 1"] == "test"
    train_qrels = (tmp_path / "fb" / "qrels" / "train.tsv").read_text()
    assert query_id("PLANTED secret request") not in train_qrels
    props = {json.loads(line)["query_id"]: json.loads(line) for line in
             (tmp_path / "fb" / "propensities.jsonl").read_text().splitlines()}
    dup = props[query_id("request number 1")]
    assert (dup["count"], dup["ranks"], dup["skipped"]) == (1, [2], ["t3"])
    assert props[query_id("request number 0")]["weight"] == 2.0  # rank 2: 1 / (1/2)


def test_duplicates_on_one_side_are_merged_with_their_weights_summed(tmp_path: Path) -> None:
    recs = [search(0, "a", "book a room", ["h1", "h2"]), call(1, "a", "h2"),
            search(10, "b", "book  a room ", ["h2", "h1"]), call(11, "b", "h2"),
            search(20, "c", "later", ["h1"]), call(21, "c", "h1")]
    report = build_feedback([write(tmp_path / "r.jsonl", recs)], tmp_path / "fb", holdout=0.2)
    assert report["duplicates_merged"] == 1 and report["train"]["pairs"] == 1 and report["test"]["pairs"] == 1
    (pair,) = [json.loads(line) for line in (tmp_path / "fb" / "propensities.jsonl").read_text().splitlines()
               if json.loads(line)["split"] == "train"]
    assert (pair["count"], pair["ranks"], pair["weight"]) == (2, [2, 1], 3.0)


def test_the_cli_writes_the_folder_and_prints_the_counts(tmp_path: Path, capsys) -> None:
    assert main(["feedback", "--receipts", str(_traffic(tmp_path)), "--out", str(tmp_path / "fb")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["clicks"] == 11 and "held out (newest 20%" in err
    assert main(["feedback", "--receipts", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "x")]) == 2
    assert "none.jsonl" in capsys.readouterr().err and not (tmp_path / "x").exists()


def _tools() -> Catalog:
    return Catalog("toy", [Tool(id=t, name=t, docs={"original": f"tool {t}"}) for t in ("t1", "t2", "t3")], [], {})


def test_held_out_feedback_never_reaches_training(tmp_path: Path) -> None:
    build_feedback([_traffic(tmp_path)], tmp_path / "fb", holdout=0.2)
    tools = _tools()
    fb = load_feedback(tmp_path / "fb", tools.tool_ids)
    synthetic = Catalog("toy", tools.tools, [Query("s1", "synthetic one", "train"), Query("d1", "dev one", "dev")],
                        {"s1": {"t1": 1}, "d1": {"t3": 1}}, {"dev_subsets": {"d1": "unseen"}})
    for weighted in (True, False):
        training = with_feedback(synthetic, fb, weighted=weighted)
        texts = [q.text for q in training.split("train")]
        assert "PLANTED secret request" not in texts and "synthetic one" in texts
        assert training.split("dev") == synthetic.split("dev")
        # request number 0 was clicked at rank 2 (weight 2): twice weighted, once plain
        assert texts.count("request number 0") == (2 if weighted else 1)
    held = held_out_catalog(tools, fb)
    assert "PLANTED secret request" in [q.text for q in held.split("test")]
    assert len(held.split("test")) == 3


def test_a_feedback_folder_with_a_bad_record_is_named(tmp_path: Path) -> None:
    build_feedback([_traffic(tmp_path)], tmp_path / "fb", holdout=0.2)
    path = tmp_path / "fb" / "propensities.jsonl"
    path.write_text(path.read_text() + '{"query_id": "nope", "tool": "t1", "weight": 1}\n')
    with pytest.raises(CatalogError, match=r"propensities\.jsonl:\d+: query 'nope'"):
        load_feedback(tmp_path / "fb", ["t1", "t2", "t3"])
    fb_dropped = tmp_path / "fb2"
    build_feedback([_traffic(tmp_path)], fb_dropped, holdout=0.2)
    # t2 gone from the catalog: its pairs dropped (11 clicks, 2 training pairs dropped as held out: 9 pairs)
    assert load_feedback(fb_dropped, ["t1"]).dropped == 9
