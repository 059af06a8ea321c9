"""Helpers for the serving tests: real `toolret serve` processes on free ports, plain HTTP calls, the
saved fixture pipelines and what their own search answers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from toolret.config import apply_overrides, validate_params
from toolret.pipeline import Pipeline, build_pipeline
from toolret.roles import Corpus


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: Any = None, *, raw: bytes | None = None, headers: dict | None = None,
         timeout: float = 60) -> tuple[int, dict, Any]:
    """``(status, headers, parsed JSON or text)``; HTTP errors are answers, not exceptions."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, hdrs, payload = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        status, hdrs, payload = e.code, dict(e.headers), e.read()
    try:
        return status, hdrs, json.loads(payload)
    except ValueError:
        return status, hdrs, payload.decode(errors="replace")


def build_index(catalog, out: Path, method: str = "bm25", overrides: dict | None = None) -> Path:
    """Fit, index and save a pipeline on ``catalog`` (as `toolret index` does for one variant)."""
    params = validate_params({})
    if overrides:
        params = apply_overrides(params, overrides)
    pipe = build_pipeline(method, catalog, params)
    pipe.fit(catalog)
    pipe.index(Corpus.from_catalog(catalog))
    pipe.save(out)
    return out


def pipeline_hits(index_dir: Path, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
    """The saved pipeline's own answer, loaded afresh: ``[(tool id, score), ...]`` per query."""
    ranking = Pipeline.load(index_dir).search(queries, k)
    return [[(ranking.tool_ids[i], float(s)) for i, s in zip(ranking.indices[r], ranking.scores[r]) if i >= 0]
            for r in range(len(queries))]


class Server:
    """``toolret serve`` as a child process (stderr to ``log``); ``stop()`` sends SIGTERM."""

    def __init__(self, index: Path, log: Path, *args: str, env: dict | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._log_file = open(log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolret.cli", "serve", "--index", str(index), "--port", str(self.port), *args],
            stdout=self._log_file, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def wait_listening(self, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                assert self.proc.poll() is None, f"server exited early:\n{self.log_tail()}"
                assert time.time() < deadline, f"server did not listen:\n{self.log_tail()}"
                time.sleep(0.1)

    def wait_ready(self, timeout: float = 90) -> dict:
        self.wait_listening(timeout)
        deadline = time.time() + timeout
        while True:
            status, _, body = http("GET", self.base + "/health", timeout=5)
            if status == 200:
                return body
            assert status == 503, (status, body)
            assert time.time() < deadline, f"server not ready:\n{self.log_tail()}"
            time.sleep(0.1)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._log_file.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
