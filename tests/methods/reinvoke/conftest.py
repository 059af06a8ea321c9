"""Fakes shared by the Re-Invoke tests: a deterministic Generator and a bag-of-words encoder."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest

from toolret.llm.base import Generation, generate_via_iter, sample_seed, sha256_text


class FakeGenerator:
    """``Generator`` whose output is ``respond(last user message, sample_index)``; counts calls."""

    model_id = "fake-llm"
    revision = "0"

    def __init__(self, respond) -> None:
        self.respond = respond
        self.calls = 0

    def render(self, prompt) -> str:
        return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)

    def iter_generate(self, requests, params):
        batch = []
        for pos, req in enumerate(requests):
            ph = sha256_text(self.render(req.prompt))
            last = req.prompt if isinstance(req.prompt, str) else req.prompt[-1]["content"]
            text = self.respond(last, req.sample_index)
            self.calls += 1
            batch.append((pos, Generation(text, ph, req.sample_index, sample_seed(params.seed, ph, req.sample_index),
                                          len(text.split()), "stop")))
        yield batch

    def generate(self, prompts, params):
        return generate_via_iter(self, prompts, params)


class BagOfWordsEncoder:
    """``DenseRetriever``-like: hashed bag of words, L2-normalised (fast, deterministic)."""

    dim = 256

    def encode(self, texts, show_progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)


@pytest.fixture
def fake_generator_cls():
    return FakeGenerator


@pytest.fixture
def counting_encoder_cls():
    """A :class:`BagOfWordsEncoder` that records every text it encodes (``.texts``)."""

    class CountingEncoder(BagOfWordsEncoder):
        def __init__(self) -> None:
            self.texts: list[str] = []

        def encode(self, texts, show_progress: bool = False):
            self.texts.extend(texts)
            return super().encode(texts)

    return CountingEncoder


@pytest.fixture
def bow_encoder():
    from toolret.methods.reinvoke.components import MemoEncoder

    return MemoEncoder(BagOfWordsEncoder())
