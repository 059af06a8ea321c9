"""Subprocess for the kill -9 resume test: generate into a cache with small batches."""

import sys

from toolret.llm.base import SamplingParams
from toolret.llm.cache import CachedGenerator
from toolret.llm.transformers_backend import TransformersGenerator

PROMPTS = [f"Write a short question about the number {i}:" for i in range(8)]
PARAMS = SamplingParams(max_new_tokens=8, temperature=0.0)

if __name__ == "__main__":
    cache_path, model = sys.argv[1], sys.argv[2]
    gen = TransformersGenerator(model=model, batch_size=2, progress=False)
    CachedGenerator(gen, cache_path).generate(PROMPTS, PARAMS)
