"""Artifacts -> pipelines evaluated through the CLI -> ablation grid -> report, on the fixture catalog
(fake LLM; the real packaged MiniLM encoder, its embeddings kept in a temporary store); the registry entries,
cheap import, and round-trip consistency."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from toolret.catalog.io import save_catalog
from toolret.errors import CatalogError
from toolret.catalog.datasets import load_dataset
from toolret.jsonl_artifacts import meta_path, read_jsonl
from toolret.methods.reinvoke.artifacts import build_hyde, build_intents, load_artifact
from toolret.methods.reinvoke.generation import LazyLLM

pytestmark = pytest.mark.slow


def _query_body(prompt: str) -> str:
    return prompt.split("<query>")[-1].split("</query>")[0].strip()


def _fake_llms(cfg, tmp_path, fake_generator_cls):
    """Three fake LLMs over one JSONL cache: query generator, intent extractor (two intents per query),
    HyDE writer (the fake sees only the last message, where intent and HyDE prompts look alike)."""

    def queries(prompt, j):
        name = prompt.split("api_name:")[1].split(",")[0].strip() if "api_name:" in prompt else "tool"
        return f"Please use {name} for me ({j})"

    def intents(prompt, j):
        body = _query_body(prompt)
        return f"1. {body}\n2. {' '.join(body.split()[:3])}"

    def hyde(prompt, j):
        return json.dumps({"name": "Tool", "description": f"Answers: {_query_body(prompt)}"})

    cache = tmp_path / "llm_cache.jsonl"
    return tuple(LazyLLM(cfg, cache, fake_generator_cls(f)) for f in (queries, intents, hyde))


SMALL_PARAMS = {
    "evaluation": {"ks": [1, 5, 10], "k_max": 10, "bootstrap_samples": 50},
    "reinvoke": {
        "n_queries": 2,
        "ablations": {
            "baseline": {"method": "dense"},
            "qgen": {"method": "reinvoke-qgen", "baseline": "baseline"},
            "qgen_intent": {"method": "reinvoke", "baseline": "baseline"},
            "qgen_n1": {"method": "reinvoke-qgen", "set": {"reinvoke.n_queries": 1}, "baseline": "baseline"},
            "bm25_baseline": {"method": "bm25"},
            "bm25_qgen_intent": {"method": "reinvoke-bm25", "baseline": "bm25_baseline"},
        },
    },
}


@pytest.fixture
def project(tmp_path, monkeypatch, fixture_catalog_dir):
    """A temporary project (``params.yaml`` + ``data/``) holding the curated fixture catalog."""
    proj = tmp_path / "project"
    proj.mkdir()
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(proj))
    monkeypatch.setenv("TOOLRET_CACHE_HOME", str(tmp_path / "cache_home"))
    catalog = load_dataset(str(fixture_catalog_dir))
    curated = save_catalog(catalog, proj / "data" / "curated" / catalog.name)
    raw = json.loads(json.dumps(SMALL_PARAMS))
    raw["reinvoke"]["paper_columns"] = {catalog.name: "multi-tool"}
    # the paper's numbers live in the project's matrix file (`papers`, read by reports only): the real ones
    matrix = Path(__file__).resolve().parents[3] / "results" / "matrix" / "reinvoke.yaml"
    (proj / "results" / "matrix").mkdir(parents=True)
    (proj / "results" / "matrix" / "reinvoke.yaml").write_text(matrix.read_text(encoding="utf-8"), encoding="utf-8")
    raw.setdefault("dense", {})["embedding_cache"] = str(tmp_path / "embeddings")  # shared by the grid's rows
    (proj / "params.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    return proj, catalog, curated


def _cli(proj, *args: str) -> int:
    from toolret.cli import main

    return main(["--params", str(proj / "params.yaml"), *args])


def _write_artifacts(tmp_path, catalog, fake_generator_cls, bow_encoder):
    """The fit / rewrite stages' artifacts under ``data/reinvoke/<ds>`` (fake LLMs; the synthetic queries
    through the index component's own ``fit``, which adds round-trip consistency to their meta)."""
    from toolret.config import load_params
    from toolret.methods.reinvoke.components import ReInvokeIndex
    from toolret.paths import data_dir

    cfg = load_params().reinvoke.component_config()
    qgen_llm, intent_llm, hyde_llm = _fake_llms(cfg, tmp_path, fake_generator_cls)
    art = data_dir() / "reinvoke" / catalog.name
    ReInvokeIndex(cfg, "dense", llm=qgen_llm, artifact=art / "synthetic_queries.jsonl", encoder=bow_encoder).fit(catalog)
    intents, _ = build_intents(catalog, cfg, art / "intents.jsonl", llm=intent_llm)
    hyde, _ = build_hyde(catalog, cfg, art / "hyde.jsonl", llm=hyde_llm)
    return cfg, art, read_jsonl(art / "synthetic_queries.jsonl"), intents, hyde


