"""Exploration (toolret.gateway.explore): a share of searches shows one random adjacent pair swapped, seeded,
with each shown tool's policy-aware propensity in the receipt; share 0 changes nothing. Then a real gateway
(the weather test server, BM25) with explore 1.0 and 0, and its receipts through ``toolret feedback``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from toolret.errors import CatalogError
from toolret.feedback.query_set import build_feedback
from toolret.gateway import Gateway, config_from_dict
from toolret.gateway.explore import Explorer, exposure
from toolret.gateway.receipts import read_receipts

WEATHER = Path(__file__).resolve().parents[1] / "gateway" / "servers" / "weather_server.py"


def _hits(n: int) -> list[dict]:
    return [{"tool_id": f"t{i}", "score": float(10 - i)} for i in range(n)]


def test_exposure_by_hand() -> None:
    # 3 shown, always explored: pairs (1,2) and (2,3) each with probability 1/2; examination 1, 1/2, 1/3
    assert exposure(1, 3, 1.0) == pytest.approx(0.5 * 1 + 0.5 * 0.5)
    assert exposure(2, 3, 1.0) == pytest.approx(0.5 * 1 + 0.5 * (1 / 3))
    assert exposure(3, 3, 1.0) == pytest.approx(0.5 * 0.5 + 0.5 * (1 / 3))
    assert exposure(1, 3, 0.1) == pytest.approx(0.9 * 1 + 0.1 * 0.75)
    assert exposure(2, 3, 0.0) == 0.5 and exposure(1, 1, 1.0) == 1.0
    # a swap moves examination between tools, it does not create any
    assert sum(exposure(r, 5, 0.3) for r in range(1, 6)) == pytest.approx(sum(1 / r for r in range(1, 6)))


def test_always_exploring_swaps_one_adjacent_pair_reproducibly() -> None:
    runs = []
    for _ in range(2):
        explorer = Explorer(1.0, seed=7)
        runs.append([explorer.show(_hits(5)) for _ in range(20)])
    assert [[h["tool_id"] for h in shown] for shown, _ in runs[0]] == \
           [[h["tool_id"] for h in shown] for shown, _ in runs[1]]  # same seed, same orders
    swaps = set()
    for shown, fields in runs[0]:
        a, b = fields["explore"]["swap"]
        assert b == a + 1
        expected = [f"t{i}" for i in range(5)]
        expected[a - 1], expected[b - 1] = expected[b - 1], expected[a - 1]
        assert [h["tool_id"] for h in shown] == expected
        assert [(e["rank"], e["ranked"]) for e in fields["shown"]] == [(r + 1, int(t[1]) + 1)
                                                                       for r, t in enumerate(expected)]
        assert all(e["propensity"] == pytest.approx(exposure(e["ranked"], 5, 1.0), abs=1e-6) for e in fields["shown"])
        swaps.add(a)
    assert len(swaps) >= 3  # the pair is drawn, not fixed


def test_no_exploration_changes_nothing() -> None:
    hits = _hits(4)
    assert Explorer(0.0).show(hits) == (hits, None)


def test_explore_must_be_a_share() -> None:
    with pytest.raises(CatalogError, match="explore"):
        config_from_dict({"explore": 1.5, "servers": [{"name": "w", "command": "x"}]})


def _serve(tmp: Path, explore: float) -> tuple[list[list[str]], list[dict]]:
    log = tmp / f"receipts-{explore}.jsonl"
    config = config_from_dict({"pipeline": "bm25", "explore": explore, "explore_seed": 3, "heartbeat_s": 0,
                               "servers": [{"name": "weather", "command": [sys.executable, str(WEATHER)]}]})

    async def main():
        orders = []
        async with Gateway(config, receipts=log) as gw:
            for i in range(6):
                answer = await gw.search("the forecast of the moon for a city, or a new tool to convert money", k=4, session=f"s{i}")
                orders.append([h["tool_id"] for h in answer["hits"]])
                await gw.call_tool("weather__get_forecast", {"city": "Oslo"}, session=f"s{i}")
        return orders

    return anyio.run(main), read_receipts(log)


def test_a_gateway_exploring_every_search_writes_propensities_feedback_reads(tmp_path: Path) -> None:
    plain, plain_receipts = _serve(tmp_path, 0.0)
    assert all(order == plain[0] for order in plain)  # deterministic ranking
    searches = [r for r in plain_receipts if r["event"] == "search"]
    assert all("explore" not in r and set(r["shown"][0]) == {"id", "score"} for r in searches)
    explored, receipts = _serve(tmp_path, 1.0)
    searches = [r for r in receipts if r["event"] == "search"]
    for order, r in zip(explored, searches):
        a, b = r["explore"]["swap"]
        expected = list(plain[0])
        expected[a - 1], expected[b - 1] = expected[b - 1], expected[a - 1]
        assert order == expected == [e["id"] for e in r["shown"]]
        assert all(0 < e["propensity"] <= 1 for e in r["shown"])
    report = build_feedback([tmp_path / "receipts-1.0.jsonl"], tmp_path / "fb", holdout=0.0)
    assert report["clicks"] == 6 and report["propensity_from_receipts"] == 6
    (pair,) = [json.loads(line) for line in (tmp_path / "fb" / "propensities.jsonl").read_text().splitlines()]
    assert pair["sources"] == ["receipt"] * 6 and pair["count"] == 6
