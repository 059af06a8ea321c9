"""Engine name -> ``Generator``: where a config picks the LLM engine (``reinvoke.llm_engine``)."""

from __future__ import annotations

from typing import Any

from toolret.llm.llamacpp_backend import LlamaCppConfig, LlamaCppGenerator
from toolret.llm.models import DEFAULT_MODEL
from toolret.llm.openai_backend import OpenAIConfig, OpenAIGenerator
from toolret.llm.transformers_backend import TransformersConfig, TransformersGenerator

ENGINES = ("transformers", "llama.cpp", "openai")


def build_generator(engine: str, model: str | None = None, *, device: str = "cpu",
                    batch_size: int = 64, num_threads: int | None = None, progress: bool = True,
                    base_url: str | None = None, max_prompt_tokens: int | None = None) -> Any:
    """A generator of ``model`` on ``engine``: local (llama.cpp: the GGUF; transformers: its fp32 folder)
    or ``openai``: any OpenAI-compatible server at ``base_url`` (``$TOOLRET_LLM_BASE_URL``), ``batch_size``
    requests in flight. ``model`` defaults to :data:`toolret.llm.models.DEFAULT_MODEL`.
    ``max_prompt_tokens``: where a local engine cuts longer prompts from the left (default: the engine's
    config default; the server of ``openai`` decides for itself)."""

    model = model or DEFAULT_MODEL
    if engine == "openai":

        return OpenAIGenerator(OpenAIConfig(model=model, base_url=base_url, max_concurrency=batch_size,
                                            progress=progress))
    if engine == "transformers":

        limit = {"max_prompt_tokens": int(max_prompt_tokens)} if max_prompt_tokens is not None else {}
        return TransformersGenerator(TransformersConfig(model=model, device=device, batch_size=batch_size,
                                                        num_threads=num_threads, progress=progress, **limit))
    if engine == "llama.cpp":
        import importlib.util

        if importlib.util.find_spec("llama_cpp") is None:
            raise ImportError("LLM engine 'llama.cpp' needs llama-cpp-python (`.venv/bin/pip install "
                              "llama-cpp-python`; it compiles llama.cpp, ~6 min on 2 cores)")

        limit = {"max_prompt_tokens": int(max_prompt_tokens)} if max_prompt_tokens is not None else {}
        return LlamaCppGenerator(LlamaCppConfig(model=model, n_threads=num_threads, max_sequences=batch_size,
                                                n_gpu_layers=-1 if device.startswith("cuda") else 0,
                                                progress=progress, **limit))
    raise ValueError(f"unknown LLM engine {engine!r}; choose one of {ENGINES}")
