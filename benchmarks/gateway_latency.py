"""The gateway's cost over serving one index: `toolret gateway` vs `toolret serve`, real processes on 127.0.0.1.

An MCP server (``benchmarks/mcp_catalog_server.py``, streamable HTTP) offers every tool of a catalog
(default ``toolbench-env-g1-instruction``: the 46,879 APIs of the ToolBench tool environment). Three
processes are timed against it:

- ``toolret serve`` over the same tools: imported from that server by ``toolret import-mcp`` (the gateway's
  conversion of MCP tools into documents), indexed by ``toolret index --method <pipeline>``;
- ``toolret gateway --http bench=<server> --pipeline <pipeline>`` (receipts on, as a user runs it);
- the server itself, for ``call_tool``.

Search: ``search_tools`` over MCP (the SDK's client, one session per concurrent client) at ``--concurrency``,
``--requests`` test queries after ``--warmup``, serve and gateway alternated over ``--rounds`` rounds (so a
slow minute of the box falls on both); p50 / p99 per target and the gateway's p99 over serve's.
Forwarding: ``--calls`` sequential calls of one tool, directly to the server and through the gateway's
``call_tool``, alternated by round; the overhead is the difference of the medians.

    python benchmarks/gateway_latency.py                         # writes benchmarks/results/gateway_latency.json
    python benchmarks/gateway_latency.py --dataset mtrb-metatool --requests 40 --calls 40 --out /tmp/gw.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_latency import _drive, _free_port, stop_process  # noqa: E402  (the same client loop as the serving benchmark)

SERVER = Path(__file__).resolve().parent / "mcp_catalog_server.py"


def mcp_name(tool_id: str, taken: set[str]) -> str:
    """A valid, unique MCP tool name for a catalog id (letters, digits, ``_ - .``; no ``__``, at most 64)."""
    base = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_.-]", "_", tool_id)).strip("_")[:60] or "tool"
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base[:56]}-{i}"
    taken.add(name)
    return name


def write_tools(catalog, path: Path) -> list[str]:
    """The catalog's tools as the server's JSONL (the record an agent sees: description, input schema)."""
    from toolret.catalog.tool_records import tool_record

    taken: set[str] = set()
    names = []
    with path.open("w", encoding="utf-8") as f:
        for tool in catalog.tools:
            rec = tool_record(tool)
            names.append(mcp_name(tool.id, taken))
            schema = rec.get("input_schema") or {"type": "object", "properties": {}}
            f.write(json.dumps({"name": names[-1], "description": rec["description"] or tool.text,
                                "inputSchema": schema}, ensure_ascii=False) + "\n")
    return names


class Process:
    """A child process listening on 127.0.0.1:port, its output in a log file."""

    def __init__(self, args: list[str], port: int, log: Path) -> None:
        self.port, self.log = port, log
        self._out = open(log, "ab")
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=subprocess.STDOUT, cwd=ROOT)
        self.mcp = f"http://127.0.0.1:{port}/mcp"

    def wait_listening(self, timeout: float = 1800) -> float:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.proc.args[:4]} exited:\n{self.log.read_text(errors='replace')[-3000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return time.perf_counter() - t0
            time.sleep(0.2)
        raise RuntimeError(f"{self.proc.args[:4]} not listening after {timeout} s")

    def stop(self) -> None:
        stop_process(self.proc, timeout=30)
        self._out.close()


def _toolret(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolret.cli", *args]


def _stats(latencies: list[float]) -> dict:
    return {"n": len(latencies), "p50_ms": round(float(np.percentile(latencies, 50)), 2),
            "p99_ms": round(float(np.percentile(latencies, 99)), 2)}


async def search_round(url: str, concurrency: int, queries: list[str], warmup: int, k: int) -> tuple[list[float], int]:
    from mcp import Client

    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(Client(url, read_timeout_seconds=120)) for _ in range(concurrency)]

        async def call(i, q):
            r = await sessions[i].call_tool("search_tools", {"query": q, "k": k})
            return not r.is_error

        await _drive(call, warmup, concurrency, queries[:warmup] or queries)
        latencies, errors, _ = await _drive(call, len(queries) - warmup, concurrency, queries[warmup:] or queries)
    return latencies, errors


async def call_round(url: str, tool: str, args: dict, n: int, via_gateway: bool) -> tuple[list[float], int]:
    from mcp import Client

    async with Client(url, read_timeout_seconds=120) as session:
        async def call(i, _):
            if via_gateway:
                r = await session.call_tool("call_tool", {"name": f"bench__{tool}", "arguments": args})
            else:
                r = await session.call_tool(tool, args)
            return not r.is_error and tool in r.content[0].text

        await _drive(call, 5, 1, ["warm"])
        latencies, errors, _ = await _drive(call, n, 1, ["x"])
    return latencies, errors


async def main_async(args) -> dict:
    from toolret import load_catalog

    tmp = Path(tempfile.mkdtemp(prefix="gateway-latency-"))
    procs: list[Process] = []
    try:
        t0 = time.perf_counter()
        catalog = load_catalog(args.dataset)
        queries = [q.text[:2000] for q in (catalog.split("test") or catalog.queries)]
        queries = (queries * (1 + (args.warmup + args.requests) // max(1, len(queries))))[:args.warmup + args.requests]
        names = write_tools(catalog, tmp / "tools.jsonl")
        info = {"dataset": args.dataset, "n_tools": len(catalog.tools), "load_s": round(time.perf_counter() - t0, 1)}
        del catalog
        print(json.dumps(info), flush=True)

        upstream = Process([sys.executable, str(SERVER), str(tmp / "tools.jsonl"), "--port", str(port := _free_port())],
                           port, tmp / "upstream.log")
        procs.append(upstream)
        upstream.wait_listening()
        t0 = time.perf_counter()
        subprocess.run(_toolret("import-mcp", "--url", upstream.mcp, "--out", str(tmp / "catalog"), "--name", "bench",
                                "--timeout", "600"), cwd=ROOT, check=True, capture_output=True)
        subprocess.run(_toolret("index", "--catalog", str(tmp / "catalog"), "--method", args.pipeline,
                                "--out", str(tmp / "index")), cwd=ROOT, check=True, capture_output=True)
        info["serve_index_build_s"] = round(time.perf_counter() - t0, 1)
        serve = Process(_toolret("serve", "--index", str(tmp / "index" / "original"), "--port", str(port := _free_port())),
                        port, tmp / "serve.log")
        procs.append(serve)
        info["serve_ready_s"] = round(serve.wait_listening(), 1)
        gateway = Process(_toolret("gateway", "--http", f"bench={upstream.mcp}", "--pipeline", args.pipeline,
                                   "--transport", "http", "--port", str(port := _free_port()),
                                   "--receipts", str(tmp / "receipts.jsonl")), port, tmp / "gateway.log")
        procs.append(gateway)
        info["gateway_ready_s"] = round(gateway.wait_listening(), 1)
        print(json.dumps(info), flush=True)

        search = {"serve": ([], 0), "gateway": ([], 0)}
        calls = {"direct": ([], 0), "gateway": ([], 0)}
        tool = names[len(names) // 2]
        call_args = {"query": "benchmark", "limit": 3}
        for r in range(args.rounds):
            for target, url in (("serve", serve.mcp), ("gateway", gateway.mcp))[:: 1 if r % 2 == 0 else -1]:
                lat, err = await search_round(url, args.concurrency, queries, args.warmup, args.k)
                search[target] = (search[target][0] + lat, search[target][1] + err)
            for target, url in (("direct", upstream.mcp), ("gateway", gateway.mcp))[:: 1 if r % 2 == 0 else -1]:
                lat, err = await call_round(url, tool, call_args, args.calls, target == "gateway")
                calls[target] = (calls[target][0] + lat, calls[target][1] + err)
            print(json.dumps({"round": r + 1, "search_p99_ms": {t: _stats(v[0])["p99_ms"] for t, v in search.items()},
                              "call_p50_ms": {t: _stats(v[0])["p50_ms"] for t, v in calls.items()}}), flush=True)
        receipt_rows = [json.loads(line) for line in (tmp / "receipts.jsonl").read_text(encoding="utf-8").split("\n") if line]
        receipts = len(receipt_rows)
        inside = [r["latency_ms"] for r in receipt_rows if r.get("event") == "call" and r.get("caller") != "warm"]
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    search_rows = {t: {**_stats(v[0]), "errors": v[1]} for t, v in search.items()}
    call_rows = {t: {**_stats(v[0]), "errors": v[1]} for t, v in calls.items()}
    return {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "catalog": info,
        "settings": {"pipeline": args.pipeline, "concurrency": args.concurrency, "requests_per_round": args.requests,
                     "warmup": args.warmup, "k": args.k, "rounds": args.rounds, "calls_per_round": args.calls,
                     "client": "the mcp SDK Client in one asyncio process on the same machine",
                     "receipts": "on (the gateway's default)"},
        "search": search_rows,
        "search_p99_ratio_gateway_over_serve": round(search_rows["gateway"]["p99_ms"] / search_rows["serve"]["p99_ms"], 3),
        "search_p50_ratio_gateway_over_serve": round(search_rows["gateway"]["p50_ms"] / search_rows["serve"]["p50_ms"], 3),
        "call_tool": call_rows,
        "call_tool_overhead_p50_ms": round(call_rows["gateway"]["p50_ms"] - call_rows["direct"]["p50_ms"], 2),
        "receipts_written": receipts,
        # the gateway's own time per forwarded call (its receipts' latency_ms: resolve, the upstream call, the
        # receipt), the rest of the overhead being the extra MCP hop (client -> gateway)
        "call_tool_inside_gateway_p50_ms": round(float(np.percentile(inside, 50)), 2) if inside else None,
        "command": "python benchmarks/gateway_latency.py " + " ".join(sys.argv[1:]),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="toolbench-env-g1-instruction", help="a dataset name or catalog folder")
    p.add_argument("--pipeline", default="bm25", help="the pipeline spec both serve and the gateway index with")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--requests", type=int, default=150, help="timed search requests per target and round")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--calls", type=int, default=100, help="timed call_tool calls per target and round")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gateway_latency.json"))
    args = p.parse_args()
    report = asyncio.run(main_async(args))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("search", "search_p99_ratio_gateway_over_serve", "call_tool",
                                             "call_tool_overhead_p50_ms")}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
