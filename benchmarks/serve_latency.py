"""Serving latency under load: a real `toolret serve` process on 127.0.0.1, REST and MCP, per pipeline.

Per method (bm25, dense; hooks: ``hybrid`` and ``rerank-10`` = dense + cross-encoder over its top 10, run
when such a pipeline exists: a registered name whose learned parts are present, or ``--index
METHOD=DIR`` of a saved pipeline; else skipped with a note) the pipeline is fitted, indexed and saved on
the catalogue, served by ``toolret serve`` (a child process), and driven by a bounded asyncio client
loop: ``--requests`` requests (one test query each, cycled, top ``--k``) at each concurrency (1, 8, 32)
and protocol (REST ``POST /search``; MCP ``search_tools`` over streamable HTTP through the SDK's client,
one session per concurrent client). Rows: ``method``, ``protocol``, ``n_tools``, ``concurrency``,
``p50_ms``, ``p99_ms``, ``requests_per_s``, ``errors`` (+ the 1-minute load average when the setting ran).

The client runs on the same machine (its CPU time competes with the server's: on 2 cores the numbers
are a lower bound for a separate client machine).

Usage::

    python benchmarks/serve_latency.py --dataset toolbench-g1-instruction --requests 150
    python benchmarks/serve_latency.py --catalog data/curated/toollens --methods bm25,dense,rerank-10 \\
        --index rerank-10=data/indexes/toollens/rerank-10/original
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
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
HOOKS = {"hybrid": "a BM25 + dense fusion pipeline (not registered yet)",
         "rerank-10": "dense + the ToolRerank cross-encoder over the top 10 (needs the trained artifact: "
                      "`dvc repro toolrerank_train`, then `toolret index --method rerank-10`)"}


def _catalog(args):
    from toolret.catalog.io import load_catalog

    if args.catalog:
        return load_catalog(args.catalog)
    from toolret.cli import _load_named
    from toolret.config import load_params

    return _load_named(args.dataset, load_params())


def _build(method: str, catalog, out: Path, allow_fit: bool) -> tuple[Path | None, str | None, float]:
    """Save ``method`` on ``catalog`` to ``out``: ``(dir, None, build s)`` or ``(None, why skipped, 0)``."""
    from toolret.catalog.model import CatalogError
    from toolret.config import load_params
    from toolret.pipeline import build_pipeline
    from toolret.registry import component, parse_spec
    from toolret.roles import Corpus

    try:
        spec = parse_spec(method)
    except (CatalogError, KeyError) as e:
        return None, f"no such pipeline ({HOOKS.get(method, e)})", 0.0
    learning = [c for c in spec.components if component(c).trains]
    if learning and not allow_fit:
        return None, (f"{learning} learn from data: pass --index {method}=DIR of a saved pipeline "
                      f"(or --allow-fit to train now). {HOOKS.get(method, '')}".strip()), 0.0
    t0 = time.perf_counter()
    pipeline = build_pipeline(spec, catalog, load_params())
    pipeline.fit(catalog)
    pipeline.index(Corpus.from_catalog(catalog))
    pipeline.save(out)
    return out, None, time.perf_counter() - t0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    def __init__(self, index: Path, log: Path, workers: int, max_in_flight: int) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolret.cli", "serve", "--index", str(index), "--port", str(self.port),
             "--workers", str(workers), "--max-in-flight", str(max_in_flight), "--timeout", "120"],
            stdout=self._log, stderr=subprocess.STDOUT)
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
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


async def _drive(call, n: int, concurrency: int, queries: list[str]) -> tuple[list[float], int, float]:
    """``n`` calls by ``concurrency`` workers (worker i uses ``call(i, query)``): latencies ms, errors, wall s."""
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


async def _bench_server(base: str, protocols: list[str], concurrencies: list[int], n: int, warmup: int,
                        queries: list[str], k: int) -> list[dict]:
    import httpx2
    from mcp import Client

    rows = []
    for protocol in protocols:
        for c in concurrencies:
            async with contextlib.AsyncExitStack() as stack:
                if protocol == "rest":
                    http = await stack.enter_async_context(httpx2.AsyncClient(
                        timeout=120, limits=httpx2.Limits(max_connections=c, max_keepalive_connections=c)))

                    async def call(i, q, http=http):
                        r = await http.post(base + "/search", json={"queries": [q], "k": k})
                        return r.status_code == 200
                else:
                    sessions = [await stack.enter_async_context(Client(base + "/mcp", read_timeout_seconds=120))
                                for _ in range(c)]

                    async def call(i, q, sessions=sessions):
                        r = await sessions[i].call_tool("search_tools", {"query": q, "k": k})
                        return not r.is_error
                await _drive(call, warmup, c, queries)
                lat, errors, wall = await _drive(call, n, c, queries)
            rows.append({"protocol": protocol, "concurrency": c, "requests": n,
                         "p50_ms": round(float(np.percentile(lat, 50)), 2),
                         "p99_ms": round(float(np.percentile(lat, 99)), 2),
                         "requests_per_s": round(n / wall, 1), "errors": errors,
                         "load_avg_1m": round(os.getloadavg()[0], 2)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


async def main_async(args) -> dict:
    import httpx2

    catalog = _catalog(args)
    queries = [q.text[: 2000] for q in (catalog.split("test") or catalog.queries)]
    given = dict(item.split("=", 1) for item in args.index or [])
    work = Path(tempfile.mkdtemp(prefix="serve-latency-"))
    results, skipped, builds = [], [], {}
    try:
        for method in args.methods.split(","):
            if method in given:
                index, why, build_s = Path(given[method]), None, None
            else:
                index, why, build_s = _build(method, catalog, work / method, args.allow_fit)
            if index is None:
                skipped.append({"method": method, "note": why})
                print(json.dumps(skipped[-1]), flush=True)
                continue
            server = _Server(index, work / f"{method}.log", args.workers, args.max_in_flight)
            try:
                async with httpx2.AsyncClient(timeout=10) as client:
                    t0 = time.perf_counter()
                    health = await server.ready(client)
                    ready_s = time.perf_counter() - t0
                builds[method] = {"index_build_s": None if build_s is None else round(build_s, 1),
                                  "server_ready_s": round(ready_s, 1), "index": str(index) if method in given else None}
                rows = await _bench_server(server.base, args.protocols.split(","),
                                           [int(c) for c in args.concurrency.split(",")], args.requests,
                                           args.warmup, queries, args.k)
            finally:
                server.stop()
            for row in rows:
                results.append({"method": method, "n_tools": health["n_tools"], **row})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "note": args.note,
        "catalog": catalog.name, "n_tools": len(catalog.tools), "n_queries": len(queries),
        "settings": {"requests_per_setting": args.requests, "warmup": args.warmup, "k": args.k,
                     "server_workers": args.workers, "server_max_in_flight": args.max_in_flight,
                     "client": "asyncio in one process on the same machine (httpx2 for REST; the mcp SDK Client, "
                               "one session per concurrent client, for MCP)"},
        "builds": builds, "skipped": skipped, "results": results,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--catalog", help="curated catalog directory")
    src.add_argument("--dataset", help="dataset name (loaded from the sources), e.g. toolbench-g1-instruction")
    p.add_argument("--methods", default="bm25,dense,hybrid,rerank-10")
    p.add_argument("--index", action="append", metavar="METHOD=DIR", help="a saved pipeline to serve for METHOD")
    p.add_argument("--allow-fit", action="store_true", help="train learning components that are absent")
    p.add_argument("--protocols", default="rest,mcp")
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--requests", type=int, default=150, help="timed requests per (method, protocol, concurrency)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--workers", type=int, default=4, help="the server's search threads")
    p.add_argument("--max-in-flight", type=int, default=256, help="the server's admission limit (above 32: no 503s)")
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
