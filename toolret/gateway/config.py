"""The gateway's configuration: the upstream MCP servers and the retrieval pipeline.

A YAML or JSON file (``toolret gateway --config FILE``)::

    adapt: myapi                  # the catalog's adapted champion, used where one exists (see below)
    pipeline: hybrid              # else this pipeline spec (bm25, dense, hybrid ...), or instead
    # index: data/adapt/myapi/champion   # a saved pipeline, always (re-indexed over the servers' tools)
    servers:
      - name: files               # the namespace: its tools are searched and called as files__<tool>
        command: npx -y @modelcontextprotocol/server-filesystem /tmp   # stdio (a string or a list)
        env: {LOG_LEVEL: warn}    # merged over the SDK's safe default environment
        category: filesystem      # the category of its tools that do not name their own (``_meta``)
      - name: search
        url: http://127.0.0.1:9000/mcp                                  # streamable HTTP

or flags (:func:`config_from_flags`: ``--stdio NAME=COMMAND``, ``--http NAME=URL``). Timings (seconds):
``timeout_s`` (connect + list), ``call_timeout_s`` (one forwarded call), ``heartbeat_s`` (an MCP ping that
also notices a dead server; 0: off), ``backoff_min_s`` / ``backoff_max_s`` (reconnection, doubling).
``explore`` (default 0: off) is the share of searches shown with one random adjacent pair swapped, drawn
from ``explore_seed`` (:mod:`toolret.gateway.explore`); its receipts carry each shown tool's propensity.
``interleave`` (default 0: off) is the share of searches that interleave the ``adapt`` champion and its
challenger (team draft, drawn from ``interleave_seed``; only where both resolve), the receipt naming the
model that contributed each shown tool; ``adapt_poll_s`` (default 60; 0: never) is how often a running
gateway re-resolves them and swaps to a promoted champion (:meth:`toolret.gateway.gateway.Gateway.refresh_adapted`).
Errors are :class:`CatalogError` naming the file and the key.

``adapt`` names where the catalog's ``toolret adapt`` champion is: an adapt out-dir (its ``champion/``), a
champion folder, a registry URI (``models:/adapt-<name>@champion``), or a bare catalog name (the folder
``data/adapt/<name>/champion`` of the project, else the registry's ``models:/adapt-<name>@champion``). The
gateway uses that champion when it exists and falls back to ``pipeline`` otherwise
(:func:`toolret.gateway.gateway.choose_pipeline`; an explicit ``index`` wins over both).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolret.errors import CatalogError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
SEPARATOR = "__"  # <server>__<tool>


@dataclass(frozen=True)
class ServerConfig:
    """One upstream MCP server: ``command`` (+ ``args``, ``env``, ``cwd``: stdio) or ``url`` (HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    category: str | None = None  # the category of its tools that name none themselves

    def __post_init__(self) -> None:
        if self.category is not None and (not isinstance(self.category, str) or not self.category.strip()):
            raise CatalogError(f"server {self.name!r}: category must be a non-empty string")
        if not isinstance(self.name, str) or not NAME_RE.match(self.name) or SEPARATOR in self.name:
            raise CatalogError(f"server name {self.name!r}: letters, digits, '-' and '_' only (not {SEPARATOR!r})")
        if (self.command is None) == (self.url is None):
            raise CatalogError(f"server {self.name!r}: give exactly one of command (stdio) or url (streamable HTTP)")
        if self.url is not None and not re.match(r"https?://", self.url):
            raise CatalogError(f"server {self.name!r}: url {self.url!r} is not http:// or https://")
        if self.command is not None and not self.command.strip():
            raise CatalogError(f"server {self.name!r}: command is empty")

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def target(self) -> Any:
        """What :class:`mcp.Client` connects to: the URL, or stdio parameters (``command`` split like a shell
        would, then ``args``)."""
        if self.url is not None:
            return self.url
        from mcp.client.stdio import StdioServerParameters

        argv = [*shlex.split(self.command or ""), *self.args]
        return StdioServerParameters(command=argv[0], args=argv[1:], env=self.env, cwd=self.cwd)


@dataclass(frozen=True)
class GatewayConfig:
    servers: tuple[ServerConfig, ...]
    pipeline: str = "hybrid"
    index: str | None = None   # a saved pipeline (a folder or models:/<name>@<alias>) instead of a spec
    adapt: str | None = None   # where the catalog's adapt champion is (used if it exists, else pipeline)
    params: str | None = None  # params.yaml for a spec (default: the project's)
    timeout_s: float = 30.0
    call_timeout_s: float = 300.0
    heartbeat_s: float = 10.0  # an MCP ping this often: a dead server is noticed (0: off)
    relist_s: float = 300.0    # re-list every server this often besides its change notifications (0: never)
    backoff_min_s: float = 1.0
    backoff_max_s: float = 60.0
    explore: float = 0.0       # share of searches shown with one adjacent pair swapped (toolret.gateway.explore)
    explore_seed: int = 0
    interleave: float = 0.0    # share of searches interleaving the adapt champion and challenger (team draft)
    interleave_seed: int = 0
    adapt_poll_s: float = 60.0  # re-resolve the adapt champion / challenger this often; swap when changed (0: never)
    source: str = field(default="flags", compare=False)

    def __post_init__(self) -> None:
        names = [s.name for s in self.servers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise CatalogError(f"{self.source}: server names must be unique; twice: {twice}")
        for key in ("timeout_s", "call_timeout_s", "backoff_min_s", "backoff_max_s"):
            if not getattr(self, key) > 0:
                raise CatalogError(f"{self.source}: {key} must be positive")
        if self.heartbeat_s < 0 or self.relist_s < 0 or self.backoff_max_s < self.backoff_min_s:
            raise CatalogError(f"{self.source}: heartbeat_s >= 0, relist_s >= 0 and backoff_max_s >= backoff_min_s")
        for key in ("explore", "interleave"):
            if not 0 <= getattr(self, key) <= 1:
                raise CatalogError(f"{self.source}: {key} {getattr(self, key)!r} must be a share of searches in [0, 1]")
        if self.adapt_poll_s < 0:
            raise CatalogError(f"{self.source}: adapt_poll_s must be >= 0 (0: never)")

    def server(self, name: str) -> ServerConfig:
        return next(s for s in self.servers if s.name == name)


_SERVER_KEYS = {"name", "command", "args", "env", "cwd", "url", "category"}
_TOP_KEYS = {"servers", "pipeline", "index", "adapt", "params", "timeout_s", "call_timeout_s", "heartbeat_s", "relist_s",
             "backoff_min_s", "backoff_max_s", "explore", "explore_seed", "interleave", "interleave_seed",
             "adapt_poll_s"}


_SECONDS_KEYS = {"timeout_s", "call_timeout_s", "heartbeat_s", "relist_s", "backoff_min_s", "backoff_max_s",
                 "adapt_poll_s"}
_SHARE_KEYS = {"explore", "interleave"}  # numbers too (their range is checked by GatewayConfig)
_SEED_KEYS = {"explore_seed", "interleave_seed"}


def _seconds(value: Any, where: str, what: str = "a number of seconds") -> float:
    """A timing of the config as a float (a number, or a string of one), else an error naming ``where``
    (pydantic's lax float, booleans refused)."""
    from pydantic import TypeAdapter, ValidationError

    try:
        if isinstance(value, bool):
            raise ValueError
        return TypeAdapter(float).validate_python(value)
    except (ValidationError, ValueError):
        raise CatalogError(f"{where}: must be {what}, got {value!r}") from None


def server_from_dict(entry: Any, where: str) -> ServerConfig:
    if not isinstance(entry, dict):
        raise CatalogError(f"{where}: expected a mapping with name and command or url")
    unknown = sorted(set(entry) - _SERVER_KEYS)
    if unknown:
        raise CatalogError(f"{where}: unknown keys {unknown} (known: {sorted(_SERVER_KEYS)})")
    command = entry.get("command")
    args = list(entry.get("args") or [])
    if isinstance(command, list):  # command: [python, server.py]
        command = shlex.join(str(c) for c in command)
    env = entry.get("env")
    if env is not None and not isinstance(env, dict):
        raise CatalogError(f"{where}: env must be a mapping")
    return ServerConfig(name=str(entry.get("name", "")), command=command, args=tuple(str(a) for a in args),
                        env={str(k): str(v) for k, v in env.items()} if env else None,
                        cwd=entry.get("cwd"), url=entry.get("url"),
                        category=str(entry["category"]) if entry.get("category") is not None else None)


def config_from_dict(data: Any, source: str = "config") -> GatewayConfig:
    if not isinstance(data, dict):
        raise CatalogError(f"{source}: expected a mapping with a servers list")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise CatalogError(f"{source}: unknown keys {unknown} (known: {sorted(_TOP_KEYS)})")
    servers = data.get("servers") or []
    if not isinstance(servers, list):
        raise CatalogError(f"{source}: servers must be a list")
    extra = {k: data[k] for k in _TOP_KEYS - {"servers"} if data.get(k) is not None}
    for k in _SECONDS_KEYS & set(extra):
        extra[k] = _seconds(extra[k], f"{source}: {k}")
    for k in _SHARE_KEYS & set(extra):
        extra[k] = _seconds(extra[k], f"{source}: {k}", "a share between 0 and 1")
    for k in _SEED_KEYS & set(extra):
        if isinstance(extra[k], bool) or not isinstance(extra[k], int):
            raise CatalogError(f"{source}: {k}: must be an integer, got {extra[k]!r}")
    for k in ("pipeline", "index", "adapt", "params"):
        if k in extra and not isinstance(extra[k], str):
            raise CatalogError(f"{source}: {k}: must be a string, got {extra[k]!r}")
    return GatewayConfig(servers=tuple(server_from_dict(s, f"{source}: servers[{i}]") for i, s in enumerate(servers)),
                         source=source, **extra)


def load_config(path: str | Path) -> GatewayConfig:
    """A gateway config file (``.json``: JSON; anything else: YAML, which JSON also is)."""
    path = Path(path)
    if not path.is_file():
        raise CatalogError(f"{path}: gateway config not found")
    import yaml

    text = path.read_text(encoding="utf-8")
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        data = json.loads(text) if kind == "JSON" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise CatalogError(f"{path}: not valid {kind} ({e})") from None
    return config_from_dict(data, str(path))


def _named(values: list[str], flag: str) -> list[tuple[str, str]]:
    out = []
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not rest.strip():
            raise CatalogError(f"{flag} {v!r}: expected NAME=VALUE")
        out.append((name.strip(), rest.strip()))
    return out


def config_from_flags(base: GatewayConfig | None = None, *, stdio: list[str] = (), http: list[str] = (),
                      pipeline: str | None = None, index: str | None = None,
                      adapt: str | None = None) -> GatewayConfig:
    """``base`` (a config file, or none) with the servers of ``--stdio NAME=COMMAND`` / ``--http NAME=URL``
    added and ``--pipeline`` / ``--index`` / ``--adapt`` applied (an explicit ``--pipeline`` is used as
    given: it clears the file's ``index`` and ``adapt``; ``--adapt`` clears its ``index``)."""
    servers = list(base.servers) if base else []
    servers += [ServerConfig(name=n, command=c) for n, c in _named(list(stdio), "--stdio")]
    servers += [ServerConfig(name=n, url=u) for n, u in _named(list(http), "--http")]
    if not servers:
        raise CatalogError("no MCP servers: give --config FILE or --stdio NAME=COMMAND / --http NAME=URL")
    fields: dict[str, Any] = {k: getattr(base, k) for k in GatewayConfig.__dataclass_fields__} if base else {}
    fields.update(servers=tuple(servers), source=base.source if base else "flags")
    if pipeline is not None:
        fields.update(pipeline=pipeline, index=None, adapt=None)
    if adapt is not None:
        fields.update(adapt=adapt, index=None)
    if index is not None:
        fields["index"] = index
    return GatewayConfig(**fields)


__all__ = ["SEPARATOR", "GatewayConfig", "ServerConfig", "config_from_dict", "config_from_flags", "load_config"]
