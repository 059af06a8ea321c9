"""``toolret gateway`` and ``toolret receipts``: the parsers and what they run (:func:`add_commands` is all
:mod:`toolret.cli` calls; nothing heavy is imported until a command runs)."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from toolret.config import cache_home
from toolret.errors import CatalogError
from toolret.gateway.config import config_from_flags, load_config
from toolret.gateway.gateway import Gateway
from toolret.gateway.mcp_server import serve_http, serve_stdio
from toolret.gateway.receipts import (DEFAULT_BACKUPS, DEFAULT_MAX_BYTES, ReceiptLog, format_summary, log_files,
                                      summarise)


def cmd_gateway(args: argparse.Namespace) -> None:
    """An MCP gateway over the configured servers: search_tools + call_tool, on stdio or streamable HTTP."""

    gateway_log = logging.getLogger("toolret.gateway")  # one plain line each on stderr (not the SDK's layout)
    if not gateway_log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("toolret %(message)s"))
        gateway_log.addHandler(handler)
        gateway_log.setLevel(logging.WARNING)
        gateway_log.propagate = False
    base = load_config(args.config) if args.config else None
    config = config_from_flags(base, stdio=args.stdio, http=args.http, pipeline=args.pipeline, index=args.index,
                               adapt=args.adapt)
    receipts = None
    if not args.no_receipts:

        path = args.receipts or cache_home() / "gateway" / "receipts.jsonl"
        receipts = ReceiptLog(path, max_bytes=args.receipts_max_bytes, backups=args.receipts_backups)
        print(f"toolret gateway: receipts in {receipts.path}", file=sys.stderr, flush=True)
    gateway = Gateway(config, receipts=receipts)
    print(f"toolret gateway: {gateway.choice.why}", file=sys.stderr, flush=True)
    if args.transport == "http":
        serve_http(gateway, host=args.host, port=args.port)
    else:
        serve_stdio(gateway)


def cmd_receipts(args: argparse.Namespace) -> None:
    """Summarise a gateway's receipts: top queries, tools never shown, calls of tools not shown."""

    if not log_files(args.log):
        raise CatalogError(f"--log {args.log}: no receipts file (nor rotated backups)")
    summary = summarise(args.log, top=args.top)
    print(json.dumps(summary, indent=1) if args.json else format_summary(summary))


def add_commands(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser("gateway", help="an MCP gateway in front of many MCP servers: search_tools over all their "
                       "tools (namespaced <server>__<tool>) and call_tool forwarded (docs/GATEWAY.md)")
    g.add_argument("--config", help="YAML / JSON file: servers (name + command or url, category), adapt, "
                   "pipeline or index")
    g.add_argument("--stdio", action="append", default=[], metavar="NAME=COMMAND", help="a stdio server (repeatable)")
    g.add_argument("--http", action="append", default=[], metavar="NAME=URL",
                   help="a streamable HTTP server (repeatable)")
    g.add_argument("--pipeline", help="pipeline spec, used as given (default: the catalog's adapt champion "
                   "where the config's adapt finds one, else the config's pipeline, else hybrid)")
    g.add_argument("--adapt", metavar="REF", help="the catalog's adapt champion, used where it exists (else "
                   "the pipeline): an adapt out-dir, a champion folder, models:/adapt-<name>@champion or a "
                   "catalog name (data/adapt/<name>/champion, else the registry)")
    g.add_argument("--index", help="a saved pipeline to re-index over the servers' tools (instead of --pipeline)")
    g.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=int, default=8765)
    rec = g.add_mutually_exclusive_group()
    rec.add_argument("--receipts", help="discovery receipts log, JSON lines (default: <cache home>/gateway/"
                     "receipts.jsonl)")
    rec.add_argument("--no-receipts", action="store_true", help="write no receipts")
    g.add_argument("--receipts-max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="rotate the log at this size")
    g.add_argument("--receipts-backups", type=int, default=DEFAULT_BACKUPS, help="rotated files kept")
    g.set_defaults(func=cmd_gateway)

    r = sub.add_parser("receipts", help="summarise a gateway's discovery receipts (top queries, tools never shown, "
                       "calls of tools not shown)")
    r.add_argument("--log", required=True, help="the receipts file (its rotated backups FILE.1 ... are read too)")
    r.add_argument("--top", type=int, default=10)
    r.add_argument("--json", action="store_true", help="the summary as JSON")
    r.set_defaults(func=cmd_receipts)


__all__ = ["add_commands", "cmd_gateway", "cmd_receipts"]
