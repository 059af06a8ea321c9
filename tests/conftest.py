"""Shared test setup: ``tests/fixtures`` on ``sys.path`` and a fixture catalog directory."""

from __future__ import annotations

import os
import tempfile
import time
import sys
from pathlib import Path

import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# caches (LLM generations, embeddings, the converted test LLM) of the tests never land in the user's cache home;
# one per test run, made by the first process (pytest-xdist's workers inherit it from the controller), so the
# workers share what one of them converted or embedded (the caches are process-safe: file locks, atomic renames)
if "PYTEST_XDIST_WORKER" not in os.environ or "TOOLRET_TEST_CACHE_HOME" not in os.environ:
    os.environ["TOOLRET_TEST_CACHE_HOME"] = tempfile.mkdtemp(prefix="toolret-test-cache-")
os.environ["TOOLRET_CACHE_HOME"] = os.environ["TOOLRET_TEST_CACHE_HOME"]
# a worker per core: each keeps to one thread (torch / OpenMP / BLAS), or two workers' thread pools fight over
# two cores and OpenMP's spin-waits make a step many times slower than alone
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TOOLRET_LLM_THREADS"):
        os.environ[_var] = "1"

FIXTURES = Path(__file__).parent / "fixtures"
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))

from make_fixture import write_fixture_catalog  # noqa: E402


KINDS = ("integration", "slow")  # declared per module (``pytestmark``); every other test is ``unit``


# session fixtures that live in one process (a Dagster result, a running server ...): their tests share a worker
ONE_WORKER_FIXTURES = {"pipeline": "orchestration-pipeline"}


def xdist_group_of(item) -> str | None:
    """The pytest-xdist group (``--dist loadgroup``) a test runs in: the tests of a process-bound session fixture
    together, those of a module with a module-scoped fixture (an adapted catalogue, a trained model) together,
    every other test on its own (spread over the workers)."""
    for name, group in ONE_WORKER_FIXTURES.items():
        if name in item.fixturenames:
            return group
    for defs in item._fixtureinfo.name2fixturedefs.values():
        if any(d.scope == "module" for d in defs):
            return item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the xdist_group marks into the node ids
def pytest_collection_modifyitems(config, items):
    """``unit``: a test with neither ``integration`` (Dagster, DVC, MLflow, subprocesses, servers) nor ``slow``
    (trains a model or runs an LLM) -- ``make test-fast`` runs those. Each test's xdist group: xdist_group_of."""
    for item in items:
        if not any(item.get_closest_marker(k) for k in KINDS):
            item.add_marker(pytest.mark.unit)
        group = xdist_group_of(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    # the heavy modules first (those that train or run an LLM, then those with servers, DVC, Dagster), each module
    # kept whole and in order: the workers take the long groups while there is other work to balance them
    # (longest first), instead of one worker finishing a long group alone at the end
    rank = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        kind = 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("integration") else 2
        rank[module] = min(rank.get(module, 2), kind)
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])  # stable: collection order within a rank


@pytest.fixture
def fixture_catalog_dir(tmp_path: Path) -> Path:
    """A fresh, valid BEIR-layout fixture catalog (30 tools, 40 train / 20 test queries)."""
    return write_fixture_catalog(tmp_path / "fixture_catalog")


def _plain_nodeid(nodeid: str) -> str:
    """The node id without the ``@group`` suffix ``--dist loadgroup`` appends (after any parameter ids)."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def pytest_runtest_logreport(report):
    """``TOOLRET_TEST_TIMES=<file>``: one line per test phase as it ends (``nodeid  phase  seconds  outcome  worker
    end-time``),
    appended as the run goes (``tools/test_durations.py`` reads it; ``--durations`` prints only at the end)."""
    path = os.environ.get("TOOLRET_TEST_TIMES")
    if path and getattr(report, "node", None) is None:  # under xdist the controller sees each report again
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{_plain_nodeid(report.nodeid)}\t{report.when}\t{report.duration:.3f}\t{report.outcome}\t"
                    f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\t{time.time():.1f}\n")
