"""Retraining that follows traffic: the per-catalog Dagster sensor requests a re-adapt once N new feedback pairs
arrived in the gateway's receipts since its cursor (receipts written by the gateway's ReceiptLog, the sensor
evaluated with Dagster's build_sensor_context), and the loop file's bad input is named."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from toolret.errors import ToolretError
from toolret.feedback.loop import load_loop_config
from toolret.gateway.receipts import ReceiptLog


def _project(tmp_path: Path) -> Path:
    from make_fixture import write_fixture_catalog

    project = tmp_path / "p"
    project.mkdir()
    write_fixture_catalog(project / "mine" / "shop", n_tools=6, n_train=2, n_test=2, seed=1)
    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"noop": {"cmd": "true"}}}))
    (project / "params.yaml").write_text(yaml.safe_dump({"source": {"beir": {"shop": "mine/shop"}}}))
    (project / "feedback_loop.yaml").write_text(yaml.safe_dump({"shop": {"receipts": "logs/gw.jsonl",
                                                                         "new_pairs": 3}}))
    return project


def _pair(log: ReceiptLog, i: int) -> None:
    """One search and a call of a tool it showed: one new feedback pair."""
    log.write("search", session=f"s{i}", query=f"query {i}", k=2, shown=[{"id": "a", "score": 1.0},
                                                                        {"id": "b", "score": 0.5}])
    log.write("call", session=f"s{i}", tool="b", shown_before=True, is_error=False)


@pytest.mark.integration  # builds the project's Dagster definitions
def test_the_sensor_requests_a_re_adapt_at_n_new_pairs(tmp_path: Path) -> None:
    from dagster_project.adapt_assets import adapt_key
    from dagster_project.definitions import build_definitions

    project = _project(tmp_path)
    defs = build_definitions(project)
    sensor = defs.resolve_sensor_def("adapt_feedback_shop")
    (project / "logs").mkdir()
    log = ReceiptLog(project / "logs" / "gw.jsonl")

    def tick(cursor):
        with dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(), cursor=cursor,
                                     definitions=defs) as ctx:
            result = sensor.evaluate_tick(ctx)
        return result.run_requests or [], result.cursor

    assert tick(None) == ([], None)  # no receipts yet
    for i in range(2):
        _pair(log, i)
    log.write("search", session="lone", query="nobody called", k=1, shown=[{"id": "a", "score": 1.0}])
    assert tick(None) == ([], None)  # 2 of 3
    _pair(log, 2)
    (request,), cursor = tick(None)  # 3 new pairs
    assert cursor == "3" and request.asset_selection == [adapt_key("shop")] and request.run_key == "shop-feedback-3"
    assert tick(cursor) == ([], cursor)  # none new since
    for i in range(3, 5):
        _pair(log, i)
    assert tick(cursor)[0] == []  # 2 new
    _pair(log, 5)
    assert tick(cursor)[1] == "6"
    log.close()
    check = dg.AssetCheckKey(adapt_key("shop"), "promoted_champion_held_up")
    assert check in defs.resolve_asset_graph().asset_check_keys  # the held-up check is defined on the asset


def test_a_bad_loop_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "feedback_loop.yaml").write_text(yaml.safe_dump({"shop": {"receipts": "x", "new_pairs": 0}}))
    with pytest.raises(ToolretError, match=r"feedback_loop.yaml: shop.new_pairs: a positive integer, got 0"):
        load_loop_config(tmp_path)
    (tmp_path / "feedback_loop.yaml").write_text(yaml.safe_dump({"shop": {"receipt": "x"}}))
    with pytest.raises(ToolretError, match="shop: a mapping with receipts and new_pairs only"):
        load_loop_config(tmp_path)
    assert load_loop_config(tmp_path / "none") == {}
