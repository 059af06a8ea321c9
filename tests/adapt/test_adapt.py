"""`toolret adapt` end to end on a small fixture catalog with the test LLM (SmolLM2-135M, tiny budget):
the champion is chosen on synthetic dev only, served over MCP, re-adapted incrementally, resumed after kill -9;
bad catalogs are refused naming the offenders and leave the previous champion in place."""

from __future__ import annotations

import asyncio
import json
import re
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))

# the module fixture adapts a catalog end to end (~10 min on 2 idle cores): above the 900 s default
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]

TINY = {"epochs": 1, "max_train_pairs": 64}
N = 2  # requests per tool
TOOLS_KILLED = 6  # the catalogue the kill -9 test adapts (shards of 2 tools: killed after the first of 3)


@pytest.fixture(scope="module")
def llm():
    from toolret.llm.models import ensure_local_model
    from toolret.llm.transformers_backend import TransformersGenerator

    return TransformersGenerator(model=str(ensure_local_model()), batch_size=8, progress=False)


@pytest.fixture(scope="module")
def spec():
    from toolret.adapt import GeneratorSpec

    return GeneratorSpec(model="smollm2-135m-instruct")


@pytest.fixture(scope="module")
def fixture_catalog(tmp_path_factory):
    from make_fixture import write_fixture_catalog

    from toolret.catalog.io import load_catalog

    base = tmp_path_factory.mktemp("adapt")
    directory = write_fixture_catalog(base / "fixture", n_tools=30, n_train=40, n_test=20, seed=0)
    catalog = load_catalog(directory)
    labelled = base / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({"_id": q.id, "text": q.text, "gold": sorted(catalog.gold(q.id))}) + "\n"
                                for q in catalog.split("test")))
    return directory, labelled


@pytest.fixture(scope="module")
def adapted(fixture_catalog, llm, spec, tmp_path_factory):
    from toolret.adapt import adapt

    directory, labelled = fixture_catalog
    out = tmp_path_factory.mktemp("adapted") / "out"
    # the fixture catalog's requests, generated once by the test LLM and committed as shards (a clone's start)
    shutil.copytree(FIXTURES / "adapt_generations", out / "generations" / "smollm2-135m-instruct")
    uri = f"sqlite:///{out.parent / 'mlflow.db'}"
    report = adapt(directory, out, queries=labelled, n=N, llm=llm, generator=spec, finetune_overrides=TINY,
                   tracking_uri=uri)
    return out, report, uri


def test_adapt_end_to_end(adapted) -> None:
    from toolret.adapt import resolve_index
    from toolret.pipeline import Pipeline

    out, report, uri = adapted
    dev, kinds = report["dev"], report["selection"]["kinds"]
    assert set(dev) == {"bm25", "bm25-stem", "dense", "hybrid", "dense-ft", "hybrid-ft", "bm25-exp", "dense-exp",
                        "hybrid-exp", "hybrid-exp-ft"}
    assert {k for k, v in kinds.items() if v == "untrained"} == {"bm25", "bm25-stem", "dense", "hybrid"}
    champion = report["selection"]["champion"]
    best = max(dev, key=lambda n: dev[n]["metrics"]["ndcg@5"])
    assert champion == best or kinds[champion] == "untrained"  # a trained runner-up must be significant
    # every candidate scored on the labelled queries, paired-tested against the untrained baselines
    lab = report["labelled"]
    assert set(lab) == set(dev) and lab["dense-ft"]["vs"].keys() == {"bm25", "dense", "hybrid"}
    assert lab["bm25"]["n_queries"] == 20
    data = report["training_data"]
    assert data["held_out_tools"] == 6 and data["dev_unseen"] > 0 and data["train"] > 0
    assert report["generation"]["samples"] == 30 * N
    generated = [report["generation"][k]["generated_this_run"] for k in ("goal", "multi")]
    assert [report["generation"]["generated_this_run"], *generated] == [0, 0, 0], (
        "the committed shards of the fixture catalog no longer answer its requests (a prompt, the test LLM or the "
        "fixture changed): regenerate them with `.venv/bin/python tests/fixtures/make_adapt_generations.py`")
    # the champion is a servable index with its card; registered with the alias `champion`
    card = json.loads((out / "champion" / "model_card.json").read_text())
    assert card["catalog"]["fingerprint"] == report["catalog"]["fingerprint"]
    assert (out / "champion" / "MODEL_CARD.md").read_text().splitlines()[0] == f"# fixture: {champion}"
    assert Path(resolve_index("models:/adapt-fixture@champion", uri)).resolve() == (out / "champion").resolve()
    hits = Pipeline.load(out / "champion").search(["Will it rain in Paris this week?"], 3).ranked_ids(0)
    assert len(hits) == 3
    # self-contained: every encoder it reads ships in a package or lies inside the champion folder (a later
    # adapt retrains work/dense-ft in place: tests/pipeline/test_self_contained_save.py)
    for meta_file in (out / "champion").rglob("component.json"):
        meta = json.loads(meta_file.read_text())
        model = (meta.get("config") or {}).get("model") if isinstance(meta.get("config"), dict) else None
        if model is not None and model not in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
            assert (meta_file.parent / meta["encoder_dir"] / "adapter_config.json").is_file(), meta_file


