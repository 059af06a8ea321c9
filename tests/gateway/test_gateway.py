"""``toolret gateway`` end to end with real MCP servers (tests/gateway/servers, launched over stdio by the
gateway): search across both, exact names, min_score, categories, a forwarded call, a tool added at runtime,
a killed server withheld and back, receipts and their summary; then the CLI gateway over stdio with the SDK
client; and the pipeline choice (the catalog's adapt champion where one exists, else the spec).

One gateway (BM25, in-process, on a background event loop) serves the in-process tests in file order;
its heartbeat is long, so a re-index within seconds comes from the server's list_changed notification."""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import anyio
import anyio.from_thread
import pytest

from toolret.errors import CatalogError
from toolret.gateway import Gateway, GatewayError, config_from_dict
from toolret.gateway.receipts import ReceiptLog, read_receipts, summarise

pytestmark = pytest.mark.integration

SERVERS = Path(__file__).parent / "servers"
WAIT_S = 20


def _servers(tmp: Path) -> list[dict]:
    return [{"name": "files", "command": [sys.executable, str(SERVERS / "files_server.py"), "--pid-file",
                                          str(tmp / "files.pid"), "--refuse-if", str(tmp / "files.refuse")]},
            {"name": "weather", "command": [sys.executable, str(SERVERS / "weather_server.py")],
             "category": "weather"}]  # its tools' category, but convert_currency's own (_meta: finance)


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gateway")
    config = config_from_dict({"pipeline": "bm25", "heartbeat_s": 60, "backoff_min_s": 0.2, "backoff_max_s": 1,
                               "timeout_s": 30, "servers": _servers(tmp)})
    gateway = Gateway(config, receipts=tmp / "receipts.jsonl")
    with anyio.from_thread.start_blocking_portal() as portal, portal.wrap_async_context_manager(gateway):
        def call(fn, *args, **kwargs):
            return portal.call(functools.partial(fn, *args, **kwargs))

        yield SimpleNamespace(gateway=gateway, call=call, tmp=tmp, log=tmp / "receipts.jsonl",
                              search=functools.partial(call, gateway.search))


def _ids(answer: dict) -> list[str]:
    return [h["tool_id"] for h in answer["hits"]]


def _until(predicate, what: str):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {WAIT_S} s: {what}")


def test_search_across_both_servers(gw):
    status = gw.gateway.status()
    assert {n: s["state"] for n, s in status["servers"].items()} == {"files": "up", "weather": "up"}
    assert {n: s["tools"] for n, s in status["servers"].items()} == {"files": 3, "weather": 4}
    weather = gw.search("rain forecast for a city", k=3)
    assert _ids(weather)[0] == "weather__get_forecast" and weather["withheld"] == 0
    top = weather["hits"][0]
    assert (top["name"], top["server"], top["input_schema"]["required"]) == ("get_forecast", "weather", ["city"])
    assert _ids(gw.search("read a text file", k=3))[0] == "files__read_file"
    only_files = gw.search("read a text file or a forecast", k=5, server="files")
    assert only_files["hits"] and {h["server"] for h in only_files["hits"]} == {"files"}


def test_exact_names_come_first(gw):
    for query in ("echo", "files__echo", "select:echo"):
        assert _ids(gw.search(query, k=3))[0] == "files__echo", query
    assert gw.search("echo", k=3)["hits"][0]["match"] == "exact"
    assert _ids(gw.search("select:weather__convert_currency,read_file", k=5)) == \
        ["weather__convert_currency", "files__read_file"]  # select: only those


def test_min_score_may_leave_no_hit(gw):
    assert gw.search("read a text file", k=5)["hits"]
    assert gw.search("read a text file", k=5, min_score=1e6)["hits"] == []
    with pytest.raises(GatewayError, match="server"):
        gw.search("read", server="nope")


