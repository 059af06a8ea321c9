"""The search service behind both protocols (REST ``/search`` and the MCP tool ``search_tools``).

- :class:`Loaded`: one saved pipeline loaded **and warmed** (one search at load time, so the dense
  encoder's weights are in memory before the service reports ready), with its tool records
  (``tools.jsonl``; else a catalog given to the server; else id-only records) and catalog summary.
  Immutable once built: a reload builds a new one and swaps the reference.
- :class:`SearchService`: validation (:class:`Limits`), admission and execution:

  * searches run on a fixed pool of ``workers`` threads; at most ``max_in_flight`` searches are admitted
    (running + queued for a worker); one more is answered 503 with ``Retry-After`` at once;
  * no global lock where the components are read-only at search time (:func:`toolret.roles.concurrent_safe`:
    a component class declares ``concurrent_search = True`` -- BM25 (bm25s ``retrieve``), dense / dense-ft
    (faiss ``search``; sentence-transformers ``encode``, checked from 16 threads: identical vectors, no
    tokenizer errors) -- and ``hybrid`` derives it from its two sides). Any other component (LLM rewriters, rerankers
    with score memos and statistics) is not assumed thread-safe: that pipeline's searches run one at a time
    (a lock per loaded pipeline);
  * **micro-batching** (``Limits.batching``, on by default): requests for the same loaded pipeline and the
    same ``k`` are gathered into one ``pipeline.search(queries, k)`` call (one encoder forward pass instead
    of one per request; for a locked pipeline, one reranker call) and each request gets its own rows. A
    batch is opened by the first request and joined by later ones until it starts: it starts at once
    when fewer than ``batch_parallel`` batches of its pipeline are running (default: one per CPU, each
    encoding on one torch thread; an idle server adds no latency), else when one of them ends, when
    ``batch_wait_ms`` have passed since it opened, or when it holds ``batch_max_queries`` queries (a
    request is never split: one larger than that is a batch of its own). A pipeline with a lock runs one
    batch at a time, and a batch waiting for the lock keeps gathering. Requests with another ``k`` form
    their own batch: a top-k list is then exactly the pipeline's top-k for that query (a deeper search cut
    to k may break score ties differently, and a reranker fusing with the first stage at k is no prefix of
    its deeper list). A failed batch of several requests is retried request by request, so a request that
    fails alone gets its error and the others their results;
  * a request waits at most ``timeout_s`` (504); the worker thread running its batch cannot be killed, so
    its admission slot is released only when that search really ends (work stays bounded);
  * :meth:`SearchService.reload` loads + warms a new pipeline off the request path, then swaps it in with
    one reference assignment: a request holds the pipeline it was admitted with (a batch only gathers
    requests of one loaded pipeline), so requests in flight finish on the old one and none fails; a failed
    reload keeps the old one serving.

Test hooks (environment, read at start): ``TOOLRET_SERVE_TEST_SEARCH_DELAY_S`` sleeps in every batch
(inside the admission slots of its requests, before its search), ``TOOLRET_SERVE_TEST_LOAD_DELAY_S``
before every load -- so tests can hold a slot or observe readiness; results are never altered.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from toolret.catalog.io import load_catalog
from toolret.catalog.tool_records import ToolHit, catalog_summary, id_record, tool_record
from toolret.errors import CatalogError, RequestError
from toolret.pipeline import Pipeline
from toolret.roles import concurrent_safe


@dataclass(frozen=True)
class Limits:
    """Request limits and the concurrency model (``toolret serve`` flags)."""

    max_queries: int = 64          # queries per request
    max_query_chars: int = 2000    # characters per query
    max_k: int = 100               # results per query (and never more than the catalog holds)
    max_body_bytes: int = 1 << 20  # request body (REST and MCP)
    max_in_flight: int = 64        # searches admitted (running + waiting for a worker); beyond: 503
    workers: int = 4               # threads running searches
    timeout_s: float = 30.0        # a request waits this long for its search (then 504)
    retry_after_s: int = 1         # Retry-After of a 503
    # torch intra-op threads of a pipeline that uses torch (dense encoders): concurrent requests already
    # run on `workers` threads, and 2 intra-op threads per search on a busy 2-core box made a MiniLM query
    # 40-200 ms instead of 15 ms (OpenMP oversubscription); 0 = leave torch's default
    torch_threads: int = 1
    # micro-batching (module docstring): concurrent requests for one pipeline and k share one search
    batching: bool = True
    batch_max_queries: int = 64    # queries in one batch (a larger request is a batch of its own)
    batch_parallel: int = 0        # batches of one pipeline running at once before new ones gather (0: CPUs)
    batch_wait_ms: float = 20.0    # a gathering batch starts at the latest this long after it opened

    def __post_init__(self) -> None:
        zero_ok = ("torch_threads", "batch_wait_ms", "batch_parallel")
        bad = [f"{k}={v}" for k, v in asdict(self).items()
               if not isinstance(v, bool) and not (v >= 0 if k in zero_ok else v > 0)]
        if bad:
            raise CatalogError(f"serving limits must be positive (torch_threads, batch_parallel, batch_wait_ms: "
                               f">= 0): "
                               f"{', '.join(bad)}")


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# the type of every search argument either protocol takes: (what it must be, the check)
ARGUMENT_TYPES: dict[str, tuple[str, Any]] = {
    "queries": ("a list of strings", lambda v: isinstance(v, list)),
    "query": ("a string", lambda v: isinstance(v, str)),
    "k": ("an integer", _integer),
    "schemas": ("an integer", _integer),
    "include_schema": ("true or false", lambda v: isinstance(v, bool)),
    "min_score": ("a number or null", lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))),
    "server": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "category": ("a string or null", lambda v: v is None or isinstance(v, str)),
}


def check_search_arguments(args: Any, allowed: Any, required: Any = ()) -> dict[str, Any]:
    """The one check of a search request's arguments, shared by REST ``POST /search`` (its JSON body) and
    the MCP tools ``search_tools`` (their raw arguments, before the SDK's own lax coercion): an object, no
    field outside ``allowed``, every ``required`` one present, each typed as :data:`ARGUMENT_TYPES` says
    (``k`` an integer: not ``"5"``, not ``true``). The limits (k range, query length) are the service's
    (:meth:`SearchService.search`), so both protocols refuse with the same messages.

    Raises:
        RequestError: 422 naming the field.
    """
    if not isinstance(args, dict):
        raise RequestError(422, "body", f"must be a JSON object, got {type(args).__name__}")
    allowed = set(allowed)
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise RequestError(422, str(unknown[0]), f"unknown field (allowed: {sorted(allowed)})")
    for name in required:
        if name not in args:
            raise RequestError(422, name, "is required")
    for name, value in args.items():
        what, ok = ARGUMENT_TYPES.get(name, (None, None))
        if ok is not None and not ok(value):
            raise RequestError(422, name, f"must be {what}, got {type(value).__name__}")
    return args


def _env_float(name: str) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else 0.0


@dataclass(eq=False)
class _Request:
    queries: list[str]
    include_schema: bool
    future: Future


@dataclass(eq=False)
class _Batch:
    """Requests for one loaded pipeline and one ``k``, answered by one search."""

    loaded: Loaded
    k: int
    opened: float  # time.monotonic() of its first request
    requests: list[_Request] = field(default_factory=list)
    n_queries: int = 0

    def add(self, request: _Request) -> None:
        self.requests.append(request)
        self.n_queries += len(request.queries)


WARM_UP_QUERY = "warm up the retriever"


def warm_up(pipeline: Any) -> float:
    """One search of ``pipeline``, so lazily loaded models (the dense encoder) are in memory before the first
    caller's (``toolret serve`` / ``toolret mcp`` at load, ``toolret gateway`` once its index is built); its
    seconds."""
    start = time.perf_counter()
    pipeline.search([WARM_UP_QUERY], 1)
    return time.perf_counter() - start


class Loaded:
    """A loaded, warmed pipeline with what agents see of its tools."""

    def __init__(self, index_dir: str | Path, catalog_dir: str | Path | None = None) -> None:
        self.index_dir = Path(index_dir)
        self.pipeline = Pipeline.load(self.index_dir)
        tool_ids = list(self.pipeline.retriever.tool_ids)
        self.n_tools = len(tool_ids)
        catalog_info = self.pipeline.catalog_info
        if self.pipeline.tool_records is not None:
            records, self.tool_metadata = self.pipeline.tool_records, "tools.jsonl"
        elif catalog_dir is not None:

            catalog = load_catalog(catalog_dir)
            records, self.tool_metadata = [tool_record(t) for t in catalog.tools], f"catalog {catalog_dir}"
            catalog_info = catalog_info or catalog_summary(catalog)
        else:
            records, self.tool_metadata = [], "tool ids only (index saved without tools.jsonl; pass --catalog)"
        by_id = {r["id"]: r for r in records}
        self.records = {t: by_id.get(t) or id_record(t) for t in tool_ids}
        self.catalog = {**(catalog_info or {}), "n_tools": self.n_tools}
        safe = all(concurrent_safe(c) for c in self.pipeline.components)
        self.lock = None if safe else threading.Lock()
        self.loaded_at = time.time()

    @property
    def name(self) -> str:
        return self.pipeline.name

    def warm(self) -> None:
        """One search, so lazily loaded models (the dense encoder) are in memory before serving."""
        if self.lock is None:
            warm_up(self.pipeline)
        else:
            with self.lock:
                warm_up(self.pipeline)

    def hit(self, tool_id: str, score: float, include_schema: bool) -> dict[str, Any]:
        r = self.records.get(tool_id)
        if r is None:  # a reranker added a tool beyond the index (never in the shipped ones)

            r = id_record(tool_id)
        return ToolHit.from_record(r, score, tool_id).to_dict(include_schema)

    def rows(self, ranking, start: int, stop: int, k: int, include_schema: bool) -> list[list[dict[str, Any]]]:
        """Hits of the ranking's rows ``start:stop`` (the queries of one request), at most ``k`` each."""
        return [[self.hit(ranking.tool_ids[i], float(s), include_schema)
                 for i, s in zip(ranking.indices[r], ranking.scores[r]) if i >= 0][:k]
                for r in range(start, stop)]

    def search(self, queries: list[str], k: int, include_schema: bool = True) -> list[list[dict[str, Any]]]:
        """One search outside the service's batching (the warm-up; tests), under the lock where there is one."""
        if self.lock is None:
            ranking = self.pipeline.search(queries, k)
        else:
            with self.lock:
                ranking = self.pipeline.search(queries, k)
        return self.rows(ranking, 0, len(queries), k, include_schema)

    def summary(self) -> dict[str, Any]:
        return {"pipeline": self.name, "index": str(self.index_dir), "n_tools": self.n_tools,
                "tool_metadata": self.tool_metadata, "concurrent": self.lock is None,
                "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.loaded_at))}


class SearchService:
    """Validation, admission, execution and index swap, shared by REST and MCP (see the module docstring)."""

    def __init__(self, index_dir: str | Path, *, catalog_dir: str | Path | None = None,
                 limits: Limits | None = None) -> None:
        self.index_dir = Path(index_dir)
        self.catalog_dir = catalog_dir
        self.limits = limits or Limits()
        self.current: Loaded | None = None
        self.state = "loading"  # loading | ready | failed
        self.error: str | None = None
        self._executor = ThreadPoolExecutor(self.limits.workers, thread_name_prefix="toolret-search")
        self._admit = threading.Lock()
        self._reloading = threading.Lock()
        self._in_flight = 0
        # micro-batching: the open (joinable) batch per (loaded pipeline, k), batches running per pipeline
        self._batches = threading.Condition()
        self._open: dict[tuple[Loaded, int], _Batch] = {}
        self._running: dict[Loaded, int] = {}
        self.stats = {"requests": 0, "rejected": 0, "timeouts": 0, "errors": 0, "max_in_flight": 0, "reloads": 0,
                      "batches": 0, "batched_queries": 0, "max_batch_queries": 0}
        self.test_search_delay_s = _env_float("TOOLRET_SERVE_TEST_SEARCH_DELAY_S")
        self.test_load_delay_s = _env_float("TOOLRET_SERVE_TEST_LOAD_DELAY_S")

    # ------------------------------------------------------------------ loading
    def _load(self, index_dir: str | Path, catalog_dir: str | Path | None) -> Loaded:
        if self.test_load_delay_s:
            time.sleep(self.test_load_delay_s)
        loaded = Loaded(index_dir, catalog_dir)
        self._torch_threads()
        loaded.warm()
        return loaded

    def _torch_threads(self) -> None:
        """Apply ``limits.torch_threads`` in the calling thread: torch keeps the intra-op thread count per
        thread (set in the loading thread, the search threads still used 2: a dense query took ~0.5 s on
        the busy box). A no-op where torch is not imported (BM25)."""
        torch = sys.modules.get("torch")
        n = self.limits.torch_threads
        if torch is not None and n > 0 and torch.get_num_threads() != n:
            torch.set_num_threads(n)

    def load(self) -> None:
        """The start-up load (blocking): ``ready`` once loaded and warmed, ``failed`` (+ ``error``) else."""
        try:
            self.current = self._load(self.index_dir, self.catalog_dir)
        except Exception as e:
            self.state, self.error = "failed", f"{type(e).__name__}: {e}"
            raise
        self.state = "ready"

    async def reload(self, index_dir: str | Path | None = None,
                     catalog_dir: str | Path | None = None) -> dict[str, Any]:
        """Load + warm ``index_dir`` (default: the served one again, e.g. after it was rebuilt) off the
        request path, then swap it in atomically. One reload at a time (409 otherwise)."""
        if self.state != "ready":
            raise RequestError(503, None, f"not ready ({self.state}): nothing to reload yet",
                               {"Retry-After": str(self.limits.retry_after_s)})
        if not self._reloading.acquire(blocking=False):
            raise RequestError(409, None, "a reload is already in progress")
        try:
            target = Path(index_dir) if index_dir else self.index_dir
            if catalog_dir is None and index_dir is None:
                catalog_dir = self.catalog_dir  # the same index again: the same catalog
            old = self.current
            try:
                new = await asyncio.to_thread(self._load, target, catalog_dir)
            except (CatalogError, OSError) as e:
                raise RequestError(422, "index", f"cannot load {str(target)!r} ({type(e).__name__}: {e}); "
                                   f"still serving {str(old.index_dir)!r}") from None
            except Exception as e:  # noqa: BLE001 - reported; the old pipeline keeps serving
                raise RequestError(500, None, f"reload of {str(target)!r} failed ({type(e).__name__}: {e}); "
                                   f"still serving {str(old.index_dir)!r}") from None
            self.current, self.index_dir, self.catalog_dir = new, target, catalog_dir
            self.stats["reloads"] += 1
            return {"previous": old.summary(), "current": new.summary()}
        finally:
            self._reloading.release()

    # ------------------------------------------------------------------ validation
    def validate_query(self, text: Any, field: str) -> str:
        if not isinstance(text, str):
            raise RequestError(422, field, f"must be a string, got {type(text).__name__}")
        if not text.strip():
            raise RequestError(422, field, "is empty")
        if len(text) > self.limits.max_query_chars:
            raise RequestError(422, field, f"has {len(text)} characters (max {self.limits.max_query_chars})")
        return text

    def validate_k(self, k: Any, n_tools: int) -> int:
        if not isinstance(k, int) or isinstance(k, bool):
            raise RequestError(422, "k", f"must be an integer, got {type(k).__name__}")
        if k < 1:
            raise RequestError(422, "k", f"must be >= 1, got {k}")
        if k > n_tools:
            raise RequestError(422, "k", f"{k} exceeds the {n_tools} indexed tools")
        if k > self.limits.max_k:
            raise RequestError(422, "k", f"{k} exceeds max_k {self.limits.max_k}")
        return k

    def validate_queries(self, queries: Any) -> list[str]:
        if not isinstance(queries, list):
            raise RequestError(422, "queries", f"must be a list of strings, got {type(queries).__name__}")
        if not queries:
            raise RequestError(422, "queries", "is empty (at least one query)")
        if len(queries) > self.limits.max_queries:
            raise RequestError(422, "queries", f"has {len(queries)} queries (max {self.limits.max_queries})")
        return [self.validate_query(q, f"queries[{i}]") for i, q in enumerate(queries)]

    def ready(self) -> Loaded:
        loaded = self.current
        if loaded is None:
            detail = f"failed to load: {self.error}" if self.state == "failed" else "loading the pipeline"
            raise RequestError(503, None, f"not ready ({detail})", {"Retry-After": str(self.limits.retry_after_s)})
        return loaded

    # ------------------------------------------------------------------ execution
    def _release(self, _: Future) -> None:
        with self._admit:
            self._in_flight -= 1

    def submit(self, loaded: Loaded, queries: list[str], k: int, include_schema: bool) -> Future:
        """Admit (or 503) one validated search and add it to a batch (see the module docstring); the future
        holds its hits per query, or the error of its search."""
        with self._admit:
            self.stats["requests"] += 1
            if self._in_flight >= self.limits.max_in_flight:
                self.stats["rejected"] += 1
                raise RequestError(503, None, f"busy: {self._in_flight} searches in flight (max_in_flight "
                                   f"{self.limits.max_in_flight}); retry after {self.limits.retry_after_s} s",
                                   {"Retry-After": str(self.limits.retry_after_s)})
            self._in_flight += 1
            self.stats["max_in_flight"] = max(self.stats["max_in_flight"], self._in_flight)
        fut: Future = Future()
        # running from the start: a request that stops waiting (timeout) cannot cancel it, so its slot is
        # released when its batch really ends, never earlier
        fut.set_running_or_notify_cancel()
        fut.add_done_callback(self._release)
        request = _Request(queries, include_schema, fut)
        key = (loaded, k)
        with self._batches:
            batch = self._open.get(key) if self.limits.batching else None
            if batch is not None and batch.n_queries + len(queries) > self.limits.batch_max_queries:
                del self._open[key]  # full: it starts now; this request opens the next one
                self._batches.notify_all()
                batch = None
            if batch is not None:
                batch.add(request)
                if batch.n_queries >= self.limits.batch_max_queries:
                    del self._open[key]
                    self._batches.notify_all()
                return fut
            batch = _Batch(loaded, k, time.monotonic())
            batch.add(request)
            try:
                self._executor.submit(self._run_batch, batch)
            except RuntimeError:  # shutting down
                fut.set_exception(RequestError(503, None, "shutting down",
                                               {"Retry-After": str(self.limits.retry_after_s)}))
                return fut
            if self.limits.batching and batch.n_queries < self.limits.batch_max_queries:
                self._open[key] = batch
        return fut

    def _close(self, batch: _Batch) -> None:
        """No request joins ``batch`` from now on (it starts)."""
        key = (batch.loaded, batch.k)
        with self._batches:
            if self._open.get(key) is batch:
                del self._open[key]

    def _gather(self, batch: _Batch) -> None:
        """Let requests join ``batch`` while ``batch_parallel`` batches of its pipeline run, at most
        ``batch_wait_ms`` after it opened."""
        key = (batch.loaded, batch.k)
        deadline = batch.opened + self.limits.batch_wait_ms / 1000
        parallel = self.limits.batch_parallel or os.cpu_count() or 1
        with self._batches:
            while self._open.get(key) is batch and self._running.get(batch.loaded, 0) >= parallel:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._batches.wait(remaining)

    def _run_batch(self, batch: _Batch) -> None:
        """One batch on a worker thread: gather (a pipeline with a lock: while waiting for it), run one
        search, hand each request its rows (or its error)."""
        loaded = batch.loaded
        try:
            self._torch_threads()
            if loaded.lock is None:
                self._gather(batch)
            else:
                loaded.lock.acquire()
            try:
                self._close(batch)
                with self._batches:
                    self._running[loaded] = self._running.get(loaded, 0) + 1
                with self._admit:
                    self.stats["batches"] += 1
                    self.stats["batched_queries"] += batch.n_queries
                    self.stats["max_batch_queries"] = max(self.stats["max_batch_queries"], batch.n_queries)
                try:
                    self._search_batch(batch)
                finally:
                    with self._batches:
                        self._running[loaded] -= 1
                        if not self._running[loaded]:
                            del self._running[loaded]
                        self._batches.notify_all()  # batches gathering behind this one may start
            finally:
                if loaded.lock is not None:
                    loaded.lock.release()
        except BaseException as e:  # noqa: BLE001 - never leave a request without an answer
            self._close(batch)
            for r in batch.requests:
                if not r.future.done():
                    r.future.set_exception(e)

    def _search_batch(self, batch: _Batch) -> None:
        if self.test_search_delay_s:
            time.sleep(self.test_search_delay_s)
        queries = [q for r in batch.requests for q in r.queries]
        try:
            ranking = batch.loaded.pipeline.search(queries, batch.k)
        except Exception as e:  # noqa: BLE001 - reported per request
            if len(batch.requests) == 1:
                batch.requests[0].future.set_exception(e)
                return
            for r in batch.requests:  # isolate the request(s) that fail on their own
                try:
                    alone = batch.loaded.pipeline.search(r.queries, batch.k)
                    r.future.set_result(batch.loaded.rows(alone, 0, len(r.queries), batch.k, r.include_schema))
                except Exception as e1:  # noqa: BLE001 - this request's own error
                    r.future.set_exception(e1)
            return
        start = 0
        for r in batch.requests:
            stop = start + len(r.queries)
            try:
                r.future.set_result(batch.loaded.rows(ranking, start, stop, batch.k, r.include_schema))
            except Exception as e:  # noqa: BLE001 - e.g. a record that cannot be rendered
                r.future.set_exception(e)
            start = stop

    async def search(self, queries: Any, k: Any, *, include_schema: bool = False,
                     query_field: str | None = None) -> tuple[Loaded, list[list[dict[str, Any]]]]:
        """Validate, admit and run one request; ``(the pipeline that answered, hits per query)``.
        ``query_field`` names a single query's field (MCP ``query``) instead of ``queries[i]``."""
        if query_field is not None:  # what needs no pipeline is refused first, loaded or not
            queries = [self.validate_query(queries, query_field)]
        else:
            queries = self.validate_queries(queries)
        loaded = self.ready()
        k = self.validate_k(k, loaded.n_tools)
        fut = self.submit(loaded, queries, k, include_schema)
        try:
            return loaded, await asyncio.wait_for(asyncio.wrap_future(fut), self.limits.timeout_s)
        except asyncio.TimeoutError:
            with self._admit:
                self.stats["timeouts"] += 1
            raise RequestError(504, None, f"search did not finish within {self.limits.timeout_s:g} s") from None
        except RequestError:
            raise
        except Exception as e:  # noqa: BLE001 - a failing component answers 500, the server keeps serving
            with self._admit:
                self.stats["errors"] += 1
            raise RequestError(500, None, f"search failed: {type(e).__name__}: {e}") from None

    # ------------------------------------------------------------------ reporting
    def catalog(self) -> dict[str, Any]:
        """The served catalog: size, provenance, pipeline (MCP resource ``toolret://catalog``)."""
        loaded = self.ready()
        return {**loaded.summary(), "catalog": loaded.catalog}

    def health(self) -> tuple[int, dict[str, Any]]:
        """``(200, ...)`` once loaded and warmed; ``(503, ...)`` while loading or after a failed start."""
        loaded = self.current
        if loaded is None:
            return 503, {"status": self.state, "index": str(self.index_dir), "error": self.error}
        with self._admit:
            load = {"in_flight": self._in_flight, **self.stats}
        return 200, {"status": "ready", **loaded.summary(), "catalog": loaded.catalog,
                     "reloading": self._reloading.locked(), "limits": asdict(self.limits), **load}

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["ARGUMENT_TYPES", "Limits", "Loaded", "RequestError", "SearchService", "check_search_arguments"]
