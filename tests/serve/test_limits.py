"""`toolret serve` under bad input and load (real server processes): each refused request is a 4xx naming
its field and the server keeps answering; readiness; the concurrency limit (503 + Retry-After); the
request timeout; graceful shutdown; an index swap while requests are in flight fails none of them."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time

import pytest
from serve_helpers import Server, http, pipeline_hits

pytestmark = pytest.mark.integration

# delays of the server's test hooks (toolret.serving.service): they hold a search, never alter it
SLOW = {"TOOLRET_SERVE_TEST_SEARCH_DELAY_S": "1.5"}
# after a graceful shutdown uvicorn re-raises the SIGTERM it caught: the process ends by that signal
STOPPED = (0, -signal.SIGTERM)


@pytest.mark.parametrize("body, raw, status, field", [
    (None, b"this is not json", 400, "body"),
    (None, b'{"queries": ["weather"', 400, "body"),
    (["weather"], None, 422, "body"),
    ({"k": 3}, None, 422, "queries"),
    ({"queries": "weather", "k": 3}, None, 422, "queries"),
    ({"queries": [], "k": 3}, None, 422, "queries"),
    ({"queries": ["weather", "   "], "k": 3}, None, 422, "queries[1]"),
    ({"queries": ["weather", 7], "k": 3}, None, 422, "queries[1]"),
    ({"queries": ["weather"] * 65, "k": 3}, None, 422, "queries"),
    ({"queries": ["w" * 2001], "k": 3}, None, 422, "queries[0]"),
    ({"queries": ["weather"], "k": 0}, None, 422, "k"),
    ({"queries": ["weather"], "k": -2}, None, 422, "k"),
    ({"queries": ["weather"], "k": 31}, None, 422, "k"),
    ({"queries": ["weather"], "k": "5"}, None, 422, "k"),
    ({"queries": ["weather"], "k": 2.5}, None, 422, "k"),
    ({"queries": ["weather"], "k": True}, None, 422, "k"),
    ({"queries": ["weather"], "include_schema": "yes"}, None, 422, "include_schema"),
    ({"queries": ["weather"], "top_k": 3}, None, 422, "top_k"),
    (None, json.dumps({"queries": ["a" * 1000] * 1100}).encode(), 413, "body"),
])
def test_bad_requests_name_the_field_and_the_server_keeps_serving(server, body, raw, status, field):
    got, _, answer = http("POST", server.base + "/search", body, raw=raw)
    assert (got, answer["field"]) == (status, field), answer
    assert answer["detail"].startswith(f"{field}: ")
    got, _, answer = http("POST", server.base + "/search", {"queries": ["weather in Paris"], "k": 2})
    assert got == 200 and answer["results"][0][0]["name"] == "Current Weather"


def test_chunked_body_over_the_limit(server):
    """Without Content-Length the body is counted while read."""
    import http.client as client

    conn = client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", "/search")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    chunk = b" " * 65536
    try:
        for _ in range(20):  # 1.25 MB
            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        conn.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may answer and close before the rest is sent
    resp = conn.getresponse()
    assert resp.status == 413 and json.loads(resp.read())["field"] == "body"
    conn.close()
    assert http("GET", server.base + "/health")[0] == 200


def test_readiness_503_until_loaded_and_warmed(bm25_index, tmp_path):
    with Server(bm25_index, tmp_path / "log", env={"TOOLRET_SERVE_TEST_LOAD_DELAY_S": "3"}) as srv:
        srv.wait_listening()
        status, headers, body = http("GET", srv.base + "/health")
        assert status == 503 and body["status"] == "loading" and headers["retry-after"] == "1"
        status, headers, body = http("POST", srv.base + "/search", {"queries": ["weather"], "k": 2})
        assert status == 503 and "not ready" in body["detail"] and headers["retry-after"] == "1"
        health = srv.wait_ready()
        assert health["status"] == "ready" and health["n_tools"] == 30
        assert http("POST", srv.base + "/search", {"queries": ["weather"], "k": 2})[0] == 200


def test_a_broken_index_fails_start_up(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "pipeline.json").write_text('{"name": "x", "components": [{"dir": "0-nothing", "component": "bm25"}]}')
    srv = Server(bad, tmp_path / "log")
    assert srv.proc.wait(timeout=120) == 2, srv.log_tail()
    srv.stop()
    assert "could not serve" in srv.log_tail()


def test_concurrency_limit_answers_503_with_retry_after(bm25_index, tmp_path):
    from mcp import Client

    with Server(bm25_index, tmp_path / "log", "--max-in-flight", "1", env=SLOW) as srv:
        srv.wait_ready(timeout=120)
        held: dict = {}
        t = threading.Thread(target=lambda: held.update(
            answer=http("POST", srv.base + "/search", {"queries": ["weather in Paris"], "k": 2})))
        t.start()
        deadline = time.time() + 10
        while http("GET", srv.base + "/health")[2]["in_flight"] == 0:  # the first search holds the slot
            assert time.time() < deadline
            time.sleep(0.02)
        status, headers, body = http("POST", srv.base + "/search", {"queries": ["weather"], "k": 2})
        assert status == 503 and headers["retry-after"] == "1" and "max_in_flight 1" in body["detail"]

        async def mcp_call():
            async with Client(srv.base + "/mcp", read_timeout_seconds=30) as client:
                return await client.call_tool("search_tools", {"query": "weather", "k": 2})

        busy = asyncio.run(mcp_call())
        assert busy.is_error and "busy" in busy.content[0].text
        t.join(timeout=30)
        assert held["answer"][0] == 200 and held["answer"][2]["results"][0][0]["tool_id"] == "t000"
        assert http("POST", srv.base + "/search", {"queries": ["weather"], "k": 2})[0] == 200  # slot freed
        health = http("GET", srv.base + "/health")[2]
        assert health["rejected"] >= 2 and health["max_in_flight"] == 1 and health["in_flight"] == 0


def test_request_timeout_then_graceful_shutdown(bm25_index, tmp_path):
    srv = Server(bm25_index, tmp_path / "log", "--timeout", "0.5", env=SLOW)
    try:
        srv.wait_ready(timeout=120)
        status, _, body = http("POST", srv.base + "/search", {"queries": ["weather"], "k": 2})
        assert status == 504 and "0.5 s" in body["detail"]
    finally:
        assert srv.stop() in STOPPED
    # a search in flight when SIGTERM arrives is answered; then the process exits cleanly
    srv = Server(bm25_index, tmp_path / "log2", env=SLOW)
    try:
        srv.wait_ready(timeout=120)
        answer: dict = {}
        t = threading.Thread(target=lambda: answer.update(
            r=http("POST", srv.base + "/search", {"queries": ["weather in Paris"], "k": 2})))
        t.start()
        time.sleep(0.5)
        srv.proc.send_signal(signal.SIGTERM)
        t.join(timeout=30)
        assert answer["r"][0] == 200 and answer["r"][2]["results"][0][0]["tool_id"] == "t000"
        assert srv.proc.wait(timeout=30) in STOPPED
    finally:
        assert srv.stop() in STOPPED, srv.log_tail()
    log = srv.log_tail()
    assert log.index('"POST /search HTTP/1.1" 200') < log.index("Application shutdown complete")
    assert "Finished server process" in log


def test_reload_while_serving_fails_no_request(bm25_index, bm25_index_b, serve_catalog, tmp_path):
    _, catalog = serve_catalog
    queries = [q.text for q in catalog.split("test")[:4]]
    expected = {str(d): pipeline_hits(d, queries, 3) for d in (bm25_index, bm25_index_b)}
    assert expected[str(bm25_index)] != expected[str(bm25_index_b)]  # the swap is observable
    env = {"TOOLRET_SERVE_TEST_SEARCH_DELAY_S": "0.05"}  # requests are in flight during each swap
    with Server(bm25_index, tmp_path / "log", "--workers", "4", env=env) as srv:
        srv.wait_ready(timeout=120)
        stop = threading.Event()
        outcomes: list = []

        def client() -> None:
            while not stop.is_set():
                status, _, body = http("POST", srv.base + "/search", {"queries": queries, "k": 3})
                got = [[(h["tool_id"], h["score"]) for h in row] for row in body["results"]] if status == 200 else None
                outcomes.append((status, got))

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        served = []
        try:
            for target in [bm25_index_b, bm25_index, bm25_index_b, bm25_index, bm25_index_b]:
                status, _, body = http("POST", srv.base + "/admin/reload", {"index": str(target)})
                assert status == 200, body
                assert body["current"]["index"] == str(target)
                served.append(body["current"]["index"])
                time.sleep(0.3)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
        assert len(outcomes) > 20
        failures = [s for s, _ in outcomes if s != 200]
        assert failures == []
        for _, got in outcomes:  # every answer is one whole pipeline's (never a mix)
            assert any(got == [[(t, pytest.approx(s, rel=1e-5)) for t, s in row] for row in exp]
                       for exp in expected.values())
        health = http("GET", srv.base + "/health")[2]
        assert health["reloads"] == 5 and health["index"] == str(bm25_index_b)

        # a failed reload names the field and keeps the current pipeline
        status, _, body = http("POST", srv.base + "/admin/reload", {"index": str(tmp_path / "missing")})
        assert status == 422 and body["field"] == "index" and "still serving" in body["detail"]
        assert http("GET", srv.base + "/health")[2]["index"] == str(bm25_index_b)
        # SIGHUP reloads the served directory
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 60
        while http("GET", srv.base + "/health")[2]["reloads"] != 6:
            assert time.time() < deadline, srv.log_tail()
            time.sleep(0.1)


def test_admin_token(bm25_index, tmp_path):
    with Server(bm25_index, tmp_path / "log", "--admin-token", "s3cret") as srv:
        srv.wait_ready(timeout=120)
        status, _, body = http("POST", srv.base + "/admin/reload")
        assert status == 401 and body["field"] == "authorization"
        status, _, body = http("POST", srv.base + "/admin/reload", headers={"Authorization": "Bearer s3cret"})
        assert status == 200 and body["current"]["index"] == str(bm25_index)


@pytest.mark.parametrize("headers, status, field", [
    ({"Content-Type": "text/plain"}, 415, "content-type"),
    ({"Host": "evil.example"}, 421, "host"),
    ({"Origin": "http://evil.example"}, 403, "origin"),
    ({"Host": "evil.example", "Origin": "http://evil.example", "Content-Type": "text/plain"}, 415, "content-type"),
])
def test_a_page_in_a_browser_cannot_swap_the_index_or_search(server, bm25_index_b, headers, status, field):
    """Cross-site request / DNS rebinding: a form POST, a foreign Host or a foreign Origin is refused; the
    served index stays."""
    before = http("GET", server.base + "/health")[2]["index"]
    got, _, body = http("POST", server.base + "/admin/reload", {"index": str(bm25_index_b)}, headers=headers)
    assert (got, body["field"]) == (status, field)
    got, _, body = http("POST", server.base + "/search", {"queries": ["weather"], "k": 3}, headers=headers)
    assert (got, body["field"]) == (status, field)
    assert http("GET", server.base + "/health")[2]["index"] == before
    # the same requests from a local client (loopback Host, no Origin or its own) are served
    port = server.base.rsplit(":", 1)[1]
    ok = {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}
    assert http("POST", server.base + "/search", {"queries": ["weather"], "k": 3}, headers=ok)[0] == 200
