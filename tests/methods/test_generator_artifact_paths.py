"""A run with a non-default generator keeps its generated artifacts apart from the DVC-tracked ones."""

from __future__ import annotations

from pathlib import Path

from toolret.catalog.model import Catalog, Query, Tool
from toolret.config import load_params
from toolret.llm.models import generator_artifact_dir, model_slug
from toolret.paths import data_dir
from toolret.registry import BuildContext, build_component


def _ctx(overrides: dict) -> BuildContext:
    tools = [Tool("t1", "Weather", {"original": "Weather: forecast for a city."})]
    catalog = Catalog("tinycat", tools, [Query("q1", "rain in Rome?", "test")], {"q1": {"t1": 1}})
    params = load_params()
    for section, values in overrides.items():
        params = params.model_copy(update={section: getattr(params, section).model_copy(update=values)})
    return BuildContext(catalog, params)


def test_slug_and_folder_rule():
    assert model_slug("/opt/models/My Model v2/") == "My_Model_v2"
    assert model_slug("qwen2.5-coder-0.5b-instruct") == "qwen2.5-coder-0.5b-instruct"
    assert generator_artifact_dir("a/b", "x", "x") == Path("a/b")
    assert generator_artifact_dir("a/b", "/m/y", "x") == Path("a/b/y")


def test_reinvoke_index_artifact_path_depends_on_the_generator():
    default = build_component("reinvoke-qgen", _ctx({}))
    assert default.artifact == data_dir() / "reinvoke" / "tinycat" / "synthetic_queries.jsonl"
    other = build_component("reinvoke-qgen", _ctx({"reinvoke": {"llm_model": "/models/other-llm"}}))
    assert other.artifact == data_dir() / "reinvoke" / "tinycat" / "other-llm" / "synthetic_queries.jsonl"


def test_qta_preferences_path_depends_on_the_generator():
    default = build_component("qta-rewriter", _ctx({}))
    assert default.preferences == data_dir() / "qta" / "tinycat" / "preferences.jsonl"
    other = build_component("qta-rewriter", _ctx({"qta": {"llm_model": "/models/other-llm"}}))
    assert other.preferences == data_dir() / "qta" / "tinycat" / "other-llm" / "preferences.jsonl"
