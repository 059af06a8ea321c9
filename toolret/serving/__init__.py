"""Serving a saved pipeline to agents: tool records (:mod:`.tools`), the shared search service with its
limits, concurrency and index swap (:mod:`.service`), and the MCP server (:mod:`.mcp_server`). The HTTP
app (REST + MCP streamable HTTP on one port) is :mod:`toolret.serve`.

Nothing is imported here: :mod:`toolret.pipeline` imports :mod:`.tools` alone (it writes ``tools.jsonl``
beside a saved pipeline), so the stages' code deps do not grow by the web stack.
"""
