"""Resume with the REAL default model: a second synthetic-query run generates nothing."""

from __future__ import annotations

import json

import pytest

from toolret.catalog.model import Catalog, Query, Tool
from toolret.evaluation import run_info_path
from toolret.jsonl_artifacts import meta_path, read_jsonl
from toolret.llm.lazy import llm_cache_path
from toolret.methods.reinvoke.artifacts import build_synthetic_queries
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.generation import LazyLLM

pytestmark = pytest.mark.slow  # runs an LLM


@pytest.mark.timeout(600)
def test_second_synthetic_query_run_generates_nothing(tmp_path):
    tools = [Tool("t1", "CurrentWeather", {"original": "CurrentWeather: get the temperature and wind for a city."}),
             Tool("t2", "SearchMovie", {"original": "SearchMovie: search movies by title."}),
             Tool("t3", "ConvertCurrency", {"original": "ConvertCurrency: convert money between currencies."})]
    catalog = Catalog("tiny", tools, [Query("q1", "weather in Rome", "test")], {"q1": {"t1": 1}})
    cfg = ReInvokeConfig(n_queries=2, generate_queries=2, query_max_new_tokens=24, cache_dir=str(tmp_path / "cache"),
                         llm_batch_size=8, llm_num_threads=1, llm_model="smollm2-135m-instruct")
    assert llm_cache_path(cfg).parent == tmp_path / "cache"
    out = tmp_path / "synthetic_queries.jsonl"
    llm = LazyLLM(cfg, llm_cache_path(cfg))
    first, meta = build_synthetic_queries(catalog, cfg, out, llm=llm)
    # timings and cache hits live in the untracked run-info sidecar, not in the artifact's meta
    info = json.loads(run_info_path(meta_path(out)).read_text())
    assert info["llm_calls"] == {"hits": 0, "generated": 6} == llm.stats
    assert "run_info" not in json.loads(meta_path(out).read_text())
    assert len(first) == 6 and sum(1 for r in first if r["query"]) >= 3  # the 135M model mostly parses
    assert meta["llm"]["model_id"] == "smollm2-135m-instruct"
    # a fresh LazyLLM (new process in real life) reads the cache: nothing is generated the second time
    again = LazyLLM(cfg, llm_cache_path(cfg), llm.engine)
    second, _ = build_synthetic_queries(catalog, cfg, out, llm=again)
    assert json.loads(run_info_path(meta_path(out)).read_text())["llm_calls"] == {"hits": 6, "generated": 0}
    assert again.stats == {"hits": 6, "generated": 0}
    assert [r["raw"] for r in second] == [r["raw"] for r in first]
    assert read_jsonl(out) == second
    assert json.loads(meta_path(out).read_text())["counts"]["n"] == 6
