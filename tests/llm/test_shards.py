"""Committed generation shards: a durable job writes finished shards, a new machine answers from them."""

import json
import subprocess

import pytest

from toolret.llm.base import SamplingParams
from toolret.llm.cache import CachedGenerator
from toolret.llm.shards import ShardStore, StoreFirstGenerator, git_commit, prompt_key, run_durable

from test_cache import Counting

pytestmark = pytest.mark.integration

PROMPTS = [[{"role": "user", "content": f"Name a {w}:"}] for w in ("color", "fruit", "city")]
SAMPLING = SamplingParams(max_new_tokens=6, temperature=0.8, top_p=0.95, seed=3, n=2)
PROV = {"kind": "test", "prompt_template_sha": "x"}


def _store(root, model="m", engine="transformers"):
    return ShardStore(root, model, engine)


def _never():
    raise AssertionError("the engine must not be built: the shards hold every sample")


def test_durable_job_writes_finished_shards_and_resumes_from_them(generator, tmp_path):
    counting = Counting(generator)
    engine = CachedGenerator(counting, tmp_path / "cache.jsonl")
    store = _store(tmp_path / "gen")
    landed = []
    summary = run_durable(store, "job", PROMPTS, SAMPLING, engine, PROV, shard_prompts=2,
                          on_shard=lambda path, meta: landed.append((path.name[:11], meta["n_records"])))
    assert landed == [("shard-00000", 4), ("shard-00001", 2)]
    assert summary["shards_written"] == 2 and summary["samples"] == 6 and summary["remaining_samples"] == 0
    shards = sorted((tmp_path / "gen" / "job").glob("shard-*.jsonl"))
    assert [p.name[:11] for p in shards] == ["shard-00000", "shard-00001"]
    meta = json.loads(shards[0].with_suffix(".meta.json").read_text())
    assert meta["n_records"] == 4 and meta["model"] == "m" and meta["engine"] == "transformers"
    assert meta["model_id"] == generator.model_id and meta["sampling"]["temperature"] == 0.8 and meta["seed"] == 3
    assert meta["run_info"]["samples_per_s"] > 0

    # a new machine: no LLM cache, only the shards -> every sample answered without building the engine
    fresh = StoreFirstGenerator(_store(tmp_path / "gen"), _never)
    again = fresh.generate(PROMPTS, SAMPLING)
    assert again == engine.generate(PROMPTS, SAMPLING) and not fresh.built
    assert fresh.model_id == generator.model_id

    # a second run of the job finds nothing to do
    calls = counting.calls
    assert run_durable(_store(tmp_path / "gen"), "job", PROMPTS, SAMPLING, engine, PROV)["shards_written"] == 0
    # n grows to 3: one new shard with only sample index 2 of each prompt
    more = SamplingParams(**{**SAMPLING.__dict__, "n": 3})
    assert run_durable(_store(tmp_path / "gen"), "job", PROMPTS, more, engine, PROV)["samples"] == 3
    assert counting.calls - calls == 3
    recs = [json.loads(l) for p in sorted((tmp_path / "gen" / "job").glob("shard-00002-*.jsonl"))
            for l in p.read_text().splitlines()]
    assert sorted(r["sample_index"] for r in recs) == [2, 2, 2]


def test_unfinished_or_foreign_shards_are_not_used(generator, tmp_path):
    engine = CachedGenerator(generator, tmp_path / "cache.jsonl")
    run_durable(_store(tmp_path / "gen"), "job", PROMPTS[:1], SAMPLING, engine, PROV)
    (shard,) = (tmp_path / "gen" / "job").glob("shard-*.jsonl")
    assert len(_store(tmp_path / "gen", engine="llama.cpp")) == 0  # another engine's samples never answer
    assert len(_store(tmp_path / "gen", model="other")) == 0
    shard.with_suffix(".meta.json").unlink()  # records without meta: an unfinished shard
    store = _store(tmp_path / "gen")
    assert len(store) == 0 and "not a finished shard" in store.ignored[0]


