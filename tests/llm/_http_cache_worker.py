"""Subprocess for the HTTP backend's kill -9 test: generate through a served model into a cache."""

import sys

from toolret.llm.base import SamplingParams
from toolret.llm.cache import CachedGenerator
from toolret.llm.openai_backend import OpenAIConfig, OpenAIGenerator

PROMPTS = [[{"role": "user", "content": f"Write a short question about the number {i}."}] for i in range(6)]
PARAMS = SamplingParams(max_new_tokens=12, temperature=0.0)

if __name__ == "__main__":
    cache_path, base_url = sys.argv[1], sys.argv[2]
    gen = OpenAIGenerator(OpenAIConfig(model="smollm2-135m-instruct", base_url=base_url, max_concurrency=1,
                                       progress=False))
    CachedGenerator(gen, cache_path).generate(PROMPTS, PARAMS)