def _index_and_evaluate(proj, curated, catalog, method: str) -> dict:
    """``toolret index`` + ``toolret evaluate-index`` (the DVC stages): the saved pipeline, evaluated."""
    from toolret.paths import data_dir

    index_dir = data_dir() / "indexes" / catalog.name / method
    runs = data_dir() / "runs" / catalog.name / method
    assert _cli(proj, "index", "--catalog", str(curated), "--method", method, "--docs", "original",
                "--out", str(index_dir)) == 0
    assert _cli(proj, "evaluate-index", "--catalog", str(curated), "--index", str(index_dir), "--out", str(runs)) == 0
    assert (runs / "original.per_query.jsonl").is_file()
    return json.loads((runs / "original.json").read_text())


def test_artifacts_and_pipelines_evaluated_through_the_cli(tmp_path, project, fake_generator_cls, bow_encoder):
    from toolret.paths import data_dir

    proj, catalog, curated = project
    assert data_dir() == proj / "data"
    cfg, art, synth, intents, hyde = _write_artifacts(tmp_path, catalog, fake_generator_cls, bow_encoder)
    assert cfg.n_queries == 2 and cfg.generate_queries == 2
    syn_meta = json.loads(meta_path(art / "synthetic_queries.jsonl").read_text())
    assert syn_meta["counts"]["n"] == 2 * len(catalog.tools) == len(synth) and syn_meta["counts"]["failed"] == 0
    assert 0 <= syn_meta["round_trip"]["recall@5"] <= 1 and syn_meta["round_trip"]["n_queries"] == len(synth)
    assert read_jsonl(art / "intents.jsonl") == intents
    assert all(len(r["intents"]) == 2 and not r["fallback"] for r in intents)
    assert not any(r["fallback"] for r in hyde)

    # the artifacts are used only when made with the current generation settings
    assert len(load_artifact(art / "synthetic_queries.jsonl", cfg)) == len(synth)
    assert len(load_artifact(art / "intents.jsonl", cfg)) == len(intents)
    assert len(load_artifact(art / "hyde.jsonl", cfg)) == len(hyde)
    assert load_artifact(art / "synthetic_queries.jsonl", cfg.replace(temperature=1.0)) is None  # other settings
    assert load_artifact(art / "synthetic_queries.jsonl", cfg.replace(n_queries=3)) is None  # too few samples
    assert load_artifact(art / "intents.jsonl", cfg.replace(temperature=1.0)) is not None  # not an intent setting

    # the three pipelines, indexed and evaluated by the CLI: no LLM needed, the artifacts suffice
    n_test = len(catalog.split("test"))
    for method in ("reinvoke", "reinvoke-bm25", "hyde"):
        result = _index_and_evaluate(proj, curated, catalog, method)
        assert result["method"] == method and result["n_queries"] == n_test and result["docs"] == "original"
        assert {"ndcg@5", "recall@5", "comp@5"} <= set(result["metrics"]) and "ci95" in result
        index_component = {"reinvoke": "reinvoke-qgen", "reinvoke-bm25": "reinvoke-qgen-bm25"}.get(method)
        if index_component:
            stats = result["components"]
            assert stats[index_component] == {"n_copies": 2 * len(catalog.tools), "tools_without_queries": 0}
            assert stats["reinvoke-intents"]["llm_outputs"] == 0  # every intent came from the artifact


def test_ablation_grid_and_report(tmp_path, project, fake_generator_cls, bow_encoder, capsys):
    from toolret.paths import data_dir

    proj, catalog, curated = project
    _, _, synth, _, _ = _write_artifacts(tmp_path, catalog, fake_generator_cls, bow_encoder)
    reinvoke = _index_and_evaluate(proj, curated, catalog, "reinvoke")
    _index_and_evaluate(proj, curated, catalog, "hyde")
    runs = data_dir() / "runs" / catalog.name

    # the ablation grid, each row paired-tested against its baseline row
    capsys.readouterr()
    rc = _cli(proj, "evaluate-grid", "--catalog", str(curated), "--grid", "reinvoke.ablations",
              "--out", str(runs / "reinvoke-ablations"))
    assert rc == 0, capsys.readouterr().err  # the row label 'dense[baseline]' is not a pipeline spec (was a bug)
    summary = json.loads((runs / "reinvoke-ablations" / "summary.json").read_text())
    variants = summary["variants"]
    assert set(variants) == set(SMALL_PARAMS["reinvoke"]["ablations"])
    assert variants["qgen"]["vs_baseline"]["ndcg@5"]["baseline"] == "baseline"
    assert variants["bm25_qgen_intent"]["vs_baseline"]["ndcg@5"]["baseline"] == "bm25_baseline"
    assert "vs_baseline" not in variants["baseline"]
    assert variants["qgen_n1"]["components"]["reinvoke-qgen"]["n_copies"] == len(catalog.tools)  # the override took
    assert variants["qgen"]["components"]["reinvoke-qgen"]["n_copies"] == 2 * len(catalog.tools)
    # the grid's full method equals the separately indexed, saved, loaded and evaluated pipeline
    assert variants["qgen_intent"]["metrics"] == reinvoke["metrics"]

    out = tmp_path / "report.md"
    assert _cli(proj, "report-ablations", "--method", "reinvoke", "--runs", str(data_dir() / "runs"),
                "--datasets", catalog.name, "--out", str(out)) == 0
    text = out.read_text()
    assert f"### {catalog.name} — compared with the paper's ToolE multi-tool column" in text
    assert "(a) + Query generator" in text and "(a) + Both = Re-Invoke" in text and "| HyDE (dense) |" in text
    assert "Re-Invoke w/ BM25" in text and "Round-trip consistency" in text and "```json" not in text
    # n_queries=2 here: the report says so and labels the query-count row with the real n, not the paper's 10
    assert "2 synthetic queries per tool" in text and "(c) 2 synthetic queries" in text
    assert "(c) 10 synthetic queries" not in text
    assert "[`report.json`](report.json)" in text  # the numbers are a JSON record beside the page, linked
    data = json.loads(out.with_suffix(".json").read_text())[catalog.name]
    assert data["ablations"]["qgen"]["metrics"]["ndcg@5"] == variants["qgen"]["metrics"]["ndcg@5"]
    assert data["synthetic_queries"]["n"] == len(synth) and data["intents"]["mean_intents"] == 2
    # the generator is named from the artifacts' meta (the fake LLM here), not a hard-coded model
    assert "Generator: fake-llm (rev 0)." in text and data["llm"] == ["fake-llm (rev 0)"]
    assert "SmolLM2" not in text