def test_choice_depends_on_synthetic_dev_only(adapted, fixture_catalog, llm, spec, tmp_path) -> None:
    """A planted labelled query set that would favour another candidate changes nothing of the choice: the
    dev results, the training data and the champion are those of the run without labelled queries."""
    from toolret.adapt import adapt

    out, report, _ = adapted
    directory, _ = fixture_catalog
    # judged queries built to favour BM25 (their text is each gold tool's own document) instead of the
    # fixture's test queries: were they read before the choice, the choice or the dev numbers would move
    planted = tmp_path / "planted.jsonl"
    tools = [json.loads(line) for line in (Path(directory) / "corpus.jsonl").read_text().splitlines() if line.strip()]
    planted.write_text("".join(json.dumps({"_id": f"p{i}", "text": t["text"], "gold": [t["_id"]]}) + "\n"
                               for i, t in enumerate(tools[:5])))
    second = shutil.copytree(out, tmp_path / "again", ignore=shutil.ignore_patterns("champion", "adapt_report.json"))
    shutil.rmtree(second / "work", ignore_errors=True)
    r2 = adapt(directory, second, queries=planted, n=N, llm=llm, generator=spec, finetune_overrides=TINY,
               register=False)
    assert r2["generation"]["generated_this_run"] == 0  # the shards answered
    assert r2["training_data"] == report["training_data"]
    assert {n: d["metrics"] for n, d in r2["dev"].items()} == {n: d["metrics"] for n, d in report["dev"].items()}
    assert r2["selection"]["champion"] == report["selection"]["champion"]
    assert r2["labelled"]["bm25"]["n_queries"] == 5