def test_categories_from_the_tools_meta_or_the_server_filter_search(gw):
    shown = gw.search("select:files__echo,files__read_file,weather__get_forecast,weather__convert_currency", k=5)
    assert {h["tool_id"]: h["category"] for h in shown["hits"]} == {
        "files__echo": "debugging",               # _meta category
        "files__read_file": "filesystem",         # _meta io.toolret/category
        "weather__get_forecast": "weather",       # the server's configured category
        "weather__convert_currency": "finance"}   # its own _meta wins over the server's
    assert gw.gateway.status()["categories"] == ["debugging", "filesystem", "finance", "weather"]
    query = "convert money currency, read a file, or a rain forecast"
    assert _ids(gw.search(query, k=10, category="finance")) == ["weather__convert_currency"]
    weather = gw.search(query, k=10, category="Weather")  # case-insensitive
    assert _ids(weather)[0] == "weather__get_forecast"
    assert {h["category"] for h in weather["hits"]} == {"weather"} and "weather__convert_currency" not in _ids(weather)
    files = gw.search(query, k=2, category="filesystem")
    assert sorted(_ids(files)) == ["files__delete_file", "files__read_file"]  # k hits of the category, not fewer
    assert "files__echo" not in _ids(gw.search("echo", k=3, category="filesystem"))  # named, but of another category
    assert gw.search(query, k=5, server="files", category="weather")["hits"] == []
    with pytest.raises(GatewayError, match="category"):
        gw.search(query, category="no-such-category")


def test_call_tool_is_forwarded_unchanged(gw):
    result = gw.call(gw.gateway.call_tool, "files__echo", {"text": "hello", "times": 2})
    assert not result.is_error
    assert json.loads(result.content[0].text)["received"] == {"text": "hello", "times": 2}
    failed = gw.call(gw.gateway.call_tool, "delete_file", {"path": "/protected/a"})  # original name, unique
    assert failed.is_error and "refusing to delete /protected/a" in failed.content[0].text
    with pytest.raises(GatewayError, match="unknown tool"):
        gw.call(gw.gateway.call_tool, "files__nope", {})


def test_tool_added_at_runtime_is_found_after_list_changed(gw):
    query = "track a parcel shipment"
    assert "weather__track_parcel" not in _ids(gw.search(query))
    gw.call(gw.gateway.call_tool, "weather__add_tool",
            {"name": "track_parcel", "description": "Track a parcel shipment by its tracking number"})
    _until(lambda: "weather__track_parcel" in _ids(gw.search(query)), "the added tool in search")
    change = [r for r in read_receipts(gw.log) if r["event"] == "tools"][-1]
    assert (change["server"], change["added"], change["removed"], change["changed"]) == \
        ("weather", ["track_parcel"], [], [])  # only what changed
    assert "weather__track_parcel" in change["tools"] and len(change["tools"]) == 8


def test_killed_server_is_withheld_then_back(gw):
    refuse = gw.tmp / "files.refuse"
    refuse.touch()  # its restarts fail until removed
    try:
        os.kill(int((gw.tmp / "files.pid").read_text()), signal.SIGKILL)
        _until(lambda: gw.gateway.upstreams["files"].state == "down", "the killed server marked down")
        answer = gw.search("echo a text", k=5)
        assert not [i for i in _ids(answer) if i.startswith("files__")]
        assert answer["withheld"] == 3 and answer["servers_down"] == ["files"]
        assert gw.search("echo", server="files")["hits"] == []
        in_category = gw.search("read a file", category="filesystem")
        assert in_category["hits"] == [] and in_category["withheld"] == 2  # only that category's down tools
        with pytest.raises(GatewayError, match="down"):
            gw.call(gw.gateway.call_tool, "files__echo", {"text": "x"})
    finally:
        refuse.unlink()
    _until(lambda: gw.gateway.upstreams["files"].state == "up", "the server reconnected")
    answer = gw.search("echo a text", k=5)
    assert _ids(answer)[0] == "files__echo" and answer["withheld"] == 0
    result = gw.call(gw.gateway.call_tool, "files__echo", {"text": "back"})
    assert json.loads(result.content[0].text)["received"]["text"] == "back"


