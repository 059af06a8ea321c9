"""Serve a saved pipeline to agents over HTTP: REST and MCP (streamable HTTP) on one port.

``toolret serve --index data/indexes/<ds>/<method>/<docs>`` starts at once and loads the pipeline in the
background (then one warm-up search), answering::

    GET  /health        200 {"status": "ready", "pipeline", "n_tools", "index", "catalog": {size, provenance},
                             "tool_metadata", "limits", "in_flight", "requests", "rejected", ...}
                        503 {"status": "loading" | "failed", ...} before that
    POST /search        {"queries": ["..."], "k": 5, "include_schema": false}
                        -> {"pipeline", "n_tools", "results": [[{"tool_id", "name", "tool", "category",
                            "description", "score", "input_schema"?}, ...], ...]}
    POST /admin/reload  {"index": DIR?, "catalog": DIR?} -> {"previous", "current"}  (also SIGHUP: reload
                        the served directory); loopback-only unless --admin-token is set, and off on a
                        bind beyond loopback without one
    POST /mcp           MCP streamable HTTP (tool search_tools, resource toolret://catalog):
                        :mod:`toolret.serving.mcp_server`, the SDK's transport route added to this app

Every POST needs ``Content-Type: application/json``, a ``Host`` this server answers to (loopback names, the
bound name, ``--allowed-host``; on every bind, a wildcard one included) and no foreign ``Origin``.
Errors are ``{"detail": "<field>: <message>", "field": <field or null>}``: 400 body not JSON (422 nested deeper
than ``MAX_JSON_DEPTH``), 413 body over
``max_body_bytes``, 422 a field out of its limits (:class:`~toolret.serving.service.Limits`), 503 +
``Retry-After`` not ready / ``max_in_flight`` searches already admitted, 504 ``timeout_s`` passed. The
concurrency model, limits and the index swap are :mod:`toolret.serving.service`'s. On SIGTERM / SIGINT
uvicorn stops accepting connections and lets requests in flight finish (at most ``timeout_s`` + 5 s).
"""

# no `from __future__ import annotations`: FastAPI reads the endpoint annotations at runtime
import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import re
import signal
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from toolret.errors import CatalogError, RequestError
from toolret.serving.mcp_server import build_mcp_server
from toolret.serving.service import Limits, SearchService, check_search_arguments

log = logging.getLogger("toolret.serve")


