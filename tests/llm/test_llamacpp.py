"""The optional llama.cpp engine on the shipped GGUF (skipped where llama-cpp-python is not installed:
`make setup` does not build it, see benchmarks/llm_engines.py for why)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("llama_cpp")

from toolret.llm.base import SamplingParams, generate_generations  # noqa: E402
from toolret.llm.engines import build_generator  # noqa: E402

pytestmark = pytest.mark.slow

CHATS = [[{"role": "user", "content": "Write one question a user could ask a weather API."}],
         [{"role": "user", "content": "Write one question a user could ask a movie search API."}]]


@pytest.fixture(scope="module")
def gen():
    return build_generator("llama.cpp", progress=False, batch_size=16)


def test_shapes_reasons_and_engine_in_revision(gen):
    params = SamplingParams(max_new_tokens=12, temperature=0.7, top_p=0.95, seed=1, n=3)
    outs = generate_generations(gen, CHATS, params)
    assert len(outs) == 6 and [o.sample_index for o in outs] == [0, 1, 2, 0, 1, 2]
    assert all(o.finish_reason in ("stop", "length") and 0 < o.n_tokens <= 12 for o in outs)
    assert gen.revision.startswith("llama.cpp-")  # cache keys never mix engines
    assert gen.render(CHATS[0]).endswith("assistant\n")  # the GGUF's chat template, generation prompt added


def test_seeded_sampling_is_reproducible_and_seed_dependent(gen):
    params = SamplingParams(max_new_tokens=16, temperature=1.0, top_p=1.0, seed=7, n=4)
    a = [o.text for o in generate_generations(gen, CHATS, params)]
    b = [o.text for o in generate_generations(gen, CHATS, params)]
    c = [o.text for o in generate_generations(gen, CHATS, dataclasses.replace(params, seed=8))]
    assert a == b and a != c
    assert len(set(a[:4])) > 1  # the samples of one prompt differ from each other


def test_greedy_and_stop_strings(gen):
    greedy = SamplingParams(max_new_tokens=24, temperature=0.0)
    x = generate_generations(gen, CHATS[:1], greedy)[0]
    y = generate_generations(gen, CHATS[:1], greedy)[0]
    assert x.text == y.text and x.text
    word = x.text.split()[1] if len(x.text.split()) > 1 else x.text
    cut = generate_generations(gen, CHATS[:1], dataclasses.replace(greedy, stop=(word,)))[0]
    assert word not in cut.text and x.text.startswith(cut.text)
