"""Re-Invoke answers from committed generation shards: a fresh clone builds no LLM for what they hold."""

from __future__ import annotations

import pytest

from toolret.catalog.model import Catalog, Query, Tool
from toolret.llm.cache import CachedGenerator
from toolret.llm.shards import ShardStore, run_durable, store_root
from toolret.methods.reinvoke.artifacts import build_synthetic_queries
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.generation import LazyLLM, durable_job

TOOLS = [Tool("t1", "CurrentWeather", {"original": "CurrentWeather: get the temperature and wind for a city."}),
         Tool("t2", "SearchMovie", {"original": "SearchMovie: search movies by title."}),
         Tool("t3", "ConvertCurrency", {"original": "ConvertCurrency: convert money between currencies."})]


class NoEngine(LazyLLM):
    def build(self):
        raise AssertionError("the committed shards hold every sample: no LLM may be built")


def test_synthetic_queries_come_from_the_committed_shards_without_an_llm(tmp_path, monkeypatch, fake_generator_cls):
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    (tmp_path / "params.yaml").write_text("{}\n")
    catalog = Catalog("tiny", TOOLS, [Query("q1", "weather in Rome", "test")], {"q1": {"t1": 1}})
    cfg = ReInvokeConfig(n_queries=2, generate_queries=2, cache_dir=str(tmp_path / "cache"))
    fake = fake_generator_cls(lambda text, j: f"Find {text.split(':')[0].split()[-1]} number {j}")
    prompts, sampling = durable_job("queries", catalog, cfg)
    store = ShardStore(store_root(cfg.llm_model), cfg.llm_model, cfg.llm_engine)
    assert store.root == tmp_path / "data" / "generations" / cfg.llm_model
    run_durable(store, "reinvoke-queries", prompts, sampling, CachedGenerator(fake, tmp_path / "machine-a.jsonl"),
                {"kind": "queries"}, shard_prompts=2)
    assert fake.calls == 6

    # another machine: empty LLM cache, only the committed shards
    llm = NoEngine(cfg)
    records, meta = build_synthetic_queries(catalog, cfg, tmp_path / "out.jsonl", llm=llm)
    assert [r["raw"] for r in records[:2]] == ["Find CurrentWeather number 0", "Find CurrentWeather number 1"]
    assert meta["llm"]["model_id"] == "fake-llm" and llm.stats == {"hits": 6, "generated": 0}

    # a tool the shards lack needs the engine
    more = Catalog("more", [*TOOLS, Tool("t4", "Translate", {"original": "Translate: text between languages."})],
                   [], {})
    with pytest.raises(AssertionError, match="no LLM may be built"):
        build_synthetic_queries(more, cfg, tmp_path / "more.jsonl", llm=NoEngine(cfg))


@pytest.mark.integration
def test_every_committed_toolbench_shard_answers_a_current_prompt():
    """Hours of committed generation are only reused while the prompts render as they did: a template edit
    that changes them would orphan every shard silently. Each committed reinvoke-queries / synthetic-multi-api
    record's prompt key must be one the current code asks for, over the catalog its shard's meta names
    (ToolBench's shared 2,479-API corpus, or a seeded tool sample of the 46,879-API one)."""
    import json

    from toolret.catalog.datasets import load_dataset_for
    from toolret.catalog.source import source_root
    from toolret.llm.synthetic_catalog import sample_tools
    from toolret.config import load_params
    from toolret.llm.shards import prompt_key
    from toolret.registry import generation_job

    if not source_root().is_dir():
        pytest.skip("../shared/datasets not present")
    params = load_params()
    generators = store_root(params.reinvoke.llm_model).parent  # every generator's shards (prompts are model-free)
    catalogs: dict[str, object] = {}
    checked = 0
    for job in ("reinvoke-queries", "synthetic-multi-api"):
        by_catalog: dict[tuple, set[str]] = {}
        for shard in sorted(generators.glob(f"*/{job}/shard-*.jsonl")):
            meta = json.loads(shard.with_suffix(".meta.json").read_text(encoding="utf-8"))
            sample = meta.get("sample_tools")
            key = (meta.get("source_catalog") or meta["catalog"], sample["n"] if sample else 0,
                   sample["seed"] if sample else 0)
            by_catalog.setdefault(key, set()).update(
                json.loads(line)["prompt_key"] for line in shard.read_text(encoding="utf-8").splitlines() if line.strip())
        for (name, n, seed), stored in by_catalog.items():
            if name not in catalogs:
                catalogs[name] = load_dataset_for(name, params)
            catalog = sample_tools(catalogs[name], n, seed) if n else catalogs[name]
            current = {prompt_key(p) for p in generation_job(job)(catalog, params, None)[0]}
            orphaned = stored - current
            assert not orphaned, (f"{job} over {catalog.name}: {len(orphaned)} of {len(stored)} committed prompts "
                                  "are no longer asked for")
            checked += 1
    if not checked:
        pytest.skip("no committed ToolBench generation shards")


SAMPLED_ENV_SPEC = {"source": "toolbench-env-g1-tool", "n": 1, "sample_tools": 6, "seed": 5, "holdout_categories": 0.0,
                    "holdout_tools": 0.0, "dev_fraction": 0.0}


def env_project(tmp_path, monkeypatch, synthetic: dict):
    """A project over the toolbench-env fixture corpus with these synthetic specs; its source root."""
    import yaml
    from make_toolbench_env import write_toolbench_env_fixture

    root = write_toolbench_env_fixture(tmp_path / "datasets")
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    monkeypatch.setenv("TOOLRET_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(
        {"source": {"root": str(root)}, "datasets": [], "synthetic": synthetic}))
    return root