def _is_loopback(host: Optional[str]) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413 naming ``body`` (by its
    Content-Length before the app sees it, or while a chunked body is read), for every route. A body of
    up to ``DRAIN_FACTOR`` x the limit is read and dropped first, so a client still sending it gets the
    413 rather than a broken pipe; a larger one is answered at once and the connection closed."""

    DRAIN_FACTOR = 8

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def _drain(self, receive: Any, budget: int) -> None:
        """Read and drop the rest of the body, at most ``budget`` more bytes."""
        while budget >= 0:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body"):
                return
            budget -= len(message.get("body", b""))

    async def _reject(self, send: Any) -> None:
        body = json.dumps(RequestError(413, "body", f"request body over {self.max_bytes} bytes").body()).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                size = self.max_bytes * self.DRAIN_FACTOR + 1
            if size > self.max_bytes:
                if size <= self.max_bytes * self.DRAIN_FACTOR:
                    await self._drain(receive, size)
                return await self._reject(send)
            return await self.app(scope, receive, send)
        # no Content-Length (chunked): read it all first, within the limit, then replay it
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                if message.get("more_body"):
                    await self._drain(receive, self.max_bytes * self.DRAIN_FACTOR - size)
                return await self._reject(send)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
MAX_JSON_DEPTH = 32  # nesting of a request body (arrays and objects); deeper: 422, never a RecursionError
_HOST_NAME = re.compile(r"^(\*|[a-z0-9]([a-z0-9.-]*[a-z0-9])?|[0-9a-f:.]+)$")


def allowed_hosts(bound: str, extra: "Iterable[str]" = ()) -> "set[str] | None":
    """Host names a request may address a server bound to ``bound`` by: the loopback names, the bound
    name or address (a wildcard bind: this machine's host name and FQDN) and ``extra``
    (``--allowed-host``, repeatable). ``None`` (any name) only where ``extra`` holds ``*``.

    A page in a local browser that resolves ``evil.example`` to this machine (DNS rebinding) is refused on
    every bind, a wildcard one included."""
    import socket

    extra = {h.strip().lower().strip("[]") for h in extra}
    bad = sorted(h for h in extra if not _HOST_NAME.match(h))
    if bad:
        raise CatalogError(f"--allowed-host {bad[0]!r}: not a host name or address (or * for any)")
    if "*" in extra:
        return None
    hosts = {*LOOPBACK_NAMES, *extra}
    if bound in WILDCARD_BINDS:
        hosts |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    else:
        hosts.add(bound.lower().strip("[]"))
    return hosts


def _hostname(value: str) -> str:
    """``host[:port]`` / ``[v6]:port`` -> the host name, lower-cased."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def check_browser_safety(headers: Any, hosts: "set[str] | None") -> None:
    """Refuse a state-changing request a web page could forge: a body that is not JSON (415; a form or
    ``text/plain`` POST needs no CORS preflight), a ``Host`` not in ``hosts`` (421; :func:`allowed_hosts`),
    or an ``Origin`` of another site (403).

    Raises:
        RequestError: naming the header.
    """
    from urllib.parse import urlsplit

    ctype = (headers.get("content-type") or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise RequestError(415, "content-type", f"must be application/json, got {ctype or 'none'!r}")
    host = _hostname(headers.get("host") or "")
    if hosts is not None and host not in hosts:
        raise RequestError(421, "host", f"{host!r} is not a name this server answers to ({sorted(hosts)}; "
                           "--allowed-host adds one)")
    origin = headers.get("origin")
    if origin:
        origin_host = (urlsplit(origin).hostname or "").lower()
        if origin_host != host and not (hosts is not None and origin_host in hosts):
            raise RequestError(403, "origin", f"cross-site request from {origin!r} refused")


def json_depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests arrays / objects deeper than ``limit`` (iterative)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def parse_json_body(raw: bytes) -> Any:
    """A request body as JSON: 400 if it is not JSON, 422 if it nests deeper than :data:`MAX_JSON_DEPTH`.

    Raises:
        RequestError: naming ``body``.
    """
    too_deep = RequestError(422, "body", f"nested deeper than {MAX_JSON_DEPTH} levels (the JSON depth limit)")
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(400, "body", f"not valid JSON ({e})") from None
    except RecursionError:
        raise too_deep from None
    if json_depth_over(body, MAX_JSON_DEPTH):
        raise too_deep
    return body


def mcp_transport_security(hosts: "set[str] | None") -> Any:
    """The MCP SDK's DNS-rebinding protection for the same names as the REST checks (``None``: off)."""
    from mcp.server.transport_security import TransportSecuritySettings

    if hosts is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = [f"[{h}]" if ":" in h else h for h in sorted(hosts)]
    return TransportSecuritySettings(
        allowed_hosts=[p for n in names for p in (n, f"{n}:*")],
        allowed_origins=[p for n in names for scheme in ("http", "https")
                         for p in (f"{scheme}://{n}", f"{scheme}://{n}:*")])


def create_app(pipeline_dir: "str | Path", *, catalog_dir: "str | Path | None" = None,
               limits: Optional[Limits] = None, host: str = "127.0.0.1",
               admin_token: Optional[str] = None, extra_hosts: Iterable[str] = ()) -> Any:
    """The FastAPI app (REST + MCP at ``/mcp``); the pipeline loads in the background on start-up.
    ``host`` is where it will listen: requests must name it, a loopback name or one of ``extra_hosts``
    (:func:`allowed_hosts`, REST and MCP alike); on a bind beyond loopback ``/admin/reload`` needs
    ``admin_token`` (without one it is off: 403)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    limits = limits or Limits()
    hosts = allowed_hosts(host, extra_hosts)
    admin_off = not admin_token and not _is_loopback(host)
    service = SearchService(pipeline_dir, catalog_dir=catalog_dir, limits=limits)
    mcp = build_mcp_server(service)
    mcp_app = mcp.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                      max_request_body_size=limits.max_body_bytes, host=host,
                                      transport_security=mcp_transport_security(hosts))

    def load_in_background(app: Any) -> None:
        try:
            service.load()
            log.info("ready: %s over %d tools (%s)", service.current.name, service.current.n_tools,
                     service.index_dir)
        except Exception:  # noqa: BLE001 - reported by /health; `toolret serve` then exits non-zero
            log.exception("loading %s failed", service.index_dir)
            server = getattr(app.state, "uvicorn_server", None)
            if server is not None:
                server.should_exit = True

    @contextlib.asynccontextmanager
    async def lifespan(app: Any):
        loop = asyncio.get_running_loop()
        threading.Thread(target=load_in_background, args=(app,), name="toolret-load", daemon=True).start()
        tasks: set = set()  # the loop keeps only weak references to tasks

        def on_hup() -> None:
            async def run() -> None:
                try:
                    out = await service.reload()
                    log.info("SIGHUP: reloaded %s", out["current"])
                except RequestError as e:
                    log.error("SIGHUP reload refused: %s", e.body()["detail"])
            task = loop.create_task(run())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError, AttributeError):
            loop.add_signal_handler(signal.SIGHUP, on_hup)
        try:
            async with mcp.session_manager.run():
                yield
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError, AttributeError):
                loop.remove_signal_handler(signal.SIGHUP)
            service.close()

    app = FastAPI(title="toolret", lifespan=lifespan,
                  description="tool retrieval for agents: REST /search and MCP (streamable HTTP) at /mcp")
    app.state.service = service

    @app.exception_handler(RequestError)
    async def refused(_: Request, e: RequestError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    async def json_body(request: Request, allowed: set, required: bool = True, fields: tuple = ()) -> dict:
        raw = await request.body()
        if not raw.strip() and not required:
            return {}
        return check_search_arguments(parse_json_body(raw), allowed, fields)

    @app.get("/health")
    async def health() -> JSONResponse:
        status, body = service.health()
        headers = {"Retry-After": str(limits.retry_after_s)} if status == 503 else None
        return JSONResponse(body, status_code=status, headers=headers)

    @app.post("/search", openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"type": "object", "required": ["queries"], "properties": {
            "queries": {"type": "array", "items": {"type": "string"}},
            "k": {"type": "integer", "default": 5}, "include_schema": {"type": "boolean", "default": False}}}}}}})
    async def search(request: Request) -> JSONResponse:
        check_browser_safety(request.headers, hosts)
        body = await json_body(request, {"queries", "k", "include_schema"}, fields=("queries",))
        include_schema = body.get("include_schema", False)
        loaded, results = await service.search(body["queries"], body.get("k", 5), include_schema=include_schema)
        return JSONResponse({"pipeline": loaded.name, "n_tools": loaded.n_tools, "results": results})

    @app.post("/admin/reload", openapi_extra={"requestBody": {"required": False, "content": {"application/json": {
        "schema": {"type": "object", "properties": {"index": {"type": "string"}, "catalog": {"type": "string"}}}}}}})
    async def reload(request: Request) -> dict:
        check_browser_safety(request.headers, hosts)
        if admin_off:
            raise RequestError(403, None, f"admin endpoints are off: bound to {host!r} beyond loopback without "
                               "--admin-token (or $TOOLRET_ADMIN_TOKEN); SIGHUP still reloads")
        if admin_token:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {admin_token}".encode()):
                raise RequestError(401, "authorization", "missing or wrong bearer token")
        elif not _is_loopback(request.client.host if request.client else None):
            raise RequestError(403, None, "reload is allowed from loopback only unless --admin-token is set")
        body = await json_body(request, {"index", "catalog"}, required=False)
        for key in ("index", "catalog"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise RequestError(422, key, "must be a directory path")
        return await service.reload(body.get("index"), body.get("catalog"))

    for route in mcp_app.routes:  # the SDK's streamable-HTTP endpoint, beside the REST routes
        app.router.routes.append(route)
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    return app


def serve(pipeline_dir: "str | Path", host: str = "127.0.0.1", port: int = 8000, *,
          catalog_dir: "str | Path | None" = None, limits: Optional[Limits] = None,
          admin_token: Optional[str] = None, extra_hosts: Iterable[str] = ()) -> None:
    """Run the app with uvicorn until SIGTERM / SIGINT (graceful: requests in flight finish)."""
    import uvicorn

    limits = limits or Limits()
    app = create_app(pipeline_dir, catalog_dir=catalog_dir, limits=limits, host=host, admin_token=admin_token,
                     extra_hosts=extra_hosts)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    log.setLevel(logging.INFO)  # the root logger may be the MCP SDK's (WARNING): ready / reload lines still show
    if not admin_token and not _is_loopback(host):
        log.warning("bound to %s beyond loopback without --admin-token: POST /admin/reload is off (SIGHUP "
                    "reloads)", host)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info",
                                           timeout_graceful_shutdown=int(limits.timeout_s) + 5))
    app.state.uvicorn_server = server
    server.run()
    service: SearchService = app.state.service
    if service.state == "failed":
        raise CatalogError(f"could not serve {pipeline_dir}: {service.error}")


__all__ = ["MAX_JSON_DEPTH", "BodyLimit", "allowed_hosts", "check_browser_safety", "create_app", "json_depth_over",
           "parse_json_body", "serve"]
