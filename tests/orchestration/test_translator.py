"""One translator from a DVC stage item to a Dagster asset; each part (facets, key, group, description,
tags, metadata, checks) is a method a subclass overrides, and the code location uses it throughout."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from dagster_project.definitions import build_definitions
from dagster_project.dvc_assets import DvcStage, DvcTranslator, load_stage_items

pytestmark = pytest.mark.integration

K = dg.AssetKey

DVC_YAML = {"stages": {
    "clean": {"foreach": "${datasets}", "do": {"cmd": "echo ${item}", "outs": ["data/curated/${item}"]}},
    "evaluate": {"matrix": {"dataset": "${datasets}", "method": ["dense", "dense-ft", "bm25"]},
                 "cmd": "echo", "deps": ["data/curated/${item.dataset}"],
                 "outs": ["data/runs/${item.dataset}/${item.method}"]},
    "evaluate_everything_here": {"cmd": "toolret evaluate --method bm25", "deps": ["data/runs"],
                                 "outs": ["out/all.txt"], "desc": "All of it."},
}}


def _project(tmp_path: Path) -> Path:
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(DVC_YAML))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"datasets": ["ds"]}))
    return tmp_path


def test_default_translator_parts(tmp_path: Path) -> None:
    t = DvcTranslator()
    stage = DvcStage("index@x", "index", "x", None, "toolret index --method bm25", ("data/indexes/x/bm25",),
                     frozenset({"x"}))
    assert t.facets(stage) == {"item": "x", "dataset": "x", "method": "bm25"}
    assert t.key_path(stage, t.facets(stage)) == ("index", "x.bm25")
    fit = DvcStage("fit@y", "fit", "y", None, "toolret fit --component reinvoke-qgen", ("elsewhere/y",))
    assert t.facets(fit) == {"item": "y", "method": "reinvoke-qgen"}
    assert t.group_name("evaluate_toolrerank") == "eval_toolrerank"
    items = {i.name: i for i in load_stage_items(_project(tmp_path))}
    assert [(ft.name, base.name) for ft, base in t.gated_pairs(list(items.values()))] == [
        ("evaluate@ds-dense-ft", "evaluate@ds-dense")]
    assert t.description(items["evaluate_everything_here"]).startswith("All of it.")
    assert t.tags(items["evaluate@ds-bm25"]) == {"toolret/dataset": "ds", "toolret/method": "bm25"}


class Custom(DvcTranslator):
    gated_suffix = "-tuned"  # no `-ft` gate

    def key_path(self, stage: DvcStage, facets):
        return ("custom", *super().key_path(stage, facets))

    def group_name(self, stage: str) -> str:
        return "g_" + stage[:10]

    def description(self, item, fallback=None) -> str:
        return f"custom: {item.name}"

    def tags(self, item) -> dict[str, str]:
        return {**super().tags(item), "team": "retrieval"}

    def checks(self, items):
        return [*super().checks(items), *[_always_ok(i) for i in items if i.stage == "clean"]]


def _always_ok(item) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=item.asset_key, name="always_ok")
    def _check() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=True)
    return _check


def test_every_part_is_overridable_in_the_code_location(tmp_path: Path) -> None:
    defs = build_definitions(_project(tmp_path), Custom())
    graph = defs.resolve_asset_graph()
    node = graph.get(K(["custom", "evaluate", "ds.bm25"]))
    assert node.parent_keys == {K(["custom", "clean", "ds"])}
    assert node.group_name == "g_evaluate"
    assert node.description == "custom: evaluate@ds-bm25"
    assert node.tags["team"] == "retrieval" and node.tags["toolret/method"] == "bm25"
    checks = graph.asset_check_keys
    assert dg.AssetCheckKey(K(["custom", "clean", "ds"]), "always_ok") in checks
    assert dg.AssetCheckKey(K(["custom", "clean", "ds"]), "catalog_valid") in checks
    assert not any(c.name.startswith("not_worse_than") for c in checks)  # the gate follows gated_suffix
    report = graph.get(K(["report", "ds.bm25"]))  # report assets carry the translator's tags too
    assert report.tags["team"] == "retrieval"
    from dagster_project.schedules import retrain_groups

    assert retrain_groups({"evaluate", "clean"}, Custom()) == ["g_evaluate"]
    default = build_definitions(tmp_path).resolve_asset_graph()
    assert dg.AssetCheckKey(K(["evaluate", "ds.dense-ft"]), "not_worse_than_dense") in default.asset_check_keys