def test_receipts_and_their_summary(gw, capsys):
    from toolret.cli import main

    gw.search("rain forecast for a city", k=2, session="receipts-test", caller="pytest/1")
    gw.call(gw.gateway.call_tool, "weather__get_forecast", {"city": "Oslo"}, session="receipts-test")
    gw.call(gw.gateway.call_tool, "weather__convert_currency", {"amount": 3, "source": "EUR", "target": "NOK"},
            session="receipts-test")  # never shown to this session
    mine = [r for r in read_receipts(gw.log) if r.get("session") == "receipts-test"]
    assert [r["event"] for r in mine] == ["search", "call", "call"]
    search, shown_call, unshown_call = mine
    assert search["query"] == "rain forecast for a city" and search["k"] == 2 and search["caller"] == "pytest/1"
    assert search["shown"][0]["id"] == "weather__get_forecast" and isinstance(search["shown"][0]["score"], float)
    assert search["withheld"] == 0 and search["latency_ms"] >= 0
    assert (shown_call["tool"], shown_call["shown_before"], shown_call["is_error"]) == \
        ("weather__get_forecast", True, False)
    assert (unshown_call["tool"], unshown_call["shown_before"]) == ("weather__convert_currency", False)
    everything = read_receipts(gw.log)
    withheld = [r for r in everything if r["event"] == "search" and r["withheld"]]
    assert withheld and withheld[0]["withheld"] == 3  # the searches while a server was down
    summary = summarise(gw.log)
    assert "weather__moon_phase" in summary["never_shown"] and "files__echo" not in summary["never_shown"]
    assert main(["receipts", "--log", str(gw.log)]) == 0
    out = capsys.readouterr().out
    never = out.split("tools never shown")[1].split("calls of tools not shown")[0]
    assert "weather__moon_phase" in never
    assert "weather__convert_currency" in out.split("calls of tools not shown")[1]


def test_receipts_rotate_and_summary_reads_the_backups(tmp_path):
    log = ReceiptLog(tmp_path / "r.jsonl", max_bytes=400, backups=2)
    for i in range(30):
        log.write("search", query=f"q{i}", k=1, shown=[{"id": "a", "score": 1.0}], withheld=0, latency_ms=1)
    log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["r.jsonl", "r.jsonl.1", "r.jsonl.2"]  # bounded: the oldest lines are gone
    assert all(p.stat().st_size <= 400 for p in tmp_path.iterdir())
    assert 0 < summarise(tmp_path / "r.jsonl")["searches"] < 30


def test_config_errors_name_the_problem(tmp_path):
    with pytest.raises(CatalogError, match="exactly one of command"):
        config_from_dict({"servers": [{"name": "a", "command": "x", "url": "http://h/mcp"}]})
    with pytest.raises(CatalogError, match="unique"):
        config_from_dict({"servers": [{"name": "a", "command": "x"}, {"name": "a", "url": "http://h/mcp"}]})
    with pytest.raises(CatalogError, match="letters"):
        config_from_dict({"servers": [{"name": "a__b", "command": "x"}]})
    with pytest.raises(CatalogError, match="unknown keys"):
        config_from_dict({"servers": [], "pipline": "bm25"})
    with pytest.raises(CatalogError, match="unknown"):
        Gateway(config_from_dict({"pipeline": "no-such-method", "servers": [{"name": "a", "command": "x"}]}))


def test_cli_gateway_over_stdio(tmp_path):
    """``toolret gateway --config FILE`` (stdio) driven by the SDK client, as an agent would."""
    import yaml
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"pipeline": "bm25", "servers": _servers(tmp_path)}), encoding="utf-8")
    receipts = tmp_path / "receipts.jsonl"
    params = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
        "-m", "toolret.cli", "gateway", "--config", str(config), "--receipts", str(receipts)])

    async def session():
        async with Client(params, read_timeout_seconds=60) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            tools = sorted(listed)
            schema = listed["search_tools"].input_schema
            found = await client.call_tool("search_tools", {"query": "weather forecast for a city", "k": 2})
            finance = await client.call_tool("search_tools", {"query": "weather forecast or money", "k": 5,
                                                              "category": "finance"})
            none = await client.call_tool("search_tools", {"query": "weather forecast", "min_score": 1e6})
            echoed = await client.call_tool("call_tool", {"name": "files__echo", "arguments": {"text": "via cli"}})
            unknown = await client.call_tool("call_tool", {"name": "nope", "arguments": {}})
            status = json.loads((await client.read_resource("toolret://gateway")).contents[0].text)
        return tools, schema, found, finance, none, echoed, unknown, status

    tools, schema, found, finance, none, echoed, unknown, status = anyio.run(session)
    assert tools == ["call_tool", "search_tools"] and "category" in schema["properties"]
    assert [h["tool_id"] for h in finance.structured_content["hits"]] == ["weather__convert_currency"]
    assert finance.structured_content["hits"][0]["category"] == "finance"
    hits = found.structured_content["hits"]
    assert hits[0]["tool_id"] == "weather__get_forecast" and "weather__get_forecast" in found.content[0].text
    assert found.structured_content["withheld"] == 0 and hits[0]["input_schema"]["required"] == ["city"]
    assert not none.is_error and none.structured_content["hits"] == []
    assert not echoed.is_error and json.loads(echoed.content[0].text)["received"] == {"text": "via cli", "times": 1}
    assert unknown.is_error and "unknown tool 'nope'" in unknown.content[0].text
    assert {n: s["state"] for n, s in status["servers"].items()} == {"files": "up", "weather": "up"}
    assert status["pipeline_source"] == "pipeline" and status["categories"] == ["debugging", "filesystem",
                                                                                "finance", "weather"]
    lines = read_receipts(receipts)
    searches = [r for r in lines if r["event"] == "search"]
    calls = [r for r in lines if r["event"] == "call"]
    assert len(searches) == 3 and len(calls) == 2 and searches[1]["category"] == "finance"
    assert searches[0]["caller"] and searches[0]["session"] == "stdio"
    assert calls[0]["tool"] == "files__echo" and calls[0]["shown_before"] is False


