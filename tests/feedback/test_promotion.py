"""Champion and challenger: adapt registers a second model as the challenger; ``promote`` makes it champion
only when it wins on the held-out feedback (paired test) or on interleaved searches (sign test), p < 0.05;
every decision is an MLflow run. Real BM25 indexes, a real MLflow sqlite registry, receipts as the gateway
writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from receipt_lines import call, search, write
from registered_models import WORDS, register as _register

from toolret.adapt.champions import CHALLENGER, CHAMPION, alias_version
from toolret.adapt.run import EXPERIMENT
from toolret.adapt.promotion import promote
from toolret.errors import ToolretError
from toolret.feedback.query_set import build_feedback
from toolret.tracking import get_client

def _feedback(tmp_path: Path) -> Path:
    recs = []
    for i in range(20):  # the newest 10 searches held out; each called the tool of its words
        recs += [search(60 * i, f"s{i}", f"{WORDS[i % 8]} please, number {i}", [f"t{i % 8}"]),
                 call(60 * i + 1, f"s{i}", f"t{i % 8}")]
    build_feedback([write(tmp_path / "r.jsonl", recs)], tmp_path / "fb", holdout=0.5)
    return tmp_path / "fb"


@pytest.fixture(scope="module")
def uri(tmp_path_factory) -> str:
    """One sqlite store for the module (creating one runs MLflow's migrations: seconds, done once here)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    get_client(uri).search_experiments()
    return uri


def test_the_second_adapt_is_the_challenger_and_wins_on_held_out_feedback(tmp_path: Path, uri: str) -> None:
    out = tmp_path / "data" / "adapt" / "shop"
    first = _register(out, "shop", 1, uri)   # a champion whose documents are off by one tool
    second = _register(out, "shop", 0, uri)  # the right documents
    assert (first["role"], first["uri"], second["role"], second["uri"]) == (
        CHAMPION, "models:/adapt-shop@champion", CHALLENGER, "models:/adapt-shop@challenger")
    client = get_client(uri)
    assert str(alias_version(client, "adapt-shop", CHAMPION).version) == "1"
    assert (out / "champion" / "MODEL_CARD.md").read_text() == "# shop shift 1\n"  # left alone

    d = promote("shop", feedback=_feedback(tmp_path), tracking_uri=uri)
    f = d["feedback"]
    # 10 held-out queries; the challenger ranks each query's tool first (ndcg 1), the champion shows it
    # with another tool's words: every query a win; exact randomization p = 2 / 2**10
    assert (f["n"], f["wins"], f["losses"], f["challenger_ndcg@5"]) == (10, 10, 0, 1.0)
    assert f["champion_ndcg@5"] < 0.5 and f["p"] == pytest.approx(2 / 1024, abs=1e-6)
    assert d["decision"] == "promote" and d["interleaving"] is None
    assert (d["champion"], d["challenger"]) == ("adapt-shop/1", "adapt-shop/2")
    champ, prev = alias_version(client, "adapt-shop", CHAMPION), alias_version(client, "adapt-shop", "previous")
    assert alias_version(client, "adapt-shop", CHALLENGER) is None
    assert champ.tags["promoted_from"] == "2" and prev.tags["was"] == "1"
    assert (out / "champion" / "MODEL_CARD.md").read_text() == "# shop shift 0\n"
    assert (out / "previous" / "MODEL_CARD.md").read_text() == "# shop shift 1\n"
    assert not (out / "challenger").exists()
    run = client.get_run(d["mlflow_run_id"])
    assert run.info.experiment_id == client.get_experiment_by_name(EXPERIMENT).experiment_id
    assert run.data.tags["toolret.decision"] == "promote" and run.data.tags["toolret.kind"] == "promotion"
    assert run.data.metrics["feedback.n"] == 10 and run.data.metrics["feedback.wins"] == 10
    assert run.data.params["challenger"] == "adapt-shop/2"


def test_a_challenger_that_does_not_win_stays_challenger(tmp_path: Path, uri: str) -> None:
    out = tmp_path / "out"
    _register(out, "same", 0, uri)
    _register(out, "same", 0, uri)  # the same index again: every query tied
    d = promote("same", feedback=_feedback(tmp_path), tracking_uri=uri)
    assert d["decision"] == "keep" and (d["feedback"]["n"], d["feedback"]["ties"], d["feedback"]["p"]) == (10, 10, 1.0)
    client = get_client(uri)
    assert str(alias_version(client, "adapt-same", CHAMPION).version) == "1"
    assert str(alias_version(client, "adapt-same", CHALLENGER).version) == "2" and (out / "challenger").is_dir()
    run = client.get_run(d["mlflow_run_id"])
    assert run.data.tags["toolret.decision"] == "keep" and run.data.metrics["feedback.p"] == 1.0


def test_interleaving_credit_promotes(tmp_path: Path, uri: str) -> None:
    out = tmp_path / "out"
    _register(out, "inter", 0, uri)
    _register(out, "inter", 0, uri)
    pair = {"champion": "adapt-inter/1", "challenger": "adapt-inter/2"}
    shown = [{"id": "t0", "score": 1.0, "rank": 1, "team": "champion"},
             {"id": "t1", "score": 1.0, "rank": 2, "team": "challenger"}]
    recs = []
    for i in range(10):  # 9 searches whose call went to a challenger's tool, 1 to a champion's
        recs += [search(10 * i, f"s{i}", f"q{i}", shown, interleave=pair), call(10 * i + 1, f"s{i}",
                                                                                  "t1" if i else "t0")]
    log = write(tmp_path / "r.jsonl", recs)
    d = promote("inter", receipts=[log], tracking_uri=uri)
    i = d["interleaving"]
    assert (i["n"], i["wins"], i["losses"]) == (9 + 1, 9, 1) and i["p"] == pytest.approx(22 / 1024, abs=1e-6)
    assert d["decision"] == "promote" and "interleaving" in d["why"]
    assert json.loads(get_client(uri).download_artifacts(d["mlflow_run_id"], "decision.json",
                                                         str(tmp_path)) and (tmp_path / "decision.json").read_text()
                      )["interleaving"]["wins"] == 9


def test_bad_input_is_named(tmp_path: Path, uri: str) -> None:
    with pytest.raises(ToolretError, match="--feedback DIR"):
        promote("shop", tracking_uri=uri)
    _register(tmp_path / "out", "alone", 0, uri)
    with pytest.raises(ToolretError, match=r"no challenger registered \(models:/adapt-alone@challenger\)"):
        promote("alone", feedback=tmp_path, tracking_uri=uri)