def test_readapt_generates_for_new_tools_only_and_mcp_serves_the_new_tool(adapted, fixture_catalog, llm, spec,
                                                                         tmp_path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from toolret.adapt import adapt

    out, report, uri = adapted
    directory, _ = fixture_catalog
    grown = shutil.copytree(directory, tmp_path / "grown" / Path(directory).name)  # same catalog name
    new = {"_id": "t900", "title": "Adopt A Pet",
           "text": "category_name:Animals, tool_name:PawFinder, api_name:Adopt A Pet, api_description:Search shelter "
                   "animals (dogs, cats, rabbits) available for adoption near a zip code., required_params: "
                   "[{\"name\": \"zip\", \"type\": \"STRING\", \"description\": \"zip code\"}], optional_params: [], "
                   "return_schema: {\"pets\": \"list\"}",
           "metadata": {"category_name": "Animals", "tool_name": "PawFinder", "api_name": "Adopt A Pet"}}
    with open(grown / "corpus.jsonl", "a") as f:
        f.write(json.dumps(new) + "\n")
    r2 = adapt(grown, out, n=N, llm=llm, generator=spec, finetune_overrides=TINY, tracking_uri=uri)
    assert r2["changes"] == {"added": 1, "removed": 0, "changed": 0, "unchanged": 30}
    assert r2["generation"]["generated_this_run"] == N and r2["generation"]["tools_generated_this_run"] == 1
    assert r2["adapter_reused"] is True
    assert r2["mlflow"]["version"] == "2"
    # a champion is registered: the re-adapted model is the challenger (toolret promote decides), in its folder
    assert (r2["role"], r2["mlflow"]["uri"]) == ("challenger", "models:/adapt-fixture@challenger")
    assert (out / "challenger" / "pipeline.json").is_file()
    params = StdioServerParameters(command=sys.executable, env=dict(os.environ, MLFLOW_TRACKING_URI=uri),
                                   args=["-m", "toolret.cli", "mcp", "--index", "models:/adapt-fixture@challenger"])

    async def call():
        async with Client(params, read_timeout_seconds=120) as client:
            return await client.call_tool("search_tools", {"query": "adopt a rescue dog from a shelter", "k": 3})

    result = asyncio.run(call())
    assert not result.is_error, result.content
    assert result.structured_content["hits"][0]["tool_id"] == "t900"


@pytest.mark.parametrize("mutate, message", [
    (lambda d: (d / "corpus.jsonl").write_text(""), "the catalog has no tools"),
    (lambda d: (d / "corpus.jsonl").write_text((d / "corpus.jsonl").read_text() + (d / "corpus.jsonl").read_text()
                                               .splitlines()[0] + "\n"), "duplicate tool ids"),
    (lambda d: (d / "corpus.jsonl").write_text("\n".join(
        json.dumps({**json.loads(line), "text": "  "}) if i < 2 else line
        for i, line in enumerate((d / "corpus.jsonl").read_text().splitlines())) + "\n"),
     "2 tool(s) with an empty document: 't000', 't001'"),
])
def test_bad_catalogs_are_refused_and_the_champion_stays(adapted, fixture_catalog, llm, spec, tmp_path, mutate,
                                                           message) -> None:
    from toolret.adapt import adapt
    from toolret.errors import AdaptInputError

    out, _, uri = adapted
    directory, _ = fixture_catalog
    bad = shutil.copytree(directory, tmp_path / "bad")
    mutate(bad)
    before = (out / "champion" / "model_card.json").read_bytes()
    with pytest.raises(AdaptInputError, match=re.escape(message)):
        adapt(bad, out, n=N, llm=llm, generator=spec, finetune_overrides=TINY, tracking_uri=uri)
    assert (out / "champion" / "model_card.json").read_bytes() == before


def test_a_generator_server_that_is_down_is_named(fixture_catalog, tmp_path) -> None:
    from toolret.adapt import GeneratorSpec, adapt
    from toolret.errors import AdaptInputError

    directory, _ = fixture_catalog
    spec = GeneratorSpec(model="any-model", engine="openai", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(AdaptInputError, match=r"http://127.0.0.1:9/v1"):
        adapt(directory, tmp_path / "out", n=1, generator=spec, register=False)
    assert not (tmp_path / "out" / "champion").exists()


def test_a_killed_adapt_resumes_from_its_shards(tmp_path) -> None:
    from make_fixture import write_fixture_catalog

    # its own smaller catalog (6 tools): the run generates everything itself, twice in part (the fixture's 30
    # tools cost ~3 min of generation here); what is proved is the same: kill -9 mid-generation, resume
    directory = write_fixture_catalog(tmp_path / "fixture", n_tools=TOOLS_KILLED, n_train=16, n_test=8, seed=0)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "toolret.cli", "adapt", "--catalog", str(directory), "--out", str(out),
           "--n", str(N), "--llm-model", "smollm2-135m-instruct", "--no-register", "--shard-prompts", "2",
           "--candidates", "bm25,dense"]  # what is proved is the generation's resume: no training after it
    env = dict(os.environ)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shards = out / "generations" / "smollm2-135m-instruct" / "reinvoke-queries"
    deadline = time.time() + 600
    while not list(shards.glob("shard-*.meta.json")):
        assert proc.poll() is None and time.time() < deadline, "no shard was written"
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = sum(json.loads(p.read_text())["n_records"] for p in shards.glob("shard-*.meta.json"))
    assert 0 < done < TOOLS_KILLED * N
    assert not (out / "champion").exists()  # never a half-built champion
    finished = subprocess.run(cmd + ["--budget", "fast"], env=env, capture_output=True, text=True, timeout=1200)
    assert finished.returncode == 0, finished.stderr[-3000:]
    report = json.loads((out / "adapt_report.json").read_text())
    assert report["generation"]["generated_this_run"] == TOOLS_KILLED * N - done
    assert (out / "champion" / "pipeline.json").is_file()
