"""Issue 78 (6, 7): a gateway config value of the wrong type is an error naming the file and the key
(exit 2, no traceback); the gateway's MCP ``search_tools`` refuses loose arguments as REST ``/search`` does."""

from __future__ import annotations

import asyncio
import re

import pytest

from toolret.errors import CatalogError
from toolret.gateway.config import config_from_dict

SERVERS = [{"name": "s", "url": "http://127.0.0.1:1/mcp"}]


@pytest.mark.parametrize("key, value", [("timeout_s", "abc"), ("call_timeout_s", [1]), ("heartbeat_s", True),
                                        ("backoff_max_s", {"a": 1})])
def test_a_timing_that_is_not_a_number_names_the_key(key, value):
    with pytest.raises(CatalogError, match=re.escape(f"cfg.yaml: {key}: must be a number of seconds, got {value!r}")):
        config_from_dict({key: value, "servers": SERVERS}, "cfg.yaml")


def test_numbers_and_numeric_strings_still_load():
    config = config_from_dict({"timeout_s": 5, "call_timeout_s": "12.5", "servers": SERVERS})
    assert (config.timeout_s, config.call_timeout_s) == (5.0, 12.5)


def test_the_cli_reports_a_bad_config_value_in_one_line(tmp_path, capsys):
    from toolret.cli import main

    cfg = tmp_path / "gw.yaml"
    cfg.write_text("timeout_s: abc\nservers:\n  - {name: s, url: 'http://127.0.0.1:1/mcp'}\n")
    assert main(["gateway", "--config", str(cfg), "--no-receipts"]) == 2
    err = capsys.readouterr().err
    assert f"{cfg}: timeout_s: must be a number of seconds" in err and "Traceback" not in err


@pytest.mark.parametrize("extra, message", [({"k": "5"}, "k: must be an integer, got str"),
                                            ({"k": True}, "k: must be an integer, got bool"),
                                            ({"top_k": 3}, "top_k: unknown field")])
def test_gateway_search_tools_refuses_loose_arguments(extra, message):
    from mcp.server.mcpserver.exceptions import ToolError

    from toolret.gateway.gateway import Gateway
    from toolret.gateway.mcp_server import build_gateway_server

    server = build_gateway_server(Gateway(config_from_dict({"pipeline": "bm25", "servers": SERVERS})), "stdio")
    with pytest.raises(ToolError, match=message):
        asyncio.run(server.call_tool("search_tools", {"query": "book a flight", **extra}))
