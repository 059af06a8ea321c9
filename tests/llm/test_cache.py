import pytest
from _kill9 import kill_after_first_record

from toolret.llm.base import SamplingParams
from toolret.llm.cache import CachedGenerator, read_records, record_key

pytestmark = pytest.mark.slow  # runs an LLM

PARAMS = SamplingParams(max_new_tokens=8)


class Counting:
    """Pass-through Generator that counts the samples actually sent to the model."""

    def __init__(self, inner):
        self.inner, self.model_id, self.revision, self.calls = inner, inner.model_id, inner.revision, 0

    def render(self, p):
        return self.inner.render(p)

    def iter_generate(self, requests, params):
        self.calls += len(requests)
        yield from self.inner.iter_generate(requests, params)

    def generate(self, prompts, params):
        raise AssertionError("CachedGenerator must use iter_generate")


def test_second_call_generates_nothing(generator, tmp_path):
    counting = Counting(generator)
    prompts = ["Name a color:", "Name an animal:", "Name a color:"]  # duplicate generated once
    cg = CachedGenerator(counting, tmp_path / "c.jsonl")
    first = cg.generate(prompts, PARAMS)
    assert counting.calls == 2 and first[0] == first[2]
    cg2 = CachedGenerator(counting, tmp_path / "c.jsonl")  # fresh instance reads the file
    assert cg2.generate(prompts, PARAMS) == first
    assert counting.calls == 2
    # n grows: only the new sample indices are generated
    sp = SamplingParams(max_new_tokens=8, temperature=0.8, seed=1, n=1)
    cg2.generate(["Name a color:"], sp)
    before = counting.calls
    out = cg2.generate(["Name a color:"], SamplingParams(max_new_tokens=8, temperature=0.8, seed=1, n=3))
    assert counting.calls - before == 2 and len(out) == 3
    recs, bad = read_records(tmp_path / "c.jsonl")
    assert bad == 0 and len(recs) == 5
    assert {"prompt_hash", "model_id", "revision", "params", "seed", "sample_index", "output"} <= set(recs[0])


def test_truncated_last_line_is_tolerated(generator, tmp_path):
    path = tmp_path / "c.jsonl"
    counting = Counting(generator)
    CachedGenerator(counting, path).generate(["Name a fruit:", "Name a city:"], PARAMS)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 25])  # tear the last record
    cg = CachedGenerator(counting, path)
    assert cg.skipped_lines == 1 and len(cg) == 1
    calls = counting.calls
    cg.generate(["Name a fruit:", "Name a city:"], PARAMS)
    assert counting.calls - calls == 1  # only the torn one is regenerated
    recs, bad = read_records(path)
    assert bad == 1 and len(recs) == 2  # new record did not glue onto the torn line


def test_resume_after_kill_9(model_folder, generator, tmp_path):
    path = tmp_path / "cache.jsonl"
    landed, w = kill_after_first_record("_cache_worker", path, str(model_folder))
    assert 1 <= len(landed) < 8
    counting = Counting(generator)
    cg = CachedGenerator(counting, path)
    outs = cg.generate(w.PROMPTS, w.PARAMS)
    assert len(outs) == 8
    assert counting.calls == 8 - len(landed)  # cached entries were not regenerated
    recs, bad = read_records(path)
    keys = [record_key(r) for r in recs]
    assert len(keys) == len(set(keys)) == 8  # complete, no duplicates
    by_key = {record_key(r): r for r in landed}
    for r in recs:
        if record_key(r) in by_key:
            assert r["output"] == by_key[record_key(r)]["output"]
