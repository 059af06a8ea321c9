"""Artifacts -> evaluation -> report on the fixture catalogue (fake LLM, bag-of-words encoder), the
registry entries, cheap import, and round-trip consistency."""

from __future__ import annotations

import json
import subprocess
import sys

from toolret.catalog.registry import load_dataset
from toolret.methods.reinvoke.artifacts import build_hyde, build_intents, build_synthetic_queries, read_jsonl
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.generation import LazyLLM


def _fake_llm(cfg, path, fake_generator_cls):
    def respond(prompt, j):
        if "<tool>" in prompt:  # query generator: echo words of the tool's api name
            name = prompt.split("api_name:")[1].split(",")[0] if "api_name:" in prompt else "tool"
            return f"Please use {name} for me ({j})"
        if "JSON" in prompt or "name" in prompt and "description" in prompt:
            return '{"name": "X", "description": "does things"}'
        body = prompt.split("<query>")[-1].split("</query>")[0].strip()
        return "1. " + body
    return LazyLLM(cfg, path, fake_generator_cls(respond))


def test_artifacts_evaluate_and_report(tmp_path, fixture_catalog_dir, fake_generator_cls, bow_encoder):
    from toolret.methods.reinvoke.experiment import run
    from toolret.methods.reinvoke.report import write_report

    catalog = load_dataset(str(fixture_catalog_dir))
    params = {"reinvoke": {"n_queries": 2}, "evaluation": {"ks": [1, 5, 10], "k_max": 10, "bootstrap_samples": 50}}
    cfg = ReInvokeConfig.from_params(params)
    llm = _fake_llm(cfg, tmp_path / "cache.jsonl", fake_generator_cls)
    art = tmp_path / "art"
    synth, meta = build_synthetic_queries(catalog, cfg, art / "synthetic_queries.jsonl", llm=llm)
    assert meta["counts"]["n"] == 2 * len(catalog.tools) and meta["counts"]["failed"] == 0
    intents, _ = build_intents(catalog, cfg, art / "intents.jsonl", llm=llm)
    hyde, _ = build_hyde(catalog, cfg, art / "hyde.jsonl", llm=llm)
    assert read_jsonl(art / "intents.jsonl") == intents
    ablations = {"baseline": {"query_generator": False, "intent_extractor": False}, "qgen": {"intent_extractor": False},
                 "qgen_intent": {}, "bm25_baseline": {"backbone": "bm25", "query_generator": False,
                                                      "intent_extractor": False}}
    runs = tmp_path / "runs" / catalog.name
    summary = run(catalog, params, runs, synthetic=synth, intents=intents, hyde=hyde, ablations=ablations,
                  encoder=bow_encoder, log=lambda s: None)
    for method in ("reinvoke", "reinvoke-bm25", "hyde"):
        result = json.loads((runs / method / "original.json").read_text())
        assert result["method"] == method and result["n_queries"] == len(catalog.split("test"))
        assert {"ndcg@5", "recall@5", "comp@5"} <= set(result["metrics"]) and "ci95" in result
        assert (runs / method / "original.per_query.jsonl").is_file()
    assert set(summary["ablations"]) == set(ablations)
    assert summary["ablations"]["qgen"]["vs_baseline"]["ndcg@5"]["baseline"] == "baseline"
    assert 0 <= summary["round_trip"]["recall@5"] <= 1 and summary["round_trip"]["n_queries"] == len(synth)
    from toolret.methods.reinvoke.artifacts import load_matching

    got = load_matching(art, cfg)
    assert len(got["synthetic"]) == len(synth) and len(got["intents"]) == len(intents) and len(got["hyde"]) == len(hyde)
    assert "synthetic" not in load_matching(art, cfg.replace(temperature=1.0))  # made with other settings
    assert "synthetic" not in load_matching(art, cfg.replace(n_queries=3))  # too few samples per tool
    assert "intents" in load_matching(art, cfg.replace(temperature=1.0))
    out = write_report(tmp_path / "runs", [catalog.name], tmp_path / "report.md")
    text = out.read_text()
    assert "(a) + Query generator" in text and "Round-trip consistency" in text and "```json" in text
    # n_queries=2 here: the report says so and labels the query-count row with the real n, not the paper's 10
    assert "2 synthetic queries per tool" in text and "(c) 2 synthetic queries" in text
    assert "(c) 10 synthetic queries" not in text


def test_registry_methods_and_cheap_import(fixture_catalog_dir):
    code = ("import sys; import toolret.methods.reinvoke as m; "
            "from toolret.retrieval.registry import METHODS; "
            "assert {'reinvoke', 'reinvoke-bm25', 'hyde'} <= set(METHODS); "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'heavy import'")
    subprocess.run([sys.executable, "-c", code], check=True)
    from toolret.retrieval.registry import build_retriever

    catalog = load_dataset(str(fixture_catalog_dir))
    params = {"reinvoke": {"n_queries": 3, "per_dataset": {catalog.name: {"n_queries": 1}}}}
    r = build_retriever("reinvoke-bm25", catalog, params)
    assert r.name == "reinvoke-bm25" and r.config.backbone == "bm25" and r.config.n_queries == 1
    assert build_retriever("hyde", catalog, params).name == "hyde"


def test_round_trip_consistency_counts_own_tool_hits():
    from toolret.methods.reinvoke.roundtrip import round_trip_consistency
    from toolret.retrieval.bm25 import BM25Retriever

    r = BM25Retriever()
    r.index(["w", "m", "c"], ["weather forecast rain", "movie search title", "currency exchange rate"])
    recs = [{"tool_id": "w", "sample_index": 0, "query": "rain forecast"},
            {"tool_id": "m", "sample_index": 0, "query": "movie title"},
            {"tool_id": "c", "sample_index": 0, "query": "weather in rain"},  # retrieves w, not its own tool
            {"tool_id": "c", "sample_index": 1, "query": None}]  # unparsable: not counted
    rt = round_trip_consistency(recs, r, ks=(1, 3))
    assert rt["n_queries"] == 3 and abs(rt["recall@1"] - 2 / 3) < 1e-9 and rt["recall@3"] == 1.0
