"""Shared test setup: ``tests/fixtures`` on ``sys.path`` and a fixture catalog directory."""

from __future__ import annotations

import os
import tempfile
import sys
from pathlib import Path

import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# caches (LLM generations, embeddings) of the tests never land in the user's cache home
os.environ["TOOLRET_CACHE_HOME"] = tempfile.mkdtemp(prefix="toolret-test-cache-")

FIXTURES = Path(__file__).parent / "fixtures"
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))

from make_fixture import write_fixture_catalog  # noqa: E402


KINDS = ("integration", "slow")  # declared per module (``pytestmark``); every other test is ``unit``


def pytest_collection_modifyitems(config, items):
    """``unit``: a test with neither ``integration`` (Dagster, DVC, MLflow, subprocesses, servers) nor ``slow``
    (trains a model or runs an LLM) -- ``make test-fast`` runs those."""
    for item in items:
        if not any(item.get_closest_marker(k) for k in KINDS):
            item.add_marker(pytest.mark.unit)


@pytest.fixture
def fixture_catalog_dir(tmp_path: Path) -> Path:
    """A fresh, valid BEIR-layout fixture catalog (30 tools, 40 train / 20 test queries)."""
    return write_fixture_catalog(tmp_path / "fixture_catalog")
