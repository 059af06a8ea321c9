"""Micro-batching in the search service (in process, real BM25 / dense / hybrid pipelines on the fixture
catalog): concurrent requests against one loaded pipeline are answered by one ``pipeline.search`` call
per k, each request gets exactly its own rows -- the same as a serial search of its queries -- and the
admission limit, per-request timeouts, errors and an index swap behave per request as without batching.

The pipeline is held busy by the service's test delay hook (it sleeps inside each batch, results are
never altered) so that the requests submitted meanwhile gather deterministically; a counting wrapper
around the loaded pipeline's ``search`` records every call (it returns what the pipeline returns).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from serve_helpers import build_index, pipeline_hits

from toolret.serving.service import Limits, SearchService
from toolret.errors import RequestError

pytestmark = pytest.mark.integration

HOLD = "hold the pipeline busy with this weather query"
# one batch runs at a time; the next gathers until it ends (the window is never reached here)
LONG_WINDOW = {"batch_wait_ms": 5000.0, "batch_parallel": 1}


class CountingSearch:
    """Replaces a loaded pipeline's ``search``: records ``(queries, k)`` of every call, returns its result;
    ``fail`` (a predicate on the queries) injects a fault instead (no result is ever made up)."""

    def __init__(self, pipeline) -> None:
        self.calls: list[tuple[list[str], int]] = []
        self.fail = None
        self._search = pipeline.search
        pipeline.search = self

    def __call__(self, queries, k, query_ids=None):
        self.calls.append((list(queries), k))
        if self.fail is not None and self.fail(list(queries)):
            raise RuntimeError(f"injected fault on {len(queries)} queries")
        return self._search(queries, k, query_ids)


@pytest.fixture(scope="module")
def indexes(serve_catalog, tmp_path_factory):
    _, catalog = serve_catalog
    root = tmp_path_factory.mktemp("batch-idx")
    return {m: build_index(catalog, root / m, m) for m in ("bm25", "dense", "hybrid")}


@pytest.fixture()
def torch_threads():
    """The service sets torch's intra-op threads (process-wide for the main thread's pool): restore them."""
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def start(index, delay_s: float = 0.0, **limits) -> tuple[SearchService, CountingSearch]:
    service = SearchService(index, limits=Limits(**limits))
    service.load()
    service.test_search_delay_s = delay_s
    return service, CountingSearch(service.current.pipeline)


async def hold(service: SearchService) -> asyncio.Future:
    """One request that runs alone (the pipeline is idle) and keeps it busy for the test delay."""
    task = asyncio.ensure_future(service.search([HOLD], 1))
    deadline = time.monotonic() + 30
    while service.stats["batches"] < 1:  # its batch started: later requests gather behind it
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.01)
    return task


def as_pairs(rows) -> list[list[tuple[str, float]]]:
    return [[(h["tool_id"], h["score"]) for h in row] for row in rows]


def assert_same(got, expected) -> None:
    assert [[t for t, _ in row] for row in got] == [[t for t, _ in row] for row in expected]
    for g, e in zip(got, expected):
        assert [s for _, s in g] == pytest.approx([s for _, s in e], rel=1e-5)


@pytest.mark.parametrize("method", ["bm25", "dense", "hybrid"])
def test_concurrent_requests_share_one_search_per_k(method, indexes, serve_catalog, torch_threads):
    _, catalog = serve_catalog
    texts = [q.text for q in catalog.queries]
    # 12 requests: single and two-query ones, k = 5 and k = 3, with overlapping queries
    requests = [([texts[i]], 5) for i in range(6)] + [([texts[10 + i], texts[20 + i]], 3) for i in range(4)] \
        + [([texts[0], texts[30]], 5), ([texts[40]], 3)]
    expected = [pipeline_hits(indexes[method], qs, k) for qs, k in requests]
    service, counter = start(indexes[method], delay_s=0.5, workers=4, **LONG_WINDOW)
    try:
        async def scenario():
            first = await hold(service)
            answers = await asyncio.gather(*(service.search(qs, k) for qs, k in requests))
            await first
            return answers

        answers = asyncio.run(scenario())
    finally:
        service.close()
    for (loaded, rows), exp in zip(answers, expected):
        assert loaded.name == method
        assert_same(as_pairs(rows), exp)  # each request: its own rows, its own k, as a serial search
    # the held search, then ONE call per k for the 12 gathered requests (17 queries)
    assert len(counter.calls) == 3, [(len(q), k) for q, k in counter.calls]
    by_k = {k: sorted(q) for q, k in counter.calls[1:]}
    assert by_k == {5: sorted(q for qs, k in requests if k == 5 for q in qs),
                    3: sorted(q for qs, k in requests if k == 3 for q in qs)}
    assert service.stats["batches"] == 3 and service.stats["batched_queries"] == 1 + 17


def test_batching_off_runs_each_request_alone(indexes, serve_catalog):
    _, catalog = serve_catalog
    texts = [q.text for q in catalog.queries[:6]]
    service, counter = start(indexes["bm25"], delay_s=0.3, batching=False, **LONG_WINDOW)
    try:
        async def scenario():
            first = await hold(service)
            answers = await asyncio.gather(*(service.search([t], 4) for t in texts))
            await first
            return answers

        answers = asyncio.run(scenario())
    finally:
        service.close()
    assert len(counter.calls) == 1 + len(texts)
    for (_, rows), t in zip(answers, texts):
        assert_same(as_pairs(rows), pipeline_hits(indexes["bm25"], [t], 4))


def test_idle_pipeline_does_not_wait_for_the_window(indexes, serve_catalog):
    """One request at a time never waits for ``batch_wait_ms``: a batch gathers only behind running ones."""
    _, catalog = serve_catalog
    service, counter = start(indexes["bm25"], workers=2, batch_wait_ms=3000.0)
    try:
        async def scenario():
            t0 = time.perf_counter()
            for q in catalog.queries[:3]:
                await service.search([q.text], 3)
            return time.perf_counter() - t0

        assert asyncio.run(scenario()) < 2.0
    finally:
        service.close()
    assert len(counter.calls) == 3


def test_batches_run_in_parallel_up_to_batch_parallel(indexes, serve_catalog):
    """With ``batch_parallel`` 2, a request arriving while one batch runs starts at once (no window)."""
    _, catalog = serve_catalog
    service, counter = start(indexes["bm25"], delay_s=0.6, workers=4, batch_wait_ms=5000.0, batch_parallel=2)
    try:
        async def scenario():
            first = await hold(service)
            t0 = time.perf_counter()
            _, rows = await service.search([catalog.queries[0].text], 3)
            elapsed = time.perf_counter() - t0
            await first
            return elapsed, rows

        elapsed, rows = asyncio.run(scenario())
    finally:
        service.close()
    assert elapsed < 3.0 and len(counter.calls) == 2
    assert_same(as_pairs(rows), pipeline_hits(indexes["bm25"], [catalog.queries[0].text], 3))


def test_a_pipeline_with_a_lock_gathers_while_waiting_for_it(indexes, serve_catalog):
    """A pipeline that is not concurrent-safe (here: BM25 given a lock, as a reranker pipeline has) runs one
    batch at a time; the requests arriving meanwhile join the batch waiting for the lock, window or not."""
    import threading

    _, catalog = serve_catalog
    texts = [q.text for q in catalog.queries[:6]]
    service, counter = start(indexes["bm25"], delay_s=0.4, workers=4, batch_wait_ms=0.0, batch_parallel=4)
    service.current.lock = threading.Lock()
    try:
        async def scenario():
            first = await hold(service)
            answers = await asyncio.gather(*(service.search([t], 3) for t in texts))
            await first
            return answers

        answers = asyncio.run(scenario())
    finally:
        service.close()
    assert [sorted(q) for q, _ in counter.calls] == [[HOLD], sorted(texts)]
    for (_, rows), t in zip(answers, texts):
        assert_same(as_pairs(rows), pipeline_hits(indexes["bm25"], [t], 3))


def test_batch_max_queries_caps_a_batch(indexes, serve_catalog):
    _, catalog = serve_catalog
    texts = [q.text for q in catalog.queries]
    service, counter = start(indexes["bm25"], delay_s=0.3, workers=4, batch_max_queries=4, **LONG_WINDOW)
    big = texts[20:26]  # 6 queries > 4: a batch of its own (a request is never split)
    try:
        async def scenario():
            first = await hold(service)
            answers = await asyncio.gather(*(service.search([t], 3) for t in texts[:10]), service.search(big, 3))
            await first
            return answers

        answers = asyncio.run(scenario())
    finally:
        service.close()
    sizes = sorted(len(q) for q, _ in counter.calls[1:])
    assert sizes == [2, 4, 4, 6], sizes
    for (_, rows), t in zip(answers[:10], texts[:10]):
        assert_same(as_pairs(rows), pipeline_hits(indexes["bm25"], [t], 3))
    assert_same(as_pairs(answers[10][1]), pipeline_hits(indexes["bm25"], big, 3))


def test_a_failing_batch_reports_to_each_request_and_isolates_the_culprit(indexes, serve_catalog):
    _, catalog = serve_catalog
    texts = [q.text for q in catalog.queries[:5]]
    bad = "this query makes the pipeline fail"
    service, counter = start(indexes["bm25"], delay_s=0.2, workers=4, **LONG_WINDOW)
    try:
        # one failing query in a batch: its request gets the error, the others their own rows
        counter.fail = lambda qs: bad in qs

        async def batch(queries):
            first = await hold(service)
            out = await asyncio.gather(*(service.search([t], 3) for t in queries), return_exceptions=True)
            await first
            return out

        answers = asyncio.run(batch([*texts[:2], bad, *texts[2:]]))
        errors = [a for a in answers if isinstance(a, RequestError)]
        assert len(errors) == 1 and errors[0].status == 500 and "injected fault" in errors[0].message
        good = [a for a in answers if not isinstance(a, BaseException)]
        for (_, rows), t in zip(good, texts):
            assert_same(as_pairs(rows), pipeline_hits(indexes["bm25"], [t], 3))
        # a fault on every search: each request of the batch gets its own error
        counter.fail = lambda qs: HOLD not in qs
        answers = asyncio.run(batch(texts))
        assert [a.status for a in answers] == [500] * len(texts)
        assert service.stats["errors"] == 1 + len(texts)
        counter.fail = None  # the service keeps serving
        _, rows = asyncio.run(service.search([texts[0]], 3))
        assert_same(as_pairs(rows), pipeline_hits(indexes["bm25"], [texts[0]], 3))
        assert service.health()[1]["in_flight"] == 0
    finally:
        service.close()


def test_timeouts_and_admission_stay_per_request(indexes, serve_catalog):
    _, catalog = serve_catalog
    texts = [q.text for q in catalog.queries[:3]]
    service, counter = start(indexes["bm25"], delay_s=1.0, workers=4, timeout_s=0.4, max_in_flight=4,
                             **LONG_WINDOW)
    try:
        async def scenario():
            first = asyncio.ensure_future(service.search([HOLD], 1))
            while service.stats["batches"] < 1:
                await asyncio.sleep(0.01)
            waiting = [asyncio.ensure_future(service.search([t], 3)) for t in texts]
            await asyncio.sleep(0.05)
            with pytest.raises(RequestError) as busy:  # 4 admitted (1 running + 3 gathered): the 5th is refused
                await service.search([texts[0]], 3)
            out = await asyncio.gather(first, *waiting, return_exceptions=True)
            return busy.value, out

        busy, out = asyncio.run(scenario())
        assert busy.status == 503 and busy.headers == {"Retry-After": "1"}
        assert [getattr(e, "status", None) for e in out] == [504] * 4  # each request its own timeout
        assert service.stats["timeouts"] == 4 and service.stats["rejected"] == 1
        # slots are freed when the searches really end (the batch runs on), not at the timeout
        assert service.health()[1]["in_flight"] > 0
        deadline = time.monotonic() + 30
        while service.health()[1]["in_flight"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert len(counter.calls) == 2 and sorted(counter.calls[1][0]) == sorted(texts)
    finally:
        service.close()


def test_a_batch_runs_on_the_pipeline_its_requests_were_admitted_with(bm25_index, bm25_index_b, serve_catalog):
    _, catalog = serve_catalog
    old_q = [q.text for q in catalog.queries[:3]]
    new_q = [q.text for q in catalog.queries[3:6]]
    service, old = start(bm25_index, delay_s=0.8, workers=4, **LONG_WINDOW)
    try:
        async def scenario():
            first = await hold(service)
            before = [asyncio.ensure_future(service.search([t], 3)) for t in old_q]  # admitted on the old one
            await asyncio.sleep(0.05)
            await service.reload(bm25_index_b)  # while they wait behind the held search
            new = CountingSearch(service.current.pipeline)
            after = [asyncio.ensure_future(service.search([t], 3)) for t in new_q]
            return await asyncio.gather(first, *before, *after), new

        answers, new = asyncio.run(scenario())
    finally:
        service.close()
    names = [str(a[0].index_dir) for a in answers[1:]]
    assert names == [str(bm25_index)] * 3 + [str(bm25_index_b)] * 3
    for (_, rows), t in zip(answers[1:4], old_q):
        assert_same(as_pairs(rows), pipeline_hits(bm25_index, [t], 3))
    for (_, rows), t in zip(answers[4:], new_q):
        assert_same(as_pairs(rows), pipeline_hits(bm25_index_b, [t], 3))
    assert [sorted(q) for q, _ in old.calls] == [[HOLD], sorted(old_q)]  # one batch, no request of the new one
    assert sorted(q for qs, _ in new.calls for q in qs) == sorted(new_q)


def test_limits_validate_the_batching_settings():
    from toolret.errors import CatalogError

    assert Limits(batch_wait_ms=0).batch_wait_ms == 0  # no window: gather only behind a running batch
    with pytest.raises(CatalogError, match="batch_max_queries=0"):
        Limits(batch_max_queries=0)
    with pytest.raises(CatalogError, match="batch_wait_ms=-1"):
        Limits(batch_wait_ms=-1)
    with pytest.raises(CatalogError, match="batch_parallel=-2"):
        Limits(batch_parallel=-2)


def test_serve_flags_set_the_batching_limits():
    from toolret.cli import _serving_limits, build_parser

    parse = build_parser().parse_args
    assert _serving_limits(parse(["serve", "--index", "x"])) == Limits()
    limits = _serving_limits(parse(["mcp", "--index", "x", "--no-batching", "--batch-max-queries", "8",
                                    "--batch-wait-ms", "0", "--batch-parallel", "1"]))
    assert (limits.batching, limits.batch_max_queries, limits.batch_wait_ms, limits.batch_parallel) == (False, 8, 0, 1)
