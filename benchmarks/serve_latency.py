"""Serving latency under load: a real `toolret serve` process on 127.0.0.1, REST and MCP, per pipeline and
catalog.

Methods (``--methods``, default all four):

- ``bm25``, ``dense``, ``hybrid`` (bm25 + dense, reciprocal-rank fused; from the catalog's own documents
  where it has no ``cleaned`` variant, as a catalog loaded from the sources);
- ``rerank-10``: dense + the ToolRerank cross-encoder over its top 10 (``dense+ce-top10``), the trained
  artifact of the ``toolrerank`` params (in-domain: ``data/models/toolbench-synthetic/toolrerank``, 128
  tokens); the persistent cross-encoder score cache is off and each (protocol, concurrency)
  setting gets a fresh server, so no request is answered from scores an earlier one computed (the
  in-process memo of a server lives only for its setting, whose queries do not repeat when ``--warmup +
  --requests`` <= the test queries).

Catalogs (``--datasets``, default both): ``toolbench-g1-instruction`` (the 2,479 APIs of the ToolBench
groups) and ``toolbench-env-g1-instruction`` (the same queries over the 46,879-API tool environment), loaded
from the sources once each; or ``--catalog DIR`` (a curated catalog, repeatable). Per (catalog, method)
the pipeline is fitted, indexed and saved (``--index METHOD[@CATALOG]=DIR`` serves a saved one instead;
``--index-dir DIR`` keeps the built ones there and reuses them on the next run), served by ``toolret serve``
(a child process; ``--server-args`` adds flags, e.g. ``--no-batching``), and driven by a bounded asyncio
client loop: ``--requests`` requests (one test query each, top ``--k``) at each concurrency (``--concurrency``,
default 1, 8, 32) and protocol (``--protocols``: REST ``POST /search``; MCP ``search_tools`` over streamable
HTTP through the SDK's client, one session per concurrent client). Dense document vectors come from the
embedding store in the cache home (the 46,879 documents take ~23 min to encode cold on 2 cores).

Rows: ``catalog``, ``method``, ``protocol``, ``n_tools``, ``concurrency``, ``requests``, ``p50_ms``,
``p99_ms``, ``requests_per_s``, ``errors``, ``mean_batch_queries`` (queries per pipeline search the server
ran: its micro-batching), ``queries_repeat`` and the 1-minute load average when the setting ran. The client
runs on the same machine (its CPU time competes with the server's: on 2 cores the numbers are a lower bound
for a separate client machine).

Usage::

    python benchmarks/serve_latency.py                       # everything (see benchmarks/README.md)
    python benchmarks/serve_latency.py --datasets toolbench-g1-instruction --methods bm25,dense \\
        --concurrency 1,8 --requests 8 --warmup 2 --out /tmp/smoke.json     # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's toolret (and its data/), not another installed one
os.environ.setdefault("TOOLRET_PROJECT_DIR", str(ROOT))

DATASETS = ("toolbench-g1-instruction", "toolbench-env-g1-instruction")
RERANKER_SETS = {"toolrerank.score_cache": "off"}
# label -> pipeline spec, the params it needs, whether each setting gets a fresh server (in-process memo)
METHODS = {
    "bm25": {"spec": "bm25"},
    "dense": {"spec": "dense"},
    "hybrid": {"spec": "hybrid"},
    "rerank-10": {"spec": "dense+ce-top10", "set": RERANKER_SETS, "fresh_server": True},
}


def _catalogs(args):
    """``[(name, loader)]``: each catalog is loaded when its turn comes (the 46k one takes ~0.6 GB)."""
    from toolret import load_catalog  # a folder or a dataset name (the public API)

    names = args.catalog or args.datasets.split(",")
    return [(Path(c).name if args.catalog else c, lambda c=c: load_catalog(c)) for c in names]


def _params(method: str, overrides: list[str]):
    from toolret.config import apply_overrides, load_params

    params = load_params(overrides=overrides or None)
    sets = METHODS.get(method, {}).get("set")
    return apply_overrides(params, dict(sets)) if sets else params


def _build(method: str, catalog, out: Path, overrides: list[str], allow_fit: bool) -> tuple[Path | None, dict]:
    """Save ``method`` on ``catalog`` to ``out``: ``(dir, build info)`` or ``(None, {"note": why skipped})``."""
    from toolret.errors import CatalogError
    from toolret.pipeline import Pipeline, build_pipeline
    from toolret.registry import parse_spec
    from toolret.roles import Corpus

    spec_text = METHODS.get(method, {}).get("spec", method)
    if (out / "pipeline.json").is_file():
        return out, {"spec": spec_text, "reused": str(out), **_stats(Pipeline.load(out))}
    params = _params(method, overrides)
    try:
        spec = parse_spec(spec_text, params=params)
    except (CatalogError, KeyError) as e:
        return None, {"note": f"no such pipeline: {e}"}
    t0 = time.perf_counter()
    pipeline = build_pipeline(spec, catalog, params)
    untrained = [c.name for c in pipeline.components if getattr(c, "trained", True) is False]
    if untrained and not allow_fit:
        return None, {"note": f"{untrained} have no trained artifact: pass --index {method}=DIR of a saved "
                              "pipeline, or --allow-fit to train now"}
    try:
        pipeline.fit(catalog)
    except CatalogError as e:  # e.g. a stale artifact (its key names the differing inputs)
        return None, {"note": f"cannot fit {spec_text}: {e}"}
    pipeline.index(Corpus.from_catalog(catalog))
    pipeline.save(out)
    return out, {"spec": spec_text, "index_build_s": round(time.perf_counter() - t0, 1), **_stats(pipeline)}


def _stats(pipeline) -> dict:
    """What a reader needs to interpret a row: the hybrid's weight and which documents each side read."""
    stats = getattr(pipeline.retriever, "stats", None)
    if not stats:
        return {}
    return {"retriever_stats": {k: v for k, v in stats.items() if k in ("weight", "weight_source", "side_docs")}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM, then SIGKILL if ``proc`` has not exited after ``timeout`` s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _Server:
    def __init__(self, index: Path, log: Path, workers: int, max_in_flight: int, extra: list[str]) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolret.cli", "serve", "--index", str(index), "--port", str(self.port),
             "--workers", str(workers), "--max-in-flight", str(max_in_flight), "--timeout", "120", *extra],
            stdout=self._log, stderr=subprocess.STDOUT, cwd=ROOT)
        self.log = log

    async def ready(self, client, timeout: float = 900) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited:\n{self.log.read_text()[-3000:]}")
            try:
                r = await client.get(self.base + "/health")
                if r.status_code == 200:
                    return r.json()
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            await asyncio.sleep(0.2)
        raise RuntimeError("server not ready")

    def stop(self) -> None:
        stop_process(self.proc, timeout=60)
        self._log.close()


