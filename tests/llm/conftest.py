"""Shared fixtures for toolret.llm tests: the REAL default model (SmolLM2-135M-Instruct).

The converted model lives in data/models/llm/ (shared with benchmarks and pipelines); the first run
converts it from the GGUF package (~30-50 s), later runs load it in < 1 s.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # helper modules of this folder (_kill9)


@pytest.fixture(scope="session")
def model_folder():
    from toolret.llm.models import ensure_local_model

    return ensure_local_model()


@pytest.fixture(scope="session")
def generator(model_folder):
    from toolret.llm.transformers_backend import TransformersGenerator

    return TransformersGenerator(model=str(model_folder), batch_size=4, progress=False)
