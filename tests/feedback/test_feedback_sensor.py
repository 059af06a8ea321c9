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


PAIRS = 24  # the loop file's new_pairs: the sensor's threshold


@pytest.mark.integration
@pytest.mark.slow  # a real `toolret adapt --feedback` of a 30-tool catalog with the test LLM (~1-2 min)
@pytest.mark.timeout(1200)
def test_the_sensor_s_run_re_adapts_the_catalog_on_its_feedback(tmp_path: Path) -> None:
    """Receipts written by the gateway's ReceiptLog reach the threshold; the run the sensor requests is executed
    as Dagster executes it (the adapt job, the requested asset): `toolret feedback` over the receipts, then
    `toolret adapt --feedback` with the project's `adapt:` settings (the test LLM, whose requests for this catalog
    are committed shards), and the champion it writes was trained on those pairs."""
    import json
    import shutil

    from make_fixture import write_fixture_catalog

    from dagster_project.adapt_assets import adapt_key
    from dagster_project.definitions import build_definitions
    from toolret.catalog.io import load_catalog

    project = tmp_path / "p"
    project.mkdir()
    # the catalog tests/adapt/test_adapt.py adapts: its requests by the test LLM are committed shards
    folder = write_fixture_catalog(project / "mine" / "shop", n_tools=30, n_train=40, n_test=20, seed=0)
    shards = project / "data" / "adapt" / "shop" / "generations" / "smollm2-135m-instruct"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "adapt_generations", shards)
    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"noop": {"cmd": "true"}}}))
    (project / "params.yaml").write_text(yaml.safe_dump({
        "source": {"beir": {"shop": "mine/shop"}},
        "adapt": {"llm_model": "smollm2-135m-instruct", "n": 2, "candidates": ["bm25", "dense", "dense-ft"],
                  "finetune": {"epochs": 1, "max_train_pairs": 0}}}))
    (project / "feedback_loop.yaml").write_text(yaml.safe_dump({"shop": {"receipts": "logs/gw.jsonl",
                                                                         "new_pairs": PAIRS}}))
    catalog = load_catalog(folder)
    (project / "logs").mkdir()
    log = ReceiptLog(project / "logs" / "gw.jsonl")
    for i, q in enumerate(catalog.split("train")[:PAIRS]):  # an agent found and called a gold tool of each
        gold = sorted(catalog.gold(q.id))[0]
        others = [t for t in catalog.tool_ids if t != gold][i % 7: i % 7 + 2]
        log.write("search", session=f"s{i}", query=q.text, k=3,
                  shown=[{"id": t, "score": 1.0 - r / 10} for r, t in enumerate([*others, gold])])
        log.write("call", session=f"s{i}", tool=gold, shown_before=True, is_error=False)
    log.close()

    defs = build_definitions(project)
    with dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(), definitions=defs) as ctx:
        tick = defs.resolve_sensor_def("adapt_feedback_shop").evaluate_tick(ctx)
    (request,) = tick.run_requests
    assert request.asset_selection == [adapt_key("shop")] and tick.cursor == str(PAIRS)

    result = defs.resolve_job_def("adapt_job").execute_in_process(
        asset_selection=request.asset_selection, tags=request.tags, instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    report = json.loads((project / "data" / "adapt" / "shop" / "adapt_report.json").read_text())
    fb = report["feedback"]
    # the oldest 19 of the 24 clicked searches trained on, the newest 20% (4.8, rounded up) held out (toolret
    # feedback's default), every pair a catalog tool; too few held out to choose: synthetic dev chose
    assert (fb["train_queries"], fb["train_pairs"], fb["held_out_queries"]) == (19, 19, 5)
    assert fb["pairs_of_tools_not_in_the_catalog"] == 0 and fb["chose_the_champion"] is False
    assert fb["folder"] == str(project / "data" / "feedback" / "shop")
    # the project's adapt settings, not the CLI's defaults: the test LLM (its committed shards answered), these
    # candidates, dense-ft trained on every pair for one epoch
    assert report["generator"]["model"] == "smollm2-135m-instruct" and report["generation"]["generated_this_run"] == 0
    assert set(report["dev"]) == {"bm25", "dense", "dense-ft"}
    ft = json.loads((project / "data" / "adapt" / "shop" / "work" / "dense-ft" / "finetune.json").read_text())
    assert (ft["config"]["epochs"], ft["config"]["max_train_pairs"]) == (1, 0)
    assert (project / "data" / "adapt" / "shop" / report["role"] / "pipeline.json").is_file()
    (mat,) = result.asset_materializations_for_node("adapt__shop")
    assert mat.asset_key == adapt_key("shop") and mat.metadata["champion"].value == report["selection"]["champion"]