def test_registry_pipelines_and_cheap_import(project):
    code = ("import sys; import toolret.methods.reinvoke; "
            "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]; "
            "assert not heavy, f'heavy import: {heavy}'")
    subprocess.run([sys.executable, "-c", code], check=True)
    from toolret.config import load_params
    from toolret.methods.reinvoke.components import HydeRewriter, IntentRewriter, ReInvokeIndex
    from toolret.pipeline import build_pipeline
    from toolret.registry import parse_spec, pipelines
    from toolret.retrieval.dense import DenseRetriever

    params = load_params()
    assert {"reinvoke", "reinvoke-bm25", "hyde"} <= set(pipelines(params))
    spec = parse_spec("reinvoke", params)
    assert spec.components == ["reinvoke-intents", "reinvoke-qgen"] and spec.label == "reinvoke"
    assert parse_spec("reinvoke-bm25", params).components == ["reinvoke-intents", "reinvoke-qgen-bm25"]
    spec = parse_spec("reinvoke-intents+bm25", params)
    assert (spec.rewriter, spec.retriever, spec.rerankers) == ("reinvoke-intents", "bm25", ())
    with pytest.raises(CatalogError):
        parse_spec("bm25+reinvoke-intents", params)  # a rewriter after the retriever
    with pytest.raises(CatalogError):
        parse_spec("reinvoke-intents+hyde-docs", params)  # two rewriters, no retriever

    _, catalog, _ = project
    p = build_pipeline("reinvoke-bm25", catalog, params)
    assert p.name == "reinvoke-bm25" and isinstance(p.rewriter, IntentRewriter)
    assert isinstance(p.retriever, ReInvokeIndex) and p.retriever.backbone == "bm25"
    assert p.retriever.name == "reinvoke-qgen-bm25" and p.retriever.config.n_queries == 2
    h = build_pipeline("hyde", catalog, params)
    assert h.name == "hyde" and isinstance(h.rewriter, HydeRewriter) and isinstance(h.retriever, DenseRetriever)


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
    # "weather in rain" shares no term with c's document: c is no result at any depth
    assert rt["n_queries"] == 3 and abs(rt["recall@1"] - 2 / 3) < 1e-9 and abs(rt["recall@3"] - 2 / 3) < 1e-9


def test_round_trip_runs_in_the_fit_stage_only(tmp_path, project, fake_generator_cls, counting_encoder_cls):
    """The round-trip diagnostic (Table 4) encodes every synthetic query: the fit stage (``toolret fit --out``)
    computes it; an evaluation that writes the artifact on the way (e.g. from committed shards) does not."""
    from toolret.config import load_params
    from toolret.methods.reinvoke.components import MemoEncoder
    from toolret.registry import BuildContext, build_component

    proj, catalog, _ = project
    params = load_params()
    for model, expect_round_trip in ((None, False), (str(tmp_path / "stage" / "synthetic_queries.jsonl"), True)):
        index = build_component("reinvoke-qgen", BuildContext(catalog, params, model=model))
        index.llm = _fake_llms(index.config, tmp_path, fake_generator_cls)[0]
        encoder = counting_encoder_cls()
        index._encoder = MemoEncoder(encoder)
        index.fit(catalog)
        meta = json.loads(meta_path(index.artifact).read_text())
        assert ("round_trip" in meta) is expect_round_trip
        assert (len(encoder.texts) > 0) is expect_round_trip  # the diagnostic is the only encoding in fit
