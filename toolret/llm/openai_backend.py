"""A ``Generator`` that sends every sample to an OpenAI-compatible HTTP server.

Any server speaking the OpenAI API works: vLLM, TGI, llama.cpp's ``llama-server``, or toolret's own
``toolret serve-llm`` (any local engine behind the same API). This is how generation moves to a GPU
box or a cluster without a code change: set the method's ``llm_engine: openai`` and ``llm_base_url``
(or ``$TOOLRET_LLM_BASE_URL``).

Protocol
--------
- A chat prompt goes to ``POST {base_url}/chat/completions`` (``messages``), a plain string prompt to
  ``POST {base_url}/completions`` (``prompt``). One HTTP request per sample (``n = 1``) with
  ``seed = sample_seed(params.seed, prompt_hash, sample_index)``, so a sample does not depend on how
  requests are batched, and a server that honours ``seed`` reproduces it.
- At most ``max_concurrency`` requests are in flight. Results are yielded as they complete, in chunks
  of ``max_concurrency``, so ``CachedGenerator`` appends each chunk to the JSONL cache at once: a run
  killed mid-way keeps every answer it received.
- Connection errors, timeouts and HTTP 408/409/429/5xx are retried ``max_retries`` times with
  exponential backoff (``backoff_s * 2**attempt``); other 4xx fail at once with the server's message.
  A server that stays unreachable raises :class:`LLMServerError` naming the URL.
- Identity: ``model_id = "openai:<model>"``, ``revision`` = the configured ``revision`` (name the
  weights and quantisation there, e.g. ``"q4_k_m"``: it is part of every cache key). Prompts are
  hashed as rendered here: chats as canonical JSON (the server applies its own chat template).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass

from toolret.llm.base import (
    Generation,
    Prompt,
    SampleRequest,
    SamplingParams,
    canonical_chat,
    generate_via_iter,
    request_seed,
    sha256_text,
)
from toolret.errors import LLMServerError

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class OpenAIConfig:
    model: str
    base_url: str | None = None  # e.g. http://127.0.0.1:8080/v1; None = $TOOLRET_LLM_BASE_URL
    revision: str = "unspecified"  # weights/quantisation tag: part of the cache key
    api_key_env: str = "OPENAI_API_KEY"  # sent as a bearer token when set
    max_concurrency: int = 16
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 0.5
    progress: bool = True

    def url(self) -> str:
        url = self.base_url or os.environ.get("TOOLRET_LLM_BASE_URL")
        if not url:
            raise LLMServerError("no LLM server URL: set llm_base_url in params.yaml or $TOOLRET_LLM_BASE_URL "
                                 "(e.g. http://127.0.0.1:8080/v1; `toolret serve-llm` starts one)")
        return url.rstrip("/")


class OpenAIGenerator:
    def __init__(self, config: OpenAIConfig) -> None:
        if config.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.config = config
        self.base_url = config.url()
        self.model_id = f"openai:{config.model}"
        self.revision = config.revision

    # ------------------------------------------------------------------ rendering
    def render(self, prompt: Prompt) -> str:
        return prompt if isinstance(prompt, str) else canonical_chat(prompt)

    # ------------------------------------------------------------------ HTTP
    def _post(self, path: str, body: dict) -> dict:
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.config.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = f"{self.base_url}{path}"
        last = ""
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                time.sleep(self.config.backoff_s * 2 ** (attempt - 1))
            req = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.config.timeout_s) as resp:
                    return json.loads(resp.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                detail = e.read().decode("utf-8", "replace")[:500]
                if e.code not in RETRY_STATUS:
                    raise LLMServerError(f"{url} rejected the request: HTTP {e.code}: {detail}") from None
                last = f"HTTP {e.code}: {detail}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
                reason = getattr(e, "reason", e)
                last = f"{type(reason).__name__}: {reason}"
        raise LLMServerError(f"LLM server {url} failed after {self.config.max_retries + 1} tries ({last}); "
                             "is it running? (`toolret serve-llm` starts a local one)")

    def _one(self, req: SampleRequest, params: SamplingParams, text: str, ph: str) -> Generation:
        seed = request_seed(req, params, ph)
        body: dict = {"model": self.config.model, "max_tokens": params.max_new_tokens,
                      "temperature": params.temperature if params.do_sample else 0.0,
                      "top_p": params.top_p if params.do_sample else 1.0, "seed": seed, "n": 1}
        if params.stop:
            body["stop"] = list(params.stop)
        if params.repetition_penalty != 1.0:
            body["repetition_penalty"] = params.repetition_penalty  # vLLM / llama.cpp / toolret extension
        if isinstance(req.prompt, str):
            resp = self._post("/completions", {**body, "prompt": req.prompt})
        else:
            resp = self._post("/chat/completions", {**body, "messages": [{"role": m["role"], "content": m["content"]}
                                                                         for m in req.prompt]})
        try:
            choice = resp["choices"][0]
            out = choice["text"] if isinstance(req.prompt, str) else choice["message"]["content"]
            ntok = int((resp.get("usage") or {}).get("completion_tokens", 0))
        except (KeyError, IndexError, TypeError) as e:
            raise LLMServerError(f"{self.base_url}: malformed response (missing {e}): {str(resp)[:300]}") from None
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        return Generation(out or "", ph, req.sample_index, seed, ntok, reason)

    # ------------------------------------------------------------------ Generator API
    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[str]:
        return generate_via_iter(self, prompts, params)

    def iter_generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[tuple[int, Generation]]]:
        from tqdm.auto import tqdm

        rendered = [self.render(r.prompt) for r in requests]
        hashes = [sha256_text(t) for t in rendered]
        chunk = self.config.max_concurrency
        bar = tqdm(total=len(requests), desc=f"generate {self.model_id} (http)", unit="sample",
                   disable=not self.config.progress)
        pool = ThreadPoolExecutor(max_workers=self.config.max_concurrency, thread_name_prefix="llm-http")
        try:
            todo = iter(range(len(requests)))
            running = {}
            for pos in todo:  # fill the window
                running[pool.submit(self._one, requests[pos], params, rendered[pos], hashes[pos])] = pos
                if len(running) >= self.config.max_concurrency:
                    break
            done_buf: list[tuple[int, Generation]] = []
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    pos = running.pop(fut)
                    try:
                        done_buf.append((pos, fut.result()))
                    except LLMServerError:
                        if done_buf:  # hand over what was answered (the cache keeps it), then fail
                            bar.update(len(done_buf))
                            yield done_buf
                        raise
                    nxt = next(todo, None)
                    if nxt is not None:
                        running[pool.submit(self._one, requests[nxt], params, rendered[nxt], hashes[nxt])] = nxt
                if len(done_buf) >= chunk or not running:
                    bar.update(len(done_buf))
                    yield done_buf
                    done_buf = []
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            bar.close()