def test_index_diffs_a_listing_and_reindexes_only_on_change():
    from mcp_types import Tool as McpTool

    from toolret.gateway.tool_index import GatewayIndex

    def tool(name, description):
        return McpTool(name=name, description=description, input_schema={"type": "object", "properties": {}})

    index = GatewayIndex("bm25")
    first = index.update("s", [tool("send_mail", "Send an email"), tool("get_weather", "Weather forecast")])
    assert first.added == ("send_mail", "get_weather") and index.generation == 1
    kept = index.server_tools("s")[0]
    assert not index.update("s", [tool("send_mail", "Send an email"), tool("get_weather", "Weather forecast")])
    assert index.generation == 1  # the same listing: nothing re-indexed
    diff = index.update("s", [tool("send_mail", "Send an email"), tool("get_weather", "Rain and sun forecast"),
                              tool("book_flight", "Book a flight")])
    assert (diff.added, diff.removed, diff.changed) == (("book_flight",), (), ("get_weather",))
    assert index.server_tools("s")[0] is kept and index.generation == 2  # unchanged entries kept as they were
    assert index.update("s", [tool("book_flight", "Book a flight")]).removed == ("send_mail", "get_weather")
    hits, withheld = index.search("book a flight", 5, down={"s"})
    assert hits == [] and withheld == 1


def _mcp_tool(name, description):
    from mcp_types import Tool as McpTool

    return McpTool(name=name, description=description, input_schema={"type": "object", "properties": {}})


def _save_champion(folder: Path) -> None:
    """A small saved BM25 pipeline where ``toolret adapt`` puts its champion (``<out>/champion``)."""
    import toolret
    from toolret.catalog.model import Catalog, Tool

    tools = [Tool(id=f"t{i}", name=f"t{i}", docs={"original": d}) for i, d in
             enumerate(["send an email", "weather forecast", "book a flight"])]
    pipeline = toolret.build("bm25", Catalog(name="demo", tools=tools, queries=[], qrels={}, provenance={}))
    pipeline.catalog_info = {"name": "demo", "n_tools": 3, "fingerprint": "x"}
    pipeline.save(folder)


