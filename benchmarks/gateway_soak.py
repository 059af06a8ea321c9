"""Soak: `toolret gateway` over three backends under 20 concurrent agents for 10 minutes, one backend killed
every minute (issue 78). Real processes on 127.0.0.1, nothing simulated.

Setup: a catalogue (default ``mtrb-metatool``: 199 tools, 90 queries) is cut into ``--servers`` disjoint
slices (tool i to backend i mod n), each offered by its own MCP server (``benchmarks/mcp_catalog_server.py``,
stdio: the gateway launches it, so it is the gateway's child and the gateway relaunches it when it dies).
``toolret gateway --config <those servers> --pipeline bm25 --transport http`` (receipts on, as a user runs it;
the config's timings are the product's defaults) serves them on streamable HTTP.

Load: ``--clients`` sessions of the official MCP SDK client (one asyncio process), each looping with no
pause: ``search_tools`` with a catalogue query (seeded order), then the gateway's ``call_tool`` on one of the
returned tools (seeded choice); the backend echoes the call, which is checked (``tool`` is the one called).
Phases, back to back: ``--warmup-s`` (not recorded), a baseline of ``--baseline-minutes`` without kills,
then the soak of ``--minutes`` during which one backend (round robin) gets SIGKILL at ``--kill-every`` / 2
and every ``--kill-every`` seconds after (found among the gateway's child processes by its tools file; the
benchmark never restarts it: the gateway does). A monitor reads the gateway's ``toolret://gateway`` resource
every ``--poll-s``: each server's state, connection count and the gateway's own time of its last change.

Outcomes: a search is ok when it answers (``ok (no hits)`` when no tool matches the query); a call is ok
when the backend's echo names the tool. A call whose server was killed during it, or before it and not yet
up again (the gateway's "up" after the kill), is a call to a down server: it must be ok or a tool error
naming that server (``server '<name>'``). Every other outcome is a failure, by kind (``exception: <type>``
or ``tool error: <message start>``), in particular any failed call to a server up from its start to its end.

Record (``--out``, written atomically): settings, machine, per phase the requests (search / call), outcomes
by kind, search and call p50 / p99 ms, the gateway's RSS (and with its children) at the phase's start and end;
the soak's RSS growth and search p99 over the baseline's; every kill (seconds into the soak, server, when the
gateway noticed it, relaunched the process and had it up again); the checks of the issue:

- no failed call to a server that was up, no failed search;
- every failed call to a down server a tool error naming it;
- RSS growth of the gateway over the soak < ``--max-rss-growth`` (default 0.10);
- search p99 under the kills <= ``--max-p99-ratio`` (default 2) x the baseline's;
- every killed backend up again (relaunched by the gateway) and ``--servers`` backends running at the end.

Exit 1 when a check fails (the record is still written). A status line every ``--status-every`` s on stderr.

    # 20 clients, 2 + 10 min (~13 min in all): writes benchmarks/results/gateway_soak.json
    python benchmarks/gateway_soak.py
    # a shorter check
    python benchmarks/gateway_soak.py --baseline-minutes 0.5 --minutes 2 --kill-every 30 --out /tmp/soak.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_latency import SERVER, Process, _stats, _toolret, write_tools  # noqa: E402
from serve_latency import _free_port  # noqa: E402

PHASES = ("baseline", "soak")


# ---------------------------------------------------------------------------------------------- processes
def rss_of(pid: int) -> dict:
    """The gateway's RSS and its whole tree's (backends included), MB; its backend processes (zombies apart)."""
    import psutil

    gateway = psutil.Process(pid)
    own = gateway.memory_info().rss
    total, zombies = own, 0
    for child in gateway.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.status() == psutil.STATUS_ZOMBIE:
                zombies += 1
            else:
                total += child.memory_info().rss
    return {"gateway_mb": round(own / 2**20, 1), "with_children_mb": round(total / 2**20, 1), "zombies": zombies}


def backend_pids(gateway_pid: int, files: dict[str, Path]) -> dict[str, list[int]]:
    """Server name -> pids of the live processes among the gateway's descendants running its tools file."""
    import psutil

    found: dict[str, list[int]] = {name: [] for name in files}
    for child in psutil.Process(gateway_pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            cmd = child.cmdline()
            for name, path in files.items():
                if str(path) in cmd:
                    found[name].append(child.pid)
    return found


# ---------------------------------------------------------------------------------------------- events
@dataclass
class Kill:
    server: str
    pid: int
    at: float                       # time.time() of the SIGKILL
    connects_before: int
    noticed: float | None = None    # the gateway's time of the server going down (its status "since")
    up_again: float | None = None   # the gateway's time of it being up again (connects > connects_before)
    relaunched: float | None = None  # the new backend process's create time
    new_pid: int | None = None


@dataclass
class Monitor:
    """The gateway's view of its servers, read every ``poll_s`` from ``toolret://gateway``."""

    states: dict[str, dict] = field(default_factory=dict)
    unexpected_downs: list[dict] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    reads: int = 0


class Soak:
    def __init__(self, args, url: str, gateway_pid: int, files: dict[str, Path], queries: list[str]) -> None:
        self.args, self.url, self.gateway_pid, self.files, self.queries = args, url, gateway_pid, files, queries
        self.phase: str | None = None   # None: warm-up (not recorded)
        self.phase_start: dict[str, float] = {}
        self.searches: dict[str, list[tuple]] = {p: [] for p in PHASES}  # (t0, t1, latency ms, kind, n_down)
        self.calls: dict[str, list[tuple]] = {p: [] for p in PHASES}     # (server, t0, t1, latency ms, kind, text)
        self.kills: list[Kill] = []
        self.monitor = Monitor()
        self.rss: dict[str, dict] = {p: {} for p in PHASES}
        self.stop = asyncio.Event()      # the clients stop
        self.finished = asyncio.Event()  # the monitor, the killer and the status line stop
        self.probes: list[asyncio.Task] = []  # each kill's relaunch probe
        self.protocol: str | None = None

    # ------------------------------------------------------------------ one client
    async def client(self, i: int) -> None:
        from mcp import Client

        rng = random.Random(self.args.seed * 1000 + i)
        order = rng.sample(range(len(self.queries)), len(self.queries))
        async with Client(self.url, read_timeout_seconds=self.args.request_timeout) as session:
            self.protocol = session.protocol_version
            j = 0
            while not self.stop.is_set():
                query = self.queries[order[j % len(order)]]
                j += 1
                phase = self.phase
                kind, hits, t0, t1, ms = await self._timed(session.call_tool, "search_tools",
                                                           {"query": query, "k": self.args.k})
                n_down = 0
                if kind == "tool error":
                    kind += ": " + " ".join(getattr(c, "text", "") for c in hits.content)[:60]
                elif kind == "ok":
                    sc = hits.structured_content or {}
                    n_down = len(sc.get("servers_down") or [])
                    hits = sc.get("hits") or []
                    if not hits:
                        kind = "ok (no hits)"  # a query sharing no term with any tool (bm25)
                if phase is not None:
                    self.searches[phase].append((t0, t1, ms, kind, n_down))
                if kind != "ok" or self.stop.is_set():
                    continue
                tool_id = rng.choice(hits)["tool_id"]
                server, _, tool = tool_id.partition("__")
                phase = self.phase
                kind, result, t0, t1, ms = await self._timed(session.call_tool, "call_tool", {
                    "name": tool_id, "arguments": {"query": query[:100]}})
                text = ""
                if result is not None:
                    text = " ".join(getattr(c, "text", "") for c in result.content)
                    if kind == "ok":
                        try:
                            echoed = json.loads(text).get("tool")
                        except (ValueError, AttributeError):
                            echoed = None
                        if echoed != tool:
                            kind = "wrong result"
                if phase is not None:
                    self.calls[phase].append((server, t0, t1, ms, kind, text[:300]))

    @staticmethod
    async def _timed(fn, *a) -> tuple[str, object, float, float, float]:
        """``(kind, result, t0, t1, latency ms)``: kind ``ok``, ``tool error`` (an is_error result) or
        ``exception: <type>: <start of message>``."""
        t0, p0 = time.time(), time.perf_counter()
        try:
            result = await fn(*a)
            kind = "tool error" if result.is_error else "ok"
        except Exception as e:  # noqa: BLE001 - every outcome is classified
            result, kind = None, f"exception: {type(e).__name__}: {str(e)[:60]}"
        return kind, result, t0, time.time(), (time.perf_counter() - p0) * 1000

    # ------------------------------------------------------------------ the monitor
    async def watch(self) -> None:
        from mcp import Client

        async with Client(self.url, read_timeout_seconds=self.args.request_timeout) as session:
            while not self.finished.is_set():
                try:
                    res = await session.read_resource("toolret://gateway", cache_mode="bypass")
                    servers = json.loads(res.contents[0].text)["servers"]
                except Exception as e:  # noqa: BLE001 - counted; the record says how often
                    key = f"{type(e).__name__}: {str(e)[:60]}"
                    self.monitor.errors[key] = self.monitor.errors.get(key, 0) + 1
                    servers = {}
                self.monitor.reads += 1
                for name, st in servers.items():
                    self._observe(name, st)
                await asyncio.sleep(self.args.poll_s)

    def _observe(self, name: str, st: dict) -> None:
        before = self.monitor.states.get(name)
        self.monitor.states[name] = st
        open_kills = [k for k in self.kills if k.server == name and k.up_again is None]
        for k in open_kills:
            if st["state"] != "up" and k.noticed is None:
                k.noticed = max(st["since"], k.at)
            if st["state"] == "up" and st["connects"] > k.connects_before:
                k.up_again = st["since"]
                if k.noticed is None:  # down and up again between two reads
                    k.noticed = k.at
        if (before is not None and before["state"] == "up" and st["state"] != "up" and not open_kills
                and self.phase is not None):
            self.monitor.unexpected_downs.append({"server": name, "phase": self.phase, "error": st.get("error"),
                                                  "at_s": round(st["since"] - self.phase_start[self.phase], 2)})

    # ------------------------------------------------------------------ kills
    async def killer(self, start: float, end: float) -> None:
        import psutil

        names = sorted(self.files)
        n = 0
        while True:
            at = start + (n + 0.5) * self.args.kill_every
            if at >= end:
                return
            await asyncio.sleep(max(0.0, at - time.time()))
            if self.finished.is_set():
                return
            server = names[n % len(names)]
            n += 1
            pids = backend_pids(self.gateway_pid, self.files)[server]
            state = self.monitor.states.get(server, {})
            if len(pids) != 1 or state.get("state") != "up":
                print(f"gateway_soak: kill {n}: {server} not running alone and up (pids {pids}, state "
                      f"{state.get('state')}); skipped", file=sys.stderr, flush=True)
                self.kills.append(Kill(server, -1, time.time(), -1, up_again=-1.0))
                continue
            kill = Kill(server, pids[0], time.time(), state["connects"])
            self.kills.append(kill)
            os.kill(pids[0], signal.SIGKILL)
            self.probes.append(asyncio.create_task(self._relaunch_seen(kill, psutil)))

    async def _relaunch_seen(self, kill: Kill, psutil) -> None:
        """The new backend process of a killed server: its pid and create time (seen within 120 s)."""
        deadline = time.time() + 120
        while time.time() < deadline:
            pids = [p for p in backend_pids(self.gateway_pid, self.files)[kill.server] if p != kill.pid]
            if pids:
                with contextlib.suppress(psutil.Error):
                    kill.new_pid, kill.relaunched = pids[0], psutil.Process(pids[0]).create_time()
                    return
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ status line
    async def status(self, started: float) -> None:
        while not self.finished.is_set():
            await asyncio.sleep(self.args.status_every)
            phase = self.phase or "warm-up"
            s, c = self.searches.get(phase, []), self.calls.get(phase, [])
            lat = [r[2] for r in s[-2000:]]
            p99 = f"{np.percentile(lat, 99):.0f}" if lat else "-"
            bad_s = sum(not r[3].startswith("ok") for r in s)
            bad_c = sum(r[4] != "ok" for r in c)
            rss = rss_of(self.gateway_pid)
            print(f"gateway_soak: {time.time() - started:6.0f} s  {phase:8s} searches {len(s)} (not ok {bad_s}) "
                  f"calls {len(c)} (not ok {bad_c}) kills {len(self.kills)}  search p99 {p99} ms (last 2000)  "
                  f"gateway RSS {rss['gateway_mb']} MB", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- analysis
def down_windows(kills: list[Kill], server: str) -> list[tuple[float, float]]:
    """``[kill, up again]`` spans of a server (open-ended where it never came back)."""
    return [(k.at, k.up_again if k.up_again is not None else float("inf"))
            for k in kills if k.server == server and k.pid > 0]


DOWN_NAMED = "down server: tool error naming it"


def classify_calls(calls: list[tuple], kills: list[Kill]) -> tuple[dict, dict[str, list[dict]]]:
    """Outcomes by kind: ``ok``, ``ok (server down during the call)``, ``down server: tool error naming it``
    (expected), else failures ``up server: <kind>`` / ``down server: <kind>``; up to 3 examples of each
    kind but ok."""
    outcomes: dict[str, int] = {}
    examples: dict[str, list[dict]] = {}
    windows = {server: down_windows(kills, server) for server in {c[0] for c in calls}}
    for server, t0, t1, _, kind, text in calls:
        down = any(a <= t1 and t0 <= b for a, b in windows[server])
        if kind == "ok":
            key = "ok" if not down else "ok (server down during the call)"
        elif down and kind == "tool error" and f"server {server!r}" in text:
            key = DOWN_NAMED
        else:
            detail = f"tool error: {text[:60]}" if kind == "tool error" else kind
            key = f"{'down' if down else 'up'} server: {detail}"
        if not key.startswith("ok") and len(examples.setdefault(key, [])) < 3:
            examples[key].append({"server": server, "text": text[:300]})
        outcomes[key] = outcomes.get(key, 0) + 1
    return dict(sorted(outcomes.items())), dict(sorted(examples.items()))


def phase_record(soak: Soak, phase: str) -> dict:
    searches, calls = soak.searches[phase], soak.calls[phase]
    search_kinds: dict[str, int] = {}
    for r in searches:
        search_kinds[r[3]] = search_kinds.get(r[3], 0) + 1
    call_kinds, examples = classify_calls(calls, soak.kills)
    ok_calls = [r[3] for r in calls if r[4] == "ok"]
    duration = soak.rss[phase]["end_t"] - soak.phase_start[phase]
    rss = {k: v for k, v in soak.rss[phase].items() if k != "end_t"}
    return {
        "seconds": round(duration, 1),
        "requests": {"search": len(searches), "call": len(calls)},
        "requests_per_s": round((len(searches) + len(calls)) / duration, 1) if duration > 0 else None,
        "outcomes": {"search": dict(sorted(search_kinds.items())), "call": call_kinds},
        "down_error_examples": examples.pop(DOWN_NAMED, []),
        "failure_examples": examples,
        "searches_with_servers_down": sum(r[4] > 0 for r in searches),
        "search_latency": _stats([r[2] for r in searches]) if searches else None,
        "call_latency_ok": _stats(ok_calls) if ok_calls else None,
        "rss": rss,
    }


def kill_record(kill: Kill, soak_start: float) -> dict:
    if kill.pid < 0:
        return {"at_s": round(kill.at - soak_start, 1), "server": kill.server, "skipped": True}

    def after(t):
        return round(t - kill.at, 2) if t is not None else None

    return {"at_s": round(kill.at - soak_start, 1), "server": kill.server,
            "noticed_after_s": after(kill.noticed), "relaunched_after_s": after(kill.relaunched),
            "up_again_after_s": after(kill.up_again),
            "withheld_s": round(kill.up_again - kill.noticed, 2) if kill.up_again and kill.noticed else None}


# ---------------------------------------------------------------------------------------------- main
async def run(args, tmp: Path) -> dict:
    from toolret import load_catalog

    catalog = load_catalog(args.dataset)
    queries = [q.text[:2000] for q in catalog.queries]
    names = [f"b{i}" for i in range(args.servers)]
    files = {}
    for i, name in enumerate(names):
        files[name] = tmp / f"{name}-tools.jsonl"
        write_tools(SimpleNamespace(tools=catalog.tools[i::args.servers]), files[name])
    sizes = {name: len(catalog.tools[i::args.servers]) for i, name in enumerate(names)}
    config = tmp / "gateway.json"
    config.write_text(json.dumps({"pipeline": args.pipeline, "servers": [
        {"name": name, "command": [sys.executable, str(SERVER), str(files[name])]} for name in names]}),
        encoding="utf-8")
    port = _free_port()
    gateway = Process(_toolret("gateway", "--config", str(config), "--transport", "http", "--port", str(port),
                               "--receipts", str(tmp / "receipts.jsonl")), port, tmp / "gateway.log")
    info = {"dataset": args.dataset, "n_tools": len(catalog.tools), "n_queries": len(queries),
            "tools_per_server": sizes}
    try:
        info["gateway_ready_s"] = round(gateway.wait_listening(timeout=600), 1)
        soak = Soak(args, gateway.mcp, gateway.proc.pid, files, queries)
        started = time.time()
        tasks = [asyncio.create_task(soak.watch()), asyncio.create_task(soak.status(started))]
        clients = [asyncio.create_task(soak.client(i)) for i in range(args.clients)]
        tasks += clients
        await asyncio.sleep(args.warmup_s)
        for phase, seconds in (("baseline", args.baseline_minutes * 60), ("soak", args.minutes * 60)):
            for t in clients:
                if t.done() and t.exception() is not None:
                    raise RuntimeError(f"a client ended: {t.exception()!r}")
            start = time.time()
            soak.rss[phase]["start"] = rss_of(gateway.proc.pid)
            soak.phase, soak.phase_start[phase] = phase, start
            print(f"gateway_soak: {phase}: {seconds:.0f} s, {args.clients} clients", file=sys.stderr, flush=True)
            if phase == "soak":
                tasks.append(asyncio.create_task(soak.killer(start, start + seconds)))
            await asyncio.sleep(max(0.0, start + seconds - time.time()))
            if gateway.proc.poll() is not None:
                raise RuntimeError(f"the gateway exited ({gateway.proc.returncode}) during the {phase}:\n"
                                   + gateway.log.read_text(errors="replace")[-3000:])
            soak.rss[phase]["end"] = rss_of(gateway.proc.pid)
            soak.rss[phase]["end_t"] = time.time()
        soak.phase = None
        soak.stop.set()
        await asyncio.wait(clients, timeout=args.request_timeout + 10)
        client_errors = [f"{type(t.exception()).__name__}: {str(t.exception())[:200]}" if t.done() and
                         t.exception() is not None else "did not stop" for t in clients
                         if not t.done() or t.exception() is not None]
        # every killed backend back up (the monitor keeps reading for a bounded settle time)
        deadline = time.time() + args.settle_s
        while time.time() < deadline and any(k.up_again is None for k in soak.kills):
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # the relaunch probes
        backends = {name: len(pids) for name, pids in backend_pids(gateway.proc.pid, files).items()}
        zombies = rss_of(gateway.proc.pid)["zombies"]
        soak.finished.set()
        for t in (*tasks, *soak.probes):
            t.cancel()
        await asyncio.gather(*tasks, *soak.probes, return_exceptions=True)
    finally:
        gateway.stop()
    tracebacks = gateway.log.read_text(errors="replace").count("Traceback")
    record = {p: phase_record(soak, p) for p in PHASES}
    kills = [kill_record(k, soak.phase_start["soak"]) for k in soak.kills]
    base_p99 = record["baseline"]["search_latency"]["p99_ms"] if record["baseline"]["search_latency"] else None
    soak_p99 = record["soak"]["search_latency"]["p99_ms"] if record["soak"]["search_latency"] else None
    ratio = round(soak_p99 / base_p99, 3) if base_p99 and soak_p99 else None
    rss0, rss1 = record["soak"]["rss"]["start"], record["soak"]["rss"]["end"]
    growth = round((rss1["gateway_mb"] - rss0["gateway_mb"]) / rss0["gateway_mb"], 4)
    growth_tree = round((rss1["with_children_mb"] - rss0["with_children_mb"]) / rss0["with_children_mb"], 4)

    def count(prefix: str) -> int:  # calls of both phases whose outcome starts with prefix
        return sum(n for p in PHASES for k, n in record[p]["outcomes"]["call"].items() if k.startswith(prefix))

    failed_searches = sum(n for p in PHASES for k, n in record[p]["outcomes"]["search"].items()
                          if not k.startswith("ok"))
    done = [k for k in soak.kills if k.pid > 0]
    checks = {
        "no_failed_call_to_an_up_server": count("up server:") == 0,
        "no_failed_search": failed_searches == 0,
        "every_client_ran_to_the_end": not client_errors,
        "every_failed_call_to_a_down_server_names_it": count("down server:") == count(DOWN_NAMED),
        "kills_done": len(done) > 0 and len(done) == len(soak.kills),
        "every_killed_backend_up_again": all(k.up_again is not None for k in done),
        "all_backends_running_at_end": all(n == 1 for n in backends.values()) and zombies == 0,
        "rss_growth_below_limit": growth < args.max_rss_growth,
        "search_p99_ratio_within_limit": ratio is not None and ratio <= args.max_p99_ratio,
    }
    argv, skip = [], False  # the command without --out (no path in the record)
    for a in sys.argv[1:]:
        if not skip and a != "--out" and not a.startswith("--out="):
            argv.append(a)
        skip = a == "--out"
    return {
        "benchmark": "gateway soak (issue 78)",
        "command": " ".join(["python benchmarks/gateway_soak.py", *argv]),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "catalog": info,
        "settings": {"clients": args.clients, "servers": args.servers, "pipeline": args.pipeline, "k": args.k,
                     "warmup_s": args.warmup_s, "baseline_minutes": args.baseline_minutes,
                     "minutes": args.minutes, "kill_every_s": args.kill_every, "poll_s": args.poll_s,
                     "seed": args.seed, "max_rss_growth": args.max_rss_growth,
                     "max_p99_ratio": args.max_p99_ratio, "client": "the mcp SDK Client (streamable HTTP), "
                     "one asyncio process on the same machine, no pause between requests",
                     "protocol": soak.protocol, "backends": "benchmarks/mcp_catalog_server.py over stdio, "
                     "launched and relaunched by the gateway", "receipts": "on (the gateway's default)",
                     "gateway_timings": "the product's defaults (toolret.gateway.config.GatewayConfig)"},
        **{p: record[p] for p in PHASES},
        "kills": kills,
        "client_errors": client_errors,
        "unexpected_downs": soak.monitor.unexpected_downs,
        "monitor": {"reads": soak.monitor.reads, "errors": soak.monitor.errors},
        "backends_running_at_end": backends,
        "zombie_children_at_end": zombies,
        "gateway_log_tracebacks": tracebacks,
        "rss_growth_soak": growth,
        "rss_growth_soak_with_children": growth_tree,
        "search_p99_ratio_soak_over_baseline": ratio,
        "checks": checks,
        "passed": all(checks.values()),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="mtrb-metatool", help="a dataset name or catalog folder")
    p.add_argument("--servers", type=int, default=3, help="backends, each a disjoint slice of the tools")
    p.add_argument("--clients", type=int, default=20, help="concurrent MCP sessions")
    p.add_argument("--baseline-minutes", type=float, default=2.0)
    p.add_argument("--minutes", type=float, default=10.0, help="the soak phase (kills)")
    p.add_argument("--kill-every", type=float, default=60.0, help="seconds between kills (first at half that)")
    p.add_argument("--warmup-s", type=float, default=10.0, help="load before the baseline, not recorded")
    p.add_argument("--pipeline", default="bm25")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--poll-s", type=float, default=0.25, help="how often the monitor reads toolret://gateway")
    p.add_argument("--status-every", type=float, default=60.0, help="seconds between status lines (stderr)")
    p.add_argument("--request-timeout", type=float, default=60.0, help="the clients' read timeout, s")
    p.add_argument("--settle-s", type=float, default=60.0, help="after the soak: wait for killed backends, at most")
    p.add_argument("--max-rss-growth", type=float, default=0.10, help="the check's limit (a fraction)")
    p.add_argument("--max-p99-ratio", type=float, default=2.0, help="the check's limit on search p99 soak/baseline")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gateway_soak.json"))
    args = p.parse_args()
    if args.servers < 1 or args.clients < 1 or args.kill_every <= 0 or args.minutes <= 0 or args.baseline_minutes <= 0:
        p.error("--servers, --clients, --kill-every, --minutes and --baseline-minutes must be positive")
    from toolret.atomic import write_json

    with tempfile.TemporaryDirectory(prefix="gateway-soak-") as tmp:
        report = asyncio.run(run(args, Path(tmp)))
        if not report["passed"]:
            log = (Path(tmp) / "gateway.log").read_text(errors="replace")
            print(f"gateway_soak: the gateway's log (last 3000 characters):\n{log[-3000:]}", file=sys.stderr)
    write_json(args.out, report)
    print(json.dumps({k: report[k] for k in ("rss_growth_soak", "search_p99_ratio_soak_over_baseline", "checks")}
                     | {p: {k: report[p][k] for k in ("requests", "outcomes", "search_latency", "call_latency_ok")}
                        for p in PHASES} | {"kills": report["kills"]}, indent=1))
    print(f"wrote {args.out}" + ("" if report["passed"] else "; FAILED: " + ", ".join(
        k for k, v in report["checks"].items() if not v)))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
