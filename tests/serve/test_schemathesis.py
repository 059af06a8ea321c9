"""Hostile requests generated from the server's own OpenAPI schema (schemathesis, valid and invalid bodies: wrong
types, missing and extra fields, out-of-range and oversized values) against real ``toolret serve`` processes, one
on the loopback and one on a wildcard bind (0.0.0.0): no request gets a 5xx, every refusal is a JSON error naming
its field, and the server is still ready afterwards.

``TOOLRET_HOSTILE_EXAMPLES`` sets the examples per operation and generation mode (the suite's default keeps it
to about ten seconds a server); ``benchmarks/hostile_inputs.py`` runs >= 1000 requests a server and writes the
record."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from serve_helpers import Server, http

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("schemathesis")]  # the two servers, once

EXAMPLES = int(os.environ.get("TOOLRET_HOSTILE_EXAMPLES", "25"))
BINDS = {"loopback": "127.0.0.1", "wildcard": "0.0.0.0"}


@pytest.fixture(scope="module", params=sorted(BINDS))
def bound_server(request, bm25_index, tmp_path_factory):
    srv = Server(bm25_index, tmp_path_factory.mktemp("log") / f"{request.param}.log", "--host", BINDS[request.param])
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def api_schema(bound_server):
    return schemathesis.openapi.from_url(bound_server.base + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


def _refusal_is_named(response, case) -> None:
    """A 4xx answer is JSON naming what was refused (``detail``; ``field`` where a field was)."""
    if 400 <= response.status_code < 500 and response.status_code not in (404, 405):
        body = response.json()
        assert isinstance(body, dict) and body.get("detail"), (case.path, response.status_code, response.text[:300])


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_5xx(case, bound_server) -> None:
    response = case.call(base_url=bound_server.base, timeout=30)
    log = os.environ.get("TOOLRET_HOSTILE_LOG")
    if log:  # benchmarks/hostile_inputs.py counts the requests and their answers
        bind = next(b for b, host in BINDS.items() if f"--host {host}" in " ".join(bound_server.proc.args))
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"request\t{bind}\t{case.method} {case.path}\t{response.status_code}\n")
    case.validate_response(response, checks=[not_a_server_error])
    _refusal_is_named(response, case)
    assert bound_server.proc.poll() is None, bound_server.log_tail()


def test_the_servers_are_still_ready_after_the_hostile_requests(bound_server) -> None:
    status, _, body = http("GET", bound_server.base + "/health", timeout=10)
    assert status == 200, body
    status, _, answer = http("POST", bound_server.base + "/search", {"queries": ["weather in Paris"], "k": 2})
    assert status == 200 and answer["results"][0], answer
    assert "Traceback" not in bound_server.log_tail(), bound_server.log_tail()
