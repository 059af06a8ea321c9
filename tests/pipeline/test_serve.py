"""A saved pipeline served by a real `toolret serve` process answers like the pipeline itself."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from toolret.config import validate_params
from toolret.pipeline import Pipeline, build_pipeline
from toolret.roles import Corpus


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_served_pipeline_answers_like_the_saved_one(fixture_catalog_dir, tmp_path):
    from toolret.catalog.registry import load_dataset

    catalog = load_dataset(str(fixture_catalog_dir))
    pipe = build_pipeline("bm25", catalog, validate_params({}))
    pipe.index(Corpus.from_catalog(catalog))
    pipe.save(tmp_path / "p")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "toolret.cli", "serve", "--index", str(tmp_path / "p"),
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    health = json.loads(r.read())
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                assert time.time() < deadline, "server did not start"
                time.sleep(0.2)
        assert health == {"pipeline": "bm25", "n_tools": len(catalog.tools)}
        queries = [q.text for q in catalog.split("test")[:3]]
        status, body = _post(base + "/search", {"queries": queries, "k": 4})
        assert status == 200
        expected = Pipeline.load(tmp_path / "p").search(queries, 4).as_lists()
        assert [[hit["tool_id"] for hit in row] for row in body["results"]] == [expected[str(i)] for i in range(3)]
        status, body = _post(base + "/search", {"queries": ["x"], "k": len(catalog.tools) + 1})
        assert status == 422 and "exceeds" in json.dumps(body)
        status, _ = _post(base + "/search", {"queries": [], "k": 3})
        assert status == 422
    finally:
        proc.terminate()
        proc.wait(timeout=30)