def test_a_training_catalog_over_a_corpus_is_built_from_its_sources_and_the_committed_shards(
        tmp_path, monkeypatch, fake_generator_cls):
    """`toolret catalog synthesize` over a source outside `datasets` (the 46,879-API environment at full size):
    the corpus is loaded from its source folders and cleaned, the seeded tool sample the generation job wrote
    for is drawn, and its queries come from the committed shards (no LLM); no test query is read."""
    from toolret.catalog.io import load_catalog
    from toolret.catalog.datasets import load_dataset
    from toolret.llm.synthetic_catalog import sample_tools
    from toolret.cli import main
    from toolret.config import load_params
    from toolret.registry import generation_job

    root = env_project(tmp_path, monkeypatch, {"env-syn": SAMPLED_ENV_SPEC})
    params = load_params(tmp_path / "params.yaml")
    corpus = load_dataset("toolbench-env-g1-tool", root=root)
    sampled = sample_tools(corpus, 6, seed=5)  # what `generate-shards --sample-tools 6 --sample-seed 5` writes for
    prompts, sampling, llm, provenance = generation_job("reinvoke-queries")(sampled, params, 1)
    fake = fake_generator_cls(lambda text, j: f"please run tool {abs(hash(text)) % 10**8} ({j})")
    run_durable(llm.generator.store, "reinvoke-queries", prompts, sampling,
                CachedGenerator(fake, tmp_path / "machine-a.jsonl"), provenance)
    assert fake.calls == 6

    assert main(["catalog", "synthesize", "--name", "env-syn", "--out", str(tmp_path / "env-syn")]) == 0
    built = load_catalog(tmp_path / "env-syn")
    assert [t.id for t in built.tools] == [t.id for t in sampled.tools] and len(corpus.tools) > 6
    assert "cleaned" in built.doc_variants()  # cleaned over the whole corpus, as its evaluations are
    test_texts = {q.text for q in corpus.queries}
    assert len(built.queries) == 6 and not test_texts & {q.text for q in built.queries}
    assert all(q.text.startswith("please run") for q in built.queries)
    assert {t for q in built.queries for t in built.gold(q.id)} == {t.id for t in sampled.tools}
    assert built.provenance["source"] == "toolbench-env-g1-tool-sample6"
    assert built.provenance["spec"]["sample_tools"] == 6 and built.provenance["spec"]["seed"] == 5


def test_a_training_catalog_reads_the_shards_of_the_generator_its_spec_names(tmp_path, monkeypatch,
                                                                               fake_generator_cls):
    """`synthetic.<name>.llm_model` / `llm_engine` pick whose committed shards the catalog is built from (a larger
    generator's, written by `generate-shards --set reinvoke.llm_model=...`), not Re-Invoke's default generator's."""
    from toolret.catalog.io import load_catalog
    from toolret.catalog.datasets import load_dataset
    from toolret.llm.synthetic_catalog import sample_tools
    from toolret.cli import main
    from toolret.config import load_params
    from toolret.registry import generation_job

    spec = SAMPLED_ENV_SPEC
    root = env_project(tmp_path, monkeypatch, {
        "by-default": spec, "by-big": {**spec, "llm_model": "big-llm", "llm_engine": "llama.cpp"}})
    sampled = sample_tools(load_dataset("toolbench-env-g1-tool", root=root), 6, seed=5)
    for model, engine, word in (("big-llm", "llama.cpp", "big"), (None, None, "small")):
        params = load_params(tmp_path / "params.yaml", [f"reinvoke.llm_model={model}",
                                                        f"reinvoke.llm_engine={engine}"] if model else None)
        prompts, sampling, llm, provenance = generation_job("reinvoke-queries")(sampled, params, 1)
        fake = fake_generator_cls(lambda text, j, word=word: f"{word} request {abs(hash(text)) % 10**8}")
        run_durable(llm.generator.store, "reinvoke-queries", prompts, sampling,
                    CachedGenerator(fake, tmp_path / f"{word}.jsonl"), provenance)
    assert (tmp_path / "data" / "generations" / "big-llm" / "reinvoke-queries").is_dir()

    for name, word in (("by-big", "big"), ("by-default", "small")):
        assert main(["catalog", "synthesize", "--name", name, "--out", str(tmp_path / name)]) == 0
        texts = [q.text for q in load_catalog(tmp_path / name).queries]
        assert len(texts) == 6 and all(t.startswith(f"{word} request") for t in texts), texts


def test_the_multi_api_job_reads_its_own_generator(tmp_path, monkeypatch):
    """`llm_model` names the per-tool job's generator and `multi_llm_model` the multi-API job's; each unset one is
    Re-Invoke's (a larger model's single-API queries beside the default model's multi-API requests)."""
    import yaml

    from toolret.llm.synthetic_catalog import generator_params
    from toolret.config import load_params

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    spec = {"source": "x", "llm_model": "big-llm", "llm_engine": "llama.cpp"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(
        {"datasets": [], "synthetic": {"a": spec, "b": {**spec, "multi_llm_model": "other-llm"}}}))
    params = load_params(tmp_path / "params.yaml")
    default = params.reinvoke.llm_model
    a, b = params.synthetic["a"], params.synthetic["b"]
    assert generator_params(params, a).reinvoke.llm_model == "big-llm"
    assert generator_params(params, a).reinvoke.llm_engine == "llama.cpp"
    assert generator_params(params, a, multi=True).reinvoke.llm_model == default != "big-llm"
    assert generator_params(params, a, multi=True).reinvoke.llm_engine == params.reinvoke.llm_engine
    assert generator_params(params, b, multi=True).reinvoke.llm_model == "other-llm"
