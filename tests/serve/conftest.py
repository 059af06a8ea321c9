"""Fixtures of the serving tests: the fixture catalog, BM25 pipelines saved on it, a running server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # serve_helpers

from make_fixture import write_fixture_catalog  # noqa: E402
from serve_helpers import Server, build_index  # noqa: E402


@pytest.fixture(scope="session")
def serve_catalog(tmp_path_factory):
    """``(directory, Catalog)`` of the fixture catalog (30 tools, BEIR layout)."""
    from toolret.catalog.datasets import load_dataset

    directory = write_fixture_catalog(tmp_path_factory.mktemp("serve") / "fixture")
    return directory, load_dataset(str(directory))


@pytest.fixture(scope="session")
def bm25_index(serve_catalog, tmp_path_factory) -> Path:
    return build_index(serve_catalog[1], tmp_path_factory.mktemp("idx") / "bm25")


@pytest.fixture(scope="session")
def bm25_index_b(serve_catalog, tmp_path_factory) -> Path:
    """Another BM25 pipeline on the same tools (k1 = 0.5, b = 0.3: other scores) to swap in."""
    return build_index(serve_catalog[1], tmp_path_factory.mktemp("idx") / "bm25b",
                       overrides={"bm25.k1": 0.5, "bm25.b": 0.3})


@pytest.fixture(scope="session")
def server(bm25_index, tmp_path_factory):
    """One `toolret serve` process with the default limits, shared by the tests that leave it as it was."""
    srv = Server(bm25_index, tmp_path_factory.mktemp("log") / "server.log")
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()