def test_the_adapt_champion_is_used_where_one_exists_else_the_spec(tmp_path, caplog, monkeypatch):
    from toolret.gateway.config import config_from_flags

    out = tmp_path / "adapt-out"  # an adapt out-dir
    servers = [{"name": "s", "command": "x"}]

    async def gateway(config):  # built in an event loop (its upstreams' events need one); never entered
        return Gateway(config)

    caplog.set_level(logging.INFO, logger="toolret.gateway")
    fallback = anyio.run(gateway, config_from_dict({"adapt": str(out), "servers": servers}))
    assert (fallback.choice.source, fallback.index.saved, fallback.index.spec) == ("pipeline", None, "hybrid")
    assert "no adapt champion for" in caplog.text and str(out) in caplog.text  # logged, with why
    assert any(r.levelno == logging.WARNING for r in caplog.records)

    _save_champion(out / "champion")
    caplog.clear()
    chosen = anyio.run(gateway, config_from_dict({"adapt": str(out), "servers": servers}))
    assert (chosen.choice.source, chosen.index.saved) == ("adapt", str(out / "champion"))
    assert "the adapt champion bm25 of demo" in caplog.text
    assert chosen.status()["pipeline_source"] == "adapt"
    chosen.index.update("s", [_mcp_tool("book_flight", "Book a flight ticket"), _mcp_tool("send_mail", "Send mail")])
    hits, _ = chosen.index.search("book a flight", 2)
    assert hits[0]["tool_id"] == "s__book_flight" and chosen.index.pipeline_name == "bm25"  # re-indexed champion
    assert anyio.run(gateway, config_from_dict({"adapt": str(out / "champion"), "servers": servers})
                     ).choice.index == str(out / "champion")  # the champion folder itself works too

    def resolve(ref, tracking_uri=None):  # the registry: only adapt-demo has a champion
        if not ref.startswith("models:/"):
            return ref
        if ref == "models:/adapt-gw-test-demo@champion":
            return str(out / "champion")
        raise RuntimeError(f"no registered model for {ref}")

    monkeypatch.setattr("toolret.gateway.gateway.resolve_index", resolve)  # where the gateway looks it up
    for ref in ("models:/adapt-gw-test-demo@champion", "gw-test-demo"):  # a URI; a catalog name
        choice = anyio.run(gateway, config_from_dict({"adapt": ref, "servers": servers})).choice
        assert (choice.source, choice.index) == ("adapt", str(out / "champion")), ref
    caplog.clear()
    missing = anyio.run(gateway, config_from_dict({"adapt": "models:/adapt-nope@champion", "pipeline": "bm25",
                                                   "servers": servers})).choice
    assert (missing.source, missing.index, missing.pipeline) == ("pipeline", None, "bm25")
    assert "no registered model" in caplog.text

    with_champion = config_from_dict({"adapt": str(out), "servers": servers})
    assert anyio.run(gateway, config_from_flags(with_champion, pipeline="bm25")).choice.source == "pipeline"
    other = tmp_path / "other"
    _save_champion(other)
    pinned = config_from_dict({"adapt": str(out), "index": str(other), "servers": servers})
    assert anyio.run(gateway, pinned).choice.index == str(other)  # an explicit index wins
    flagged = config_from_flags(config_from_dict({"index": str(other), "servers": servers}), adapt=str(out))
    assert anyio.run(gateway, flagged).choice == chosen.choice  # --adapt replaces the file's index


def test_the_heartbeat_pings_and_the_tools_are_relisted_only_when_due(tmp_path):
    """A heartbeat is an MCP ping (cheap for a server of 46,879 tools); the tools are re-listed on a change
    notification or every relist_s, not at each heartbeat."""
    def run(relist_s: float) -> dict:
        config = config_from_dict({"pipeline": "bm25", "heartbeat_s": 0.2, "relist_s": relist_s, "timeout_s": 30,
                                   "servers": [_servers(tmp_path)[1]]})
        gateway = Gateway(config)
        with anyio.from_thread.start_blocking_portal() as portal, portal.wrap_async_context_manager(gateway):
            up = gateway.upstreams["weather"]
            _until(lambda: up.status()["pings"] >= 5, "five heartbeat pings")
            return up.status()

    quiet = run(relist_s=60)
    assert quiet["state"] == "up" and quiet["lists"] == 1  # listed when it came up, then only pinged
    assert run(relist_s=0.3)["lists"] >= 2  # a re-list once due


def test_relist_s_must_not_be_negative():
    with pytest.raises(CatalogError, match=r"relist_s >= 0"):
        config_from_dict({"relist_s": -1, "servers": [{"name": "a", "command": "x"}]})


def test_concurrent_searches_are_answered_together_as_each_alone(gw):
    """Searches that arrive while one runs share one pipeline search, and each gets what it gets alone."""
    queries = ["forecast for a city", "echo a text", "read a file", "convert money", "rain tomorrow",
               "list files", "currency rate", "weather"]
    alone = [gw.search(q, k=3, session="batch-test") for q in queries]
    before = len(gw.gateway._batches.sizes)

    async def together():
        answers = [None] * len(queries)

        async def one(i):
            answers[i] = await gw.gateway.search(queries[i], k=3, session="batch-test")

        async with anyio.create_task_group() as tg:
            for i in range(len(queries)):
                tg.start_soon(one, i)
        return answers

    answers = gw.call(together)
    assert max(gw.gateway._batches.sizes[before:]) >= 2  # at least one batch held several searches
    assert [a["hits"] for a in answers] == [a["hits"] for a in alone]