async def _drive(call, n: int, concurrency: int, queries: list[str]) -> tuple[list[float], int, float]:
    """``n`` calls of ``queries`` (cycled) by ``concurrency`` workers (worker i uses ``call(i, query)``):
    latencies ms, errors, wall s."""
    latencies: list[float] = []
    errors = 0
    counter = iter(range(n))

    async def worker(i: int) -> None:
        nonlocal errors
        for j in counter:
            t0 = time.perf_counter()
            try:
                ok = await call(i, queries[j % len(queries)])
            except Exception:  # noqa: BLE001 - counted
                ok = False
            latencies.append((time.perf_counter() - t0) * 1000)
            errors += not ok

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return latencies, errors, time.perf_counter() - t0


async def _health(http, base: str) -> dict:
    r = await http.get(base + "/health")
    return r.json()


async def _bench_setting(base: str, protocol: str, c: int, args, queries: list[str]) -> dict:
    """One (protocol, concurrency) setting against a ready server: warm-up, then ``--requests`` timed."""
    import httpx2
    from mcp import Client

    warm, timed = queries[:args.warmup], queries[args.warmup:] or queries
    async with contextlib.AsyncExitStack() as stack:
        admin = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
        if protocol == "rest":
            http = await stack.enter_async_context(httpx2.AsyncClient(
                timeout=120, limits=httpx2.Limits(max_connections=c, max_keepalive_connections=c)))

            async def call(i, q, http=http):
                r = await http.post(base + "/search", json={"queries": [q], "k": args.k})
                return r.status_code == 200
        else:
            sessions = [await stack.enter_async_context(Client(base + "/mcp", read_timeout_seconds=120))
                        for _ in range(c)]

            async def call(i, q, sessions=sessions):
                r = await sessions[i].call_tool("search_tools", {"query": q, "k": args.k})
                return not r.is_error
        if warm:
            await _drive(call, len(warm), c, warm)
        before = await _health(admin, base)
        lat, errors, wall = await _drive(call, args.requests, c, timed)
        after = await _health(admin, base)
    batches = after.get("batches", 0) - before.get("batches", 0)
    batched = after.get("batched_queries", 0) - before.get("batched_queries", 0)
    return {"protocol": protocol, "concurrency": c, "requests": args.requests,
            "p50_ms": round(float(np.percentile(lat, 50)), 2), "p99_ms": round(float(np.percentile(lat, 99)), 2),
            "requests_per_s": round(args.requests / wall, 1), "errors": errors,
            "mean_batch_queries": round(batched / batches, 2) if batches else None,
            "queries_repeat": args.warmup + args.requests > len(queries),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


async def _serve_and_bench(index: Path, method: str, args, queries: list[str], log: Path) -> tuple[list[dict], dict]:
    """Rows of every (protocol, concurrency) setting of one saved pipeline, and its server's readiness."""
    import httpx2

    settings = [(p, int(c)) for p in args.protocols.split(",") for c in args.concurrency.split(",")]
    fresh = METHODS.get(method, {}).get("fresh_server", False)
    groups = [[s] for s in settings] if fresh else [settings]
    rows, ready = [], {}
    for group in groups:
        server = _Server(index, log, args.workers, args.max_in_flight, shlex.split(args.server_args))
        try:
            async with httpx2.AsyncClient(timeout=10) as client:
                t0 = time.perf_counter()
                health = await server.ready(client)
                ready.setdefault("server_ready_s", round(time.perf_counter() - t0, 1))
                ready.update(n_tools=health["n_tools"], concurrent=health.get("concurrent"))
            for protocol, c in group:
                rows.append(await _bench_setting(server.base, protocol, c, args, queries))
                print(json.dumps({"method": method, **rows[-1]}), flush=True)
        finally:
            server.stop()
    return rows, ready


async def main_async(args) -> dict:
    given = {}
    for item in args.index or []:
        key, _, path = item.partition("=")
        given[key] = Path(path)
    methods = args.methods.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="serve-latency-"))
    keep = Path(args.index_dir) if args.index_dir else tmp
    results, skipped, builds, catalogs = [], [], {}, {}
    try:
        for name, load in _catalogs(args):
            t0 = time.perf_counter()
            catalog = load()
            queries = [q.text[:2000] for q in (catalog.split("test") or catalog.queries)]
            catalogs[name] = {"n_tools": len(catalog.tools), "n_queries": len(queries),
                              "load_s": round(time.perf_counter() - t0, 1)}
            print(json.dumps({"catalog": name, **catalogs[name]}), flush=True)
            for method in methods:
                index = given.get(f"{method}@{name}") or given.get(method)
                if index is not None:
                    info = {"spec": METHODS.get(method, {}).get("spec", method), "index": str(index)}
                else:
                    index, info = _build(method, catalog, keep / name / method, args.set, args.allow_fit)
                if index is None:
                    skipped.append({"catalog": name, "method": method, **info})
                    print(json.dumps(skipped[-1]), flush=True)
                    continue
                rows, ready = await _serve_and_bench(index, method, args, queries, tmp / f"{name}-{method}.log")
                builds[f"{name}/{method}"] = {**info, **ready}
                results += [{"catalog": name, "method": method, "n_tools": ready["n_tools"], **row} for row in rows]
            del catalog
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "note": args.note,
        "catalogs": catalogs,
        "settings": {"requests_per_setting": args.requests, "warmup": args.warmup, "k": args.k,
                     "server_workers": args.workers, "server_max_in_flight": args.max_in_flight,
                     "server_args": args.server_args, "set": args.set,
                     "methods": {m: METHODS.get(m, {"spec": m}) for m in methods},
                     "client": "asyncio in one process on the same machine (httpx2 for REST; the mcp SDK Client, "
                               "one session per concurrent client, for MCP)"},
        "builds": builds, "skipped": skipped, "results": results,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default=",".join(DATASETS), help="dataset names, loaded from the sources")
    p.add_argument("--catalog", action="append", help="a curated catalog directory instead (repeatable)")
    p.add_argument("--methods", default=",".join(METHODS), help=f"subset of {list(METHODS)} or any pipeline spec")
    p.add_argument("--index", action="append", metavar="METHOD[@CATALOG]=DIR", help="a saved pipeline to serve")
    p.add_argument("--index-dir", help="build pipelines into DIR/<catalog>/<method> and reuse those present (delete one to rebuild it)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="params overrides")
    p.add_argument("--allow-fit", action="store_true", help="train learning components whose artifact is absent")
    p.add_argument("--protocols", default="rest,mcp")
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--requests", type=int, default=150, help="timed requests per (method, protocol, concurrency)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--workers", type=int, default=4, help="the server's search threads")
    p.add_argument("--max-in-flight", type=int, default=256, help="the server's admission limit (above 32: no 503s)")
    p.add_argument("--server-args", default="", help="more `toolret serve` flags, e.g. '--no-batching'")
    p.add_argument("--note", default="")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "serve_latency.json"))
    args = p.parse_args()
    report = asyncio.run(main_async(args))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
