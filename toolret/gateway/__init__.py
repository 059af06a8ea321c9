"""``toolret gateway``: an MCP gateway in front of many MCP servers (docs/GATEWAY.md).

- :mod:`toolret.gateway.config`: the servers (stdio commands, streamable HTTP URLs) and the pipeline;
- :mod:`toolret.gateway.upstream`: one server's connection, kept alive and its tools current;
- :mod:`toolret.gateway.tool_index`: the namespaced tools of every server in one pipeline, re-indexed on change;
- :mod:`toolret.gateway.gateway`: :class:`Gateway`, the Python API (search, call, status);
- :mod:`toolret.gateway.mcp_server`: the gateway's own MCP server (stdio, streamable HTTP);
- :mod:`toolret.gateway.receipts`: discovery receipts (rotating JSONL) and their summary;
- :mod:`toolret.gateway.cli`: ``toolret gateway`` / ``toolret receipts``.
"""

from __future__ import annotations

from toolret.gateway.config import GatewayConfig, ServerConfig, config_from_dict, load_config
from toolret.gateway.gateway import Gateway
from toolret.errors import GatewayError
from toolret.gateway.receipts import ReceiptLog, summarise

__all__ = ["Gateway", "GatewayConfig", "GatewayError", "ReceiptLog", "ServerConfig", "config_from_dict",
           "load_config", "summarise"]
