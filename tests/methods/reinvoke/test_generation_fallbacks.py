"""Method-level parsing fallbacks, through the real JSONL cache with a fake generator."""

from __future__ import annotations

import pytest

from toolret.methods.reinvoke.components import IntentRewriter, ReInvokeIndex
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.generation import (
    LazyLLM,
    extract_intents,
    generate_synthetic_queries,
    hyde_documents,
    parse_intents,
    queries_by_tool,
    status_counts,
)


def test_unparsable_intents_fall_back_to_the_raw_query_and_are_counted(tmp_path, fake_generator_cls):
    def respond(prompt, j):
        if "weather" in prompt:
            return "1. Get the weather in Paris\n2. Find a hotel in Paris"
        return "   "  # nothing usable

    cfg = ReInvokeConfig()
    llm = LazyLLM(cfg, tmp_path / "cache.jsonl", fake_generator_cls(respond))
    texts = ["I love Paris! What's the weather there and where can I stay?", "Translate hello into French"]
    recs = extract_intents(llm, texts, cfg, ["q1", "q2"])
    assert recs[0]["intents"] == ["Get the weather in Paris", "Find a hotel in Paris"] and not recs[0]["fallback"]
    assert recs[1]["intents"] == [texts[1]] and recs[1]["fallback"] and recs[1]["status"] == "empty"
    assert status_counts(recs)["fallback"] == 1
    # a refusal / boilerplate-only output is "malformed" -> the raw query as well
    p = parse_intents("Sure, here are the intents:", "stop", "raw query", 10)
    assert p == {"intents": ["raw query"], "status": "malformed", "fallback": True}


def test_rewriter_counts_intent_fallbacks_and_the_pipeline_still_ranks(tmp_path, fake_generator_cls, bow_encoder):
    from toolret.pipeline import Pipeline
    from toolret.retrieval.dense import DenseRetriever

    gen = fake_generator_cls(lambda prompt, j: "I'm sorry, I cannot help with that.")
    cfg = ReInvokeConfig()
    rewriter = IntentRewriter(cfg, llm=LazyLLM(cfg, tmp_path / "c.jsonl", gen))
    dense = DenseRetriever(encoder=object())
    dense.encode = lambda texts, show_progress=False: bow_encoder.encode(texts)
    dense.index(["w", "m"], ["weather forecast rain", "movie search"])
    ranking = Pipeline(dense, rewriter).search(["rain forecast please"], 2)
    assert ranking.ranked_ids(0)[0] == "w"  # searched with the raw query
    assert rewriter.stats == {"llm_outputs": 1, "fallback": 1}
    assert rewriter.rewrite(["rain forecast please"]) == [["rain forecast please"]]
    assert gen.calls == 1  # the second rewrite reused the stored output


def test_unparsable_synthetic_queries_are_dropped_and_tools_keep_their_document(tmp_path, fake_generator_cls):
    def respond(prompt, j):
        return "" if "movie" in prompt else f"Will it rain tomorrow? ({j})"

    cfg = ReInvokeConfig(n_queries=2)
    llm = LazyLLM(cfg, tmp_path / "c.jsonl", fake_generator_cls(respond))
    recs = generate_synthetic_queries(llm, ["w", "m"], ["weather forecast", "movie search"], cfg)
    assert len(recs) == 4 and [r["sample_index"] for r in recs] == [0, 1, 0, 1]
    assert status_counts(recs)["failed"] == 2
    assert queries_by_tool(recs, ["w", "m"], 2) == [["Will it rain tomorrow? (0)", "Will it rain tomorrow? (1)"], []]
    assert queries_by_tool(recs, ["w", "m"], 1) == [["Will it rain tomorrow? (0)"], []]


def test_hyde_json_and_fallbacks(tmp_path, fake_generator_cls):
    outs = {"a": '{"name": "WeatherTool", "description": "Forecasts for any city."}', "b": "A tool that books hotels.",
            "c": ""}
    gen = fake_generator_cls(lambda prompt, j: next(v for k, v in outs.items() if f"\n{k}\n" in prompt))
    cfg = ReInvokeConfig()
    recs = hyde_documents(LazyLLM(cfg, tmp_path / "c.jsonl", gen), ["a", "b", "c"], cfg)
    assert [r["document"] for r in recs] == ["WeatherTool: Forecasts for any city.", "A tool that books hotels.", "c"]
    assert [r["fallback"] for r in recs] == [False, False, True]


def test_artifact_from_other_documents_is_regenerated_when_an_llm_is_available(tmp_path, fake_generator_cls,
                                                                              bow_encoder):
    from toolret.errors import CatalogError
    from toolret.methods.reinvoke.artifacts import doc_sha

    stale = [{"tool_id": t, "sample_index": 0, "query": "stale", "doc_sha": doc_sha("old text")} for t in ("w", "m")]
    cfg = ReInvokeConfig(n_queries=1)
    with pytest.raises(CatalogError, match="other documents"):  # without an LLM it is refused, not trusted
        ReInvokeIndex(cfg, "dense", synthetic=stale, encoder=bow_encoder).index(["w", "m"],
                                                                                 ["weather forecast", "movie search"])
    gen = fake_generator_cls(lambda prompt, j: "fresh query")
    r = ReInvokeIndex(cfg, "dense", llm=LazyLLM(cfg, tmp_path / "c.jsonl", gen), synthetic=stale, encoder=bow_encoder)
    r.index(["w", "m"], ["weather forecast", "movie search"])
    assert gen.calls == 2 and {x["query"] for x in r._synthetic} == {"fresh query"}
    assert r.stats["n_copies"] == 2 and r.stats["tools_without_queries"] == 0
