"""Seen / unseen across catalogs: the same API is recognised by its place in the hierarchy, not its id."""

from __future__ import annotations

from toolret.catalog.model import Catalog, Query, Tool
from toolret.methods.toolrerank.hierarchy import SeenSet, api_key, apis_by_tool, is_multi_tool


def _train_catalog() -> Catalog:
    tools = [Tool("0", "Search Recipes", {"original": "a"}, tool="Worldwide Recipes", category="Food"),
             Tool("1", "Recipe Details", {"original": "b"}, tool="Worldwide Recipes", category="Food"),
             Tool("2", "Stock Quote", {"original": "c"}, tool="MarketPulse", category="Finance")]
    queries = [Query("q1", "find a recipe", "train"), Query("q2", "price of aapl", "train"),
               Query("q3", "held out", "dev")]
    return Catalog("train-cat", tools, queries, {"q1": {"0": 1}, "q2": {"2": 1}, "q3": {"1": 1}})


def test_seen_apis_are_the_gold_apis_of_the_training_queries_matched_by_name():
    cat = _train_catalog()
    seen = SeenSet.from_queries(cat, cat.split("train"), level="api")
    # a ToolBench-style record of the same API: other id, stray whitespace, other case
    same = Tool("Worldwide Recipes::Search Recipes", " search  recipes", {"original": "x"}, tool="Worldwide  Recipes ")
    sibling = Tool("Worldwide Recipes::Recipe Details", "Recipe Details", {"original": "y"}, tool="Worldwide Recipes")
    other = Tool("Weather::Now", "Now", {"original": "z"}, tool="SkyCast")
    assert api_key(same) == ("worldwide recipes", "search recipes")
    assert seen.api_seen(same) and seen.seen(same)
    # the dev query's gold API (Recipe Details) is not training data: unseen as an API, its tool is seen
    assert not seen.api_seen(sibling) and seen.tool_seen(sibling) and not seen.seen(sibling)
    assert SeenSet.from_queries(cat, cat.split("train"), level="tool").seen(sibling)
    assert not seen.seen(other) and not seen.tool_seen(other)


def test_query_type_and_library_index_come_from_the_hierarchy():
    tools = [Tool("a", "A1", {"original": ""}, tool="T1"), Tool("b", "A2", {"original": ""}, tool="T1"),
             Tool("c", "B1", {"original": ""}, tool="T2"), Tool("d", "solo", {"original": ""})]
    cat = Catalog("c", tools, [Query("s", "s", "test"), Query("m", "m", "test")], {"s": {"a": 1, "b": 1}, "m": {"a": 1, "c": 1}})
    assert not is_multi_tool(cat, "s") and is_multi_tool(cat, "m")
    assert apis_by_tool(tools) == {"t1": [0, 1], "t2": [2], "solo": [3]}  # no parent tool: its own tool


def test_a_damaged_artifact_is_a_clear_error_naming_the_file(tmp_path):
    import pytest

    from toolret.errors import CatalogError
    from toolret.methods.toolrerank.classifier import QueryTypeClassifier
    from toolret.methods.toolrerank.training import read_report, read_seen

    (tmp_path / "seen.json").write_text('{"apis": [["only-one-field"]]}')
    with pytest.raises(CatalogError, match="seen.json"):
        read_seen(tmp_path)
    (tmp_path / "toolrerank.json").write_text("{not json")
    with pytest.raises(CatalogError, match="toolrerank.json"):
        read_report(tmp_path)
    (tmp_path / "classifier.json").write_text('{"coef": [1.0]}')
    with pytest.raises(CatalogError, match="classifier.json"):
        QueryTypeClassifier.load(tmp_path)


def test_params_reject_a_candidate_depth_below_the_grid():
    import pytest

    from toolret.config import validate_params
    from toolret.errors import ConfigError

    assert validate_params({"toolrerank": {"candidates": 50}}).toolrerank.candidates == 50
    with pytest.raises(ConfigError, match="candidates"):
        validate_params({"toolrerank": {"candidates": 20}})  # the grid has m = 30 and 50
    with pytest.raises(ConfigError, match="hierarchy"):
        validate_params({"toolrerank": {"hierarchy": "both"}})
