"""Issue 78 (4, 5, 7): what the HTTP app refuses before any search, called in-process (no server, no
loaded pipeline): the Host / Origin checks on every bind, the admin endpoint on a non-loopback bind, the
JSON nesting limit, and one argument check shared by REST ``/search`` and MCP ``search_tools``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolret.errors import CatalogError

PORT = 8000


def _call(app: Any, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None,
          client: str = "127.0.0.1") -> tuple[int, Any]:
    """One HTTP request through the ASGI app: ``(status, parsed JSON or text)``."""
    hdrs = {"host": f"127.0.0.1:{PORT}", "content-type": "application/json", "content-length": str(len(body)),
            **{k.lower(): v for k, v in (headers or {}).items()}}
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(k.encode(), v.encode()) for k, v in hdrs.items()], "client": (client, 50000),
             "server": ("127.0.0.1", PORT)}
    sent: list[dict] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload.decode(errors="replace")


def _app(tmp_path, host: str = "127.0.0.1", **kwargs) -> Any:
    from toolret.serve import create_app

    return create_app(tmp_path / "no-index-needed", host=host, **kwargs)


def _reload(app: Any, headers: dict[str, str], client: str = "127.0.0.1") -> tuple[int, Any]:
    return _call(app, "POST", "/admin/reload", b"{}", headers, client=client)


# -- 4: a wildcard bind keeps the cross-site checks -------------------------------------------------

@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_wildcard_bind_refuses_a_foreign_host_and_origin(tmp_path, host):
    app = _app(tmp_path, host=host, admin_token="s3cret")
    evil = {"Host": f"evil.example:{PORT}", "Origin": f"http://evil.example:{PORT}",
            "Authorization": "Bearer s3cret"}
    status, body = _reload(app, evil)
    assert (status, body["field"]) == (421, "host"), body
    status, body = _call(app, "POST", "/search", b'{"queries": ["x"]}', evil)
    assert (status, body["field"]) == (421, "host"), body
    # a loopback name is served (503: nothing loaded in this test), a foreign Origin on it is not
    assert _call(app, "POST", "/search", b'{"queries": ["x"]}', {"Host": f"localhost:{PORT}"})[0] == 503
    status, body = _call(app, "POST", "/search", b'{"queries": ["x"]}',
                         {"Host": f"localhost:{PORT}", "Origin": f"http://evil.example:{PORT}"})
    assert (status, body["field"]) == (403, "origin")


def test_allowed_host_names_the_extra_names_a_wildcard_bind_answers_to(tmp_path):
    app = _app(tmp_path, host="0.0.0.0", admin_token="t", extra_hosts=["agents.example"])
    ok = {"Host": f"agents.example:{PORT}", "Origin": f"http://agents.example:{PORT}"}
    assert _call(app, "POST", "/search", b'{"queries": ["x"]}', ok)[0] == 503  # past the checks; not loaded
    assert _call(app, "POST", "/search", b'{"queries": ["x"]}', {"Host": f"evil.example:{PORT}"})[0] == 421
    from toolret.cli import build_parser
    args = build_parser().parse_args(["serve", "--index", "i", "--host", "0.0.0.0", "--allowed-host", "a.example",
                                      "--allowed-host", "10.0.0.5"])
    assert args.allowed_host == ["a.example", "10.0.0.5"]


def test_admin_reload_without_a_token_is_off_on_a_non_loopback_bind(tmp_path):
    app = _app(tmp_path, host="0.0.0.0")
    status, body = _reload(app, {"Host": f"127.0.0.1:{PORT}"})
    assert status == 403 and "--admin-token" in body["detail"], body
    # on loopback, without a token, a loopback client may still reload (503 here: nothing loaded yet)
    assert _reload(_app(tmp_path), {"Host": f"127.0.0.1:{PORT}"})[0] == 503


def test_a_browser_safety_check_on_its_own():
    from toolret.errors import RequestError
    from toolret.serve import allowed_hosts, check_browser_safety

    hosts = allowed_hosts("0.0.0.0")
    assert {"127.0.0.1", "localhost", "::1"} <= hosts and "evil.example" not in hosts
    assert allowed_hosts("10.0.0.5") >= {"10.0.0.5", "localhost"}
    assert allowed_hosts("0.0.0.0", ["*"]) is None  # an explicit opt-out only
    with pytest.raises(RequestError) as e:
        check_browser_safety({"content-type": "application/json", "host": "evil.example:1"}, hosts)
    assert e.value.status == 421


# -- 5: JSON nested too deep -----------------------------------------------------------------------

@pytest.mark.parametrize("depth", [40, 1000, 100_000])
def test_a_body_nested_too_deep_is_a_4xx_naming_the_body(tmp_path, depth):
    app = _app(tmp_path)
    body = ('{"queries": ' + "[" * depth + "]" * depth + "}").encode()
    status, answer = _call(app, "POST", "/search", body)
    assert status in (400, 422) and answer["field"] == "body", answer
    assert "nested" in answer["detail"] and "32" in answer["detail"]


def test_a_body_within_the_depth_limit_reaches_the_field_checks(tmp_path):
    app = _app(tmp_path)
    status, answer = _call(app, "POST", "/search", b'{"queries": [[["x"]]]}')
    assert (status, answer["field"]) == (422, "queries[0]"), answer


# -- 7: one argument check for REST and MCP ----------------------------------------------------------

BAD_ARGUMENTS = [({"k": "5"}, "k: must be an integer, got str"),
                 ({"k": True}, "k: must be an integer, got bool"),
                 ({"k": 2.5}, "k: must be an integer, got float"),
                 ({"top_k": 3}, "top_k: unknown field")]


@pytest.mark.parametrize("extra, message", BAD_ARGUMENTS)
def test_rest_refuses_loose_arguments(tmp_path, extra, message):
    status, answer = _call(_app(tmp_path), "POST", "/search", json.dumps({"queries": ["x"], **extra}).encode())
    assert status == 422 and answer["detail"].startswith(message), answer


@pytest.mark.parametrize("extra, message", BAD_ARGUMENTS)
def test_mcp_search_tools_refuses_the_same_arguments_with_the_same_message(tmp_path, extra, message):
    from mcp.server.mcpserver.exceptions import ToolError

    from toolret.serving.mcp_server import build_mcp_server
    from toolret.serving.service import SearchService

    server = build_mcp_server(SearchService(tmp_path / "no-index-needed"))
    with pytest.raises(ToolError, match=message):
        asyncio.run(server.call_tool("search_tools", {"query": "book a flight", **extra}))
    with pytest.raises(ToolError, match="not ready"):  # valid arguments get past the check
        asyncio.run(server.call_tool("search_tools", {"query": "book a flight", "k": 5}))


def test_the_argument_check_is_one_function(tmp_path):
    from toolret.errors import RequestError
    from toolret.serving.service import check_search_arguments

    with pytest.raises(RequestError, match="must be an integer, got str") as e:
        check_search_arguments({"queries": ["x"], "k": "5"}, {"queries", "k"}, required=("queries",))
    assert (e.value.status, e.value.field) == (422, "k")
    with pytest.raises(RequestError, match="is required"):
        check_search_arguments({}, {"queries"}, required=("queries",))


@pytest.mark.parametrize("value", ["0", "-1", "abc"])
def test_import_mcp_timeout_must_be_positive(value, capsys):
    from toolret.cli import main

    with pytest.raises(SystemExit) as e:
        main(["import-mcp", "--url", "http://127.0.0.1:1/mcp", "--out", "x", "--timeout", value])
    assert e.value.code == 2 and "--timeout" in capsys.readouterr().err


def test_create_app_needs_no_catalog_error_for_a_valid_bind(tmp_path):
    with pytest.raises(CatalogError, match="--allowed-host"):
        _app(tmp_path, host="0.0.0.0", extra_hosts=["bad host!"])
