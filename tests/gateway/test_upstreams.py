"""The gateway's upstream connections with real MCP servers (tests/gateway/servers) and the SDK client: a tool
added at runtime is found at once whatever protocol version the connection speaks (issue 78, fault 2); a
stopped gateway leaves no backend process behind (fault 3)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

from toolret.gateway import Gateway, config_from_dict
from toolret.gateway.mcp_server import build_gateway_server

pytestmark = pytest.mark.integration

SERVERS = Path(__file__).parent / "servers"
FOUND_WITHIN_S = 1.0
STOPPED_WITHIN_S = 8.0

# (what the server speaks, how it announces the new tool, the version the gateway must end up on)
ERAS = [pytest.param(None, "classic", LATEST_HANDSHAKE_VERSION, id="sdk-server-every-era"),
        *[pytest.param(v, "classic", v, id=v) for v in HANDSHAKE_PROTOCOL_VERSIONS],
        # a 2026-07-28-only server cannot send the classic notification at all (the SDK drops it on that era:
        # change notifications travel on subscriptions/listen streams only): it announces on its listen stream
        *[pytest.param(v, "listen", v, id=f"{v}-only") for v in MODERN_PROTOCOL_VERSIONS]]


@pytest.mark.parametrize(("protocol", "notify", "negotiated"), ERAS)
def test_a_tool_added_at_runtime_is_found_within_a_second(protocol, notify, negotiated):
    """The server registers a tool at runtime and announces it once (``add_tool``); search_tools through the
    gateway's MCP face must return it within a second (the heartbeat and the re-list are far off)."""
    from mcp import Client

    command = [sys.executable, str(SERVERS / "classic_notify_server.py"), "--notify", notify]
    command += ["--protocol", protocol] if protocol else []
    config = config_from_dict({"pipeline": "bm25", "heartbeat_s": 60, "relist_s": 300, "timeout_s": 30,
                               "servers": [{"name": "live", "command": command}]})
    query = "track a parcel shipment by its tracking number"

    async def ids(agent) -> list[str]:
        found = await agent.call_tool("search_tools", {"query": query, "k": 3})
        return [h["tool_id"] for h in found.structured_content["hits"]]

    async def scenario() -> tuple[str, float | None]:
        async with Gateway(config) as gateway, Client(build_gateway_server(gateway)) as agent:
            upstream = gateway.upstreams["live"]
            assert upstream.state == "up", upstream.error
            assert "live__track_parcel" not in await ids(agent)
            added = await agent.call_tool("call_tool", {"name": "live__add_tool", "arguments": {
                "name": "track_parcel", "description": "Track a parcel shipment by its tracking number"}})
            assert not added.is_error, added.content
            start = time.monotonic()
            with anyio.move_on_after(FOUND_WITHIN_S):
                while "live__track_parcel" not in await ids(agent):
                    await anyio.sleep(0.02)
                return upstream.client.protocol_version, time.monotonic() - start
            return upstream.client.protocol_version, None

    version, after = anyio.run(scenario)
    assert after is not None, f"the tool added at runtime was not found within {FOUND_WITHIN_S} s ({version})"
    assert version == negotiated


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_gateway_leaves_no_backend_process(tmp_path, signum):
    """``toolret gateway`` (stdio, as agents launch it) stopped by a signal while a backend is still in
    ``initialize`` (it never answers): no process of the gateway's tree -- the backend and the backend's own
    child -- outlives it by more than a few seconds."""
    import psutil
    import yaml

    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"pipeline": "bm25", "timeout_s": 30, "servers": [
        {"name": "silent", "command": [sys.executable, str(SERVERS / "silent_server.py"), "--pid-dir",
                                       str(tmp_path)]}]}), encoding="utf-8")
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as err:
        gateway = subprocess.Popen([sys.executable, "-m", "toolret.cli", "gateway", "--config", str(config),
                                    "--no-receipts"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    tree: list = []
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "server.pid").exists():
            assert gateway.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        tree = [psutil.Process(gateway.pid), *psutil.Process(gateway.pid).children(recursive=True)]
        pids = {p.pid for p in tree}
        assert {int((tmp_path / f).read_text()) for f in ("server.pid", "child.pid")} <= pids
        gateway.send_signal(signum)
        _, alive = psutil.wait_procs(tree, timeout=STOPPED_WITHIN_S)
        assert not alive, (f"alive {STOPPED_WITHIN_S} s after {signum.name}: "
                           f"{[(p.pid, p.cmdline()) for p in alive]}\n{stderr.read_text()}")
    finally:
        for p in tree:
            with contextlib.suppress(psutil.Error):
                p.kill()
        gateway.stdin.close()
        gateway.stdout.close()
        gateway.wait(10)


def test_a_backend_printing_garbage_costs_one_warning_line_each(tmp_path):
    """A backend that prints lines that are not JSON-RPC on its stdout: the gateway's stderr gets one short
    warning per line, naming the backend (no traceback), and the gateway keeps working."""
    import yaml
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"pipeline": "bm25", "servers": [
        {"name": "noisy", "command": [sys.executable, str(SERVERS / "noisy_server.py")]}]}), encoding="utf-8")
    params = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
        "-m", "toolret.cli", "gateway", "--config", str(config), "--no-receipts"])
    stderr = tmp_path / "stderr.txt"

    async def session():
        with stderr.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
                found = await client.call_tool("search_tools", {"query": "translate a text", "k": 1})
                called = await client.call_tool("call_tool", {"name": "noisy__translate_text",
                                                              "arguments": {"text": "hi", "language": "fr"}})
        return found, called

    found, called = anyio.run(session)
    assert [h["tool_id"] for h in found.structured_content["hits"]] == ["noisy__translate_text"]
    assert not called.is_error and called.content[0].text == "hi in fr"
    lines = stderr.read_text().splitlines()
    assert "Traceback" not in stderr.read_text(), stderr.read_text()
    warnings = [line for line in lines if "noisy" in line and "not JSON-RPC" in line]
    assert len(warnings) == 3, lines
    assert all(len(line) <= 300 for line in warnings), warnings
    assert any("Starting the noisy server" in line for line in warnings), warnings