def test_a_torn_shard_is_an_error_naming_it(generator, tmp_path):
    engine = CachedGenerator(generator, tmp_path / "cache.jsonl")
    run_durable(_store(tmp_path / "gen"), "job", PROMPTS[:1], SAMPLING, engine, PROV)
    (shard,) = (tmp_path / "gen" / "job").glob("shard-*.jsonl")
    shard.write_text(shard.read_text().splitlines()[0] + "\n")
    with pytest.raises(ValueError, match=shard.name):
        _store(tmp_path / "gen")


def test_store_first_generator_builds_the_engine_only_for_what_is_missing(generator, tmp_path):
    engine = CachedGenerator(Counting(generator), tmp_path / "cache.jsonl")
    run_durable(_store(tmp_path / "gen"), "job", PROMPTS[:2], SAMPLING, engine, PROV)
    built = []

    def make():
        built.append(1)
        return engine

    sf = StoreFirstGenerator(_store(tmp_path / "gen"), make)
    calls = engine.inner.calls
    out = sf.generate(PROMPTS, SAMPLING)
    assert len(out) == 6 and built == [1] and engine.inner.calls - calls == 2  # the third prompt's 2 samples
    assert sf.stats["shard_hits"] == 4
    assert prompt_key(PROMPTS[0]) != prompt_key(PROMPTS[1])


def test_git_commit_commits_only_the_given_paths(tmp_path):
    def git(*a):
        return subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "other.txt").write_text("staged but not committed\n")
    git("add", "other.txt")
    (tmp_path / "s.jsonl").write_text("{}\n")
    assert git_commit([tmp_path / "s.jsonl"], "shard", tmp_path)
    assert git("show", "--name-only", "--format=", "HEAD").split() == ["s.jsonl"]
    assert "other.txt" in git("diff", "--cached", "--name-only")


def test_samples_generated_outside_a_job_are_recorded_as_shards_a_clone_answers_from(generator, tmp_path):
    """record_generations (``toolret evaluate-grid --record-generations``): what an evaluation had to generate
    lands as a finished shard, and a fresh store answers it with no engine built."""
    from toolret.llm.shards import record_generations

    engine = CachedGenerator(Counting(generator), tmp_path / "cache.jsonl")
    record_generations("rewrites")
    try:
        sf = StoreFirstGenerator(_store(tmp_path / "gen"), lambda: engine)
        out = sf.generate(PROMPTS, SAMPLING)
    finally:
        record_generations(None)
    (shard,) = (tmp_path / "gen" / "rewrites").glob("shard-*.jsonl")
    meta = json.loads(shard.with_suffix(".meta.json").read_text())
    assert meta["n_records"] == len(PROMPTS) * SAMPLING.n and meta["model_id"] == generator.model_id
    assert "created" not in json.dumps(meta), "a committed shard carries no time stamp"
    fresh = StoreFirstGenerator(_store(tmp_path / "gen"), _never)
    assert fresh.generate(PROMPTS, SAMPLING) == out and not fresh.built
    # recording is off again: a generator made now writes nothing
    StoreFirstGenerator(_store(tmp_path / "gen2"), lambda: engine).generate(PROMPTS[:1], SAMPLING)
    assert not (tmp_path / "gen2").exists()


def test_a_long_sampling_is_recorded_one_shard_per_chunk(generator, tmp_path):
    """QTA's preference sampling (``toolret fit --record-generations``): each chunk of requests lands as its own
    finished shard, so a run killed after the first chunk leaves that chunk to commit, and a fresh store answers
    every chunk with no engine built."""
    from toolret.llm.base import SampleRequest
    from toolret.llm.shards import record_generations
    from toolret.methods.qta.generation import generate

    engine = CachedGenerator(Counting(generator), tmp_path / "cache.jsonl")
    requests = [SampleRequest(p, i) for p in PROMPTS for i in (0, 1)]

    class LLM:
        def __init__(self, make):
            self.generator = StoreFirstGenerator(_store(tmp_path / "gen"), make)

    record_generations("qta-preferences")
    try:
        out = generate(LLM(lambda: engine), requests, SAMPLING, chunk=4)
    finally:
        record_generations(None)
    shards = sorted((tmp_path / "gen" / "qta-preferences").glob("shard-*.jsonl"))
    assert [len(s.read_text().splitlines()) for s in shards] == [4, 2]
    assert [(g.sample_index, g.text) for g in generate(LLM(_never), requests, SAMPLING, chunk=4)] == \
        [(g.sample_index, g.text) for g in out]
