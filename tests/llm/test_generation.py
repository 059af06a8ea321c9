import pytest

from toolret.llm.base import Generator, SamplingParams, generate_generations, group
from toolret.llm.models import model_revision

pytestmark = pytest.mark.slow

PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Write a user query for a weather forecast tool."}],
    [{"role": "user", "content": "List three fruits."}],
    "The quick brown fox",
]
GREEDY = SamplingParams(max_new_tokens=16)


def test_protocol(generator):
    assert isinstance(generator, Generator)
    assert generator.model_id == "smollm2-135m-instruct"  # the converted folder carries the known model's name
    assert generator.revision == model_revision(generator.folder)  # fp32: the weights' hash, no dtype tag
    assert "<|im_start|>assistant" in generator.render(PROMPTS[0])
    assert generator.render("plain") == "plain"


def test_batched_generate_and_greedy_batch_invariance(generator):
    batch = generator.generate(PROMPTS, GREEDY)
    assert len(batch) == len(PROMPTS)
    assert all(isinstance(t, str) for t in batch)
    assert "paris" in batch[0].lower()
    assert batch[1].strip()
    # Observed (not guaranteed by floating point) property: same greedy text alone and in a batch.
    alone = generator.generate([PROMPTS[0]], GREEDY)[0]
    assert alone == batch[0]


def test_sampling_is_seeded_and_grouped(generator):
    params = SamplingParams(max_new_tokens=12, temperature=0.9, top_p=0.95, seed=7, n=2)
    a = generator.generate(PROMPTS[:2], params)
    assert len(a) == 4
    b = generator.generate(PROMPTS[:2], params)
    assert a == b  # same seed, same batch layout -> identical
    g = group(a, 2)
    assert len(g) == 2 and all(len(x) == 2 for x in g)
    # n is not part of a sample's identity: the first sample with n=1 equals sample 0 with n=2
    # (same per-sample seed; here the batch layout differs, so this also checks batch independence).
    one = generator.generate(PROMPTS[:1], SamplingParams(max_new_tokens=12, temperature=0.9, top_p=0.95, seed=7, n=1))
    assert one[0] == g[0][0]
    other = generator.generate(PROMPTS[:2], SamplingParams(max_new_tokens=12, temperature=0.9, top_p=0.95, seed=8, n=2))
    assert other != a


def test_generation_records(generator):
    gens = generate_generations(generator, ["Count: 1, 2, 3,"], SamplingParams(max_new_tokens=4))
    assert gens[0].finish_reason == "length" and gens[0].n_tokens == 4
    stopped = generate_generations(
        generator, [[{"role": "user", "content": "Say hello."}]], SamplingParams(max_new_tokens=24, stop=("!", "."))
    )
    assert stopped[0].finish_reason in ("stop", "length")
    assert "!" not in stopped[0].text and "." not in stopped[0].text


def test_preallocated_kv_layers_match_the_stock_cache(generator, monkeypatch):
    """The decode loop's preallocated K/V buffers (no torch.cat per step) give the same texts as
    transformers' own DynamicLayer, including when finished rows are dropped and the buffer grows."""
    import dataclasses

    import torch
    from transformers import DynamicCache

    import toolret.llm.transformers_backend as tb

    params = SamplingParams(max_new_tokens=20, temperature=0.8, top_p=0.9, seed=3, n=3)
    ours = generator.generate(PROMPTS, params)
    monkeypatch.setattr(generator, "config", dataclasses.replace(generator.config, preallocate_kv_cache=False))
    stock = generator.generate(PROMPTS, params)
    assert ours == stock and len(ours) == 3 * len(PROMPTS)

    # The layer itself: grows past its capacity, keeps what was written, selects rows.
    cache = tb._preallocated(DynamicCache(config=generator.model.config), capacity=2)
    layer = cache.layers[0]
    assert type(layer).__name__ == "PreallocatedLayer"
    k1, v1 = torch.randn(2, 3, 2, 4), torch.randn(2, 3, 2, 4)
    k2, v2 = torch.randn(2, 3, 3, 4), torch.randn(2, 3, 3, 4)
    layer.update(k1, v1)
    keys, values = layer.update(k2, v2)  # 5 > capacity 2: the buffer grows
    assert layer.get_seq_length() == 5
    assert torch.equal(keys, torch.cat([k1, k2], dim=-2)) and torch.equal(values, torch.cat([v1, v2], dim=-2))
    layer.batch_select_indices(torch.tensor([1]))
    assert torch.equal(layer.keys, torch.cat([k1, k2], dim=-2)[1:])
