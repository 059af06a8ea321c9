"""The OpenAI-compatible HTTP backend against a real server process (``toolret serve-llm`` on the
default model, started here on 127.0.0.1): served samples equal local ones, the concurrency limit,
back-pressure retried with backoff, timeouts, a clear error when the server is down, and a kill -9
mid-run losing nothing the server answered."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from toolret.llm.base import SampleRequest, SamplingParams, canonical_chat, sample_seed, sha256_text
from toolret.llm.cache import CachedGenerator
from toolret.llm.openai_backend import OpenAIConfig, OpenAIGenerator
from toolret.errors import LLMServerError

from _kill9 import kill_after_first_record

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MAX_PENDING = 4
CHATS = [[{"role": "user", "content": f"Name a {w}."}] for w in ("fruit", "city in France", "colour")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _health(base: str, **q) -> dict:
    qs = "?" + "&".join(f"{k}={v}" for k, v in q.items()) if q else ""
    with urllib.request.urlopen(base.removesuffix("/v1") + "/health" + qs, timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def server(model_folder):
    port = _free_port()
    base = f"http://127.0.0.1:{port}/v1"
    cmd = [sys.executable, "-m", "toolret.cli", "serve-llm", "--model", str(model_folder), "--port", str(port),
           "--batch-size", "8", "--threads", "1", "--max-pending", str(MAX_PENDING)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"serve-llm exited {proc.returncode}: {proc.stdout.read()[-2000:]}")
            try:
                _health(base)
                break
            except OSError:
                if time.time() > deadline:
                    pytest.fail("serve-llm did not come up in 180 s")
                time.sleep(0.3)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _client(base: str, **kw) -> OpenAIGenerator:
    return OpenAIGenerator(OpenAIConfig(model="smollm2-135m-instruct", base_url=base, progress=False, **kw))


def test_served_greedy_equals_local(server, generator):
    params = SamplingParams(max_new_tokens=8, temperature=0.0)
    remote = _client(server, max_concurrency=3).generate(CHATS, params)
    assert remote == generator.generate(CHATS, params)
    assert all(t.strip() for t in remote)


def test_seed_travels_with_each_sample(server, generator):
    """The client sends sample_seed(seed, hash, j); the server draws sample j with exactly it."""
    params = SamplingParams(max_new_tokens=10, temperature=1.0, top_p=0.95, seed=7, n=3)
    client = _client(server, max_concurrency=3)
    remote = client.generate(CHATS[:1], params)
    ph = sha256_text(canonical_chat(CHATS[0]))
    reqs = [SampleRequest(CHATS[0], j, seed=sample_seed(7, ph, j)) for j in range(3)]
    local = [g.text for _, g in sorted(p for chunk in generator.iter_generate(reqs, params) for p in chunk)]
    assert remote == local
    assert len(set(remote)) > 1  # three seeds, three different samples at temperature 1


def test_concurrency_limit_is_respected(server):
    _health(server, reset_peak="true")
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    prompts = [[{"role": "user", "content": f"Count to {i}."}] for i in range(6)]
    before = _health(server)["requests"]
    _client(server, max_concurrency=2).generate(prompts, params)
    h = _health(server)
    assert h["requests"] - before == 6
    assert 1 <= h["max_in_flight"] <= 2


def test_back_pressure_is_retried_with_backoff(server):
    """More requests in flight than the server admits: it answers 503, the client backs off and retries,
    every sample arrives."""
    params = SamplingParams(max_new_tokens=24, temperature=0.0)
    prompts = [[{"role": "user", "content": f"Describe the number {i} in one sentence."}] for i in range(12)]
    rejected = _health(server)["rejected"]
    out = _client(server, max_concurrency=12, max_retries=30, backoff_s=0.05).generate(prompts, params)
    assert len(out) == 12 and all(isinstance(t, str) for t in out)
    assert _health(server)["rejected"] > rejected


def test_timeout_then_clear_error(server):
    # 64 tokens take seconds, far beyond the 0.05 s timeout; the server still generates what it was asked
    # after the client gave up (twice: 400 tokens kept it busy for ~80 s and the next test waited behind it)
    params = SamplingParams(max_new_tokens=64, temperature=0.0)
    client = _client(server, max_concurrency=1, timeout_s=0.05, max_retries=1, backoff_s=0.01)
    with pytest.raises(LLMServerError, match=r"failed after 2 tries .*(timed out|Timeout)"):
        client.generate([[{"role": "user", "content": "Write a long story about a tool catalog."}]], params)


def test_server_down_names_the_url():
    base = f"http://127.0.0.1:{_free_port()}/v1"
    client = _client(base, max_retries=2, backoff_s=0.01)
    t0 = time.time()
    with pytest.raises(LLMServerError, match=rf"{base}/chat/completions failed after 3 tries .*is it running"):
        client.generate(CHATS[:1], SamplingParams(max_new_tokens=4))
    assert time.time() - t0 < 5


def test_no_server_url_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("TOOLRET_LLM_BASE_URL", raising=False)
    with pytest.raises(LLMServerError, match="llm_base_url"):
        OpenAIGenerator(OpenAIConfig(model="m"))


def test_kill_9_mid_run_keeps_what_was_answered(server, tmp_path):
    path = tmp_path / "cache.jsonl"
    landed, w = kill_after_first_record("_http_cache_worker", path, server)
    assert 1 <= len(landed) < 6
    before = _health(server)["requests"]
    cg = CachedGenerator(_client(server, max_concurrency=2), path)
    outs = cg.generate(w.PROMPTS, w.PARAMS)
    assert len(outs) == 6
    assert _health(server)["requests"] - before == 6 - len(landed)  # the answered ones were not asked again
    by_prompt = {r["prompt_hash"]: r["output"] for r in landed}
    for p, o in zip(w.PROMPTS, outs):
        h = sha256_text(canonical_chat(p))
        if h in by_prompt:
            assert o == by_prompt[h]
