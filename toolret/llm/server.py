"""Serve a local LLM engine over the OpenAI API (``toolret serve-llm``).

Puts any ``Generator`` (transformers, llama.cpp) behind::

    GET  /health[?reset_peak=true] -> {"model", "revision", "requests", "rejected", "in_flight", "max_in_flight"}
    GET  /v1/models            -> {"object": "list", "data": [{"id": <model_id>, ...}]}
    POST /v1/chat/completions  {messages, max_tokens, temperature, top_p, seed, n, stop, repetition_penalty}
    POST /v1/completions       {prompt, ...same}

so that the HTTP backend (:mod:`toolret.llm.openai_backend`) and any OpenAI client can use it, on this
machine or on a GPU box. Concurrent requests are micro-batched: a worker thread (the only one touching
the engine) collects what arrives within ``batch_window_s`` (up to ``max_batch`` samples with the same
decoding settings) and runs it as one batch. Seeds: with ``seed`` given, sample 0 is drawn with exactly
that seed (the HTTP backend sends ``sample_seed(...)`` there, so a served sample equals the local one)
and sample ``j > 0`` with ``sample_seed(seed, "", j)``; without it, the engine's own derivation.
Back-pressure: beyond ``max_pending`` requests in flight the server answers 503 (clients retry with
backoff). ``max_in_flight`` is the peak since start or since the last ``/health?reset_peak=true``.
"""

# no `from __future__ import annotations`: FastAPI reads the endpoint annotations at runtime
import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Optional, Union

from toolret.llm.base import Generation, SampleRequest, SamplingParams, sample_seed


class MicroBatcher:
    """One worker thread runs the engine; callers block on a future for their samples."""

    def __init__(self, generator: Any, max_batch: int = 64, batch_window_s: float = 0.01) -> None:
        self.generator = generator
        self.max_batch = max_batch
        self.batch_window_s = batch_window_s
        self._queue: "queue.Queue[tuple[list[SampleRequest], SamplingParams, Future]]" = queue.Queue()
        threading.Thread(target=self._loop, name="llm-batcher", daemon=True).start()

    def submit(self, requests: list, params: SamplingParams) -> list:
        fut: Future = Future()
        self._queue.put((requests, params, fut))
        return fut.result()

    def _collect(self, pending: list) -> list:
        if not pending:
            pending.append(self._queue.get())
        deadline = time.monotonic() + self.batch_window_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                pending.append(self._queue.get(timeout=left))
            except queue.Empty:
                break
        return pending

    def _loop(self) -> None:
        pending: list = []
        while True:
            pending = self._collect(pending)
            params = pending[0][1]
            batch, rest, size = [], [], 0
            for item in pending:
                if item[1] == params and (not batch or size + len(item[0]) <= self.max_batch):
                    batch.append(item)
                    size += len(item[0])
                else:
                    rest.append(item)
            pending = rest
            requests = [r for reqs, _, _ in batch for r in reqs]
            try:
                out: list = [None] * len(requests)
                for chunk in self.generator.iter_generate(requests, params):
                    for pos, g in chunk:
                        out[pos] = g
                start = 0
                for reqs, _, fut in batch:
                    fut.set_result(out[start:start + len(reqs)])
                    start += len(reqs)
            except Exception as e:  # noqa: BLE001 - handed to every waiting request
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)


def create_llm_app(generator: Any, *, max_batch: int = 64, batch_window_s: float = 0.01,
                   max_pending: int = 1024) -> Any:
    from fastapi import FastAPI, HTTPException
    from pydantic import BaseModel, Field

    batcher = MicroBatcher(generator, max_batch=max_batch, batch_window_s=batch_window_s)
    stats = {"requests": 0, "rejected": 0, "in_flight": 0, "max_in_flight": 0}
    lock = threading.Lock()

    class Message(BaseModel):
        role: str
        content: str

    class Body(BaseModel):
        model: Optional[str] = None
        max_tokens: int = Field(64, ge=1, le=8192)
        temperature: float = Field(0.0, ge=0)
        top_p: float = Field(1.0, gt=0, le=1)
        seed: Optional[int] = None
        n: int = Field(1, ge=1, le=128)
        stop: Union[str, list[str], None] = None
        repetition_penalty: float = Field(1.0, gt=0)

    class ChatBody(Body):
        messages: list[Message] = Field(min_length=1)

    class TextBody(Body):
        prompt: str

    app = FastAPI(title="toolret LLM server", description=f"OpenAI-compatible API over {generator.model_id}")

    def run(prompt: Any, body: Body) -> list[Generation]:
        stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
        params = SamplingParams(max_new_tokens=body.max_tokens, temperature=body.temperature, top_p=body.top_p,
                                stop=stop, repetition_penalty=body.repetition_penalty)
        if body.seed is None:
            reqs = [SampleRequest(prompt, j) for j in range(body.n)]
        else:
            reqs = [SampleRequest(prompt, j, body.seed if j == 0 else sample_seed(body.seed, "", j))
                    for j in range(body.n)]
        with lock:
            stats["requests"] += 1
            if stats["in_flight"] >= max_pending:
                stats["rejected"] += 1
                raise HTTPException(503, f"busy: {stats['in_flight']} requests in flight (max_pending "
                                         f"{max_pending}); retry later", headers={"Retry-After": "1"})
            stats["in_flight"] += 1
            stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
        try:
            return batcher.submit(reqs, params)
        except Exception as e:  # noqa: BLE001
            raise HTTPException(500, f"generation failed: {type(e).__name__}: {e}") from None
        finally:
            with lock:
                stats["in_flight"] -= 1

    def usage(gens: list[Generation]) -> dict:
        n = sum(g.n_tokens for g in gens)
        return {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n}

    @app.get("/health")
    def health(reset_peak: bool = False) -> dict:
        with lock:
            out = {"model": generator.model_id, "revision": generator.revision, **stats}
            if reset_peak:
                stats["max_in_flight"] = stats["in_flight"]
            return out

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": generator.model_id, "object": "model", "owned_by": "toolret",
                                            "revision": generator.revision}]}

    @app.post("/v1/chat/completions")
    def chat(body: ChatBody) -> dict:
        gens = run([m.model_dump() for m in body.messages], body)
        return {"id": f"chatcmpl-{gens[0].prompt_hash[:16]}", "object": "chat.completion", "created": int(time.time()),
                "model": generator.model_id,
                "choices": [{"index": j, "message": {"role": "assistant", "content": g.text},
                             "finish_reason": g.finish_reason} for j, g in enumerate(gens)],
                "usage": usage(gens)}

    @app.post("/v1/completions")
    def completions(body: TextBody) -> dict:
        gens = run(body.prompt, body)
        return {"id": f"cmpl-{gens[0].prompt_hash[:16]}", "object": "text_completion", "created": int(time.time()),
                "model": generator.model_id,
                "choices": [{"index": j, "text": g.text, "finish_reason": g.finish_reason} for j, g in enumerate(gens)],
                "usage": usage(gens)}

    return app


def serve_llm(generator: Any, host: str = "127.0.0.1", port: int = 8080, *, max_batch: int = 64,
              batch_window_s: float = 0.01, max_pending: int = 1024) -> None:
    import uvicorn

    uvicorn.run(create_llm_app(generator, max_batch=max_batch, batch_window_s=batch_window_s,
                               max_pending=max_pending),
                host=host, port=port, log_level="warning")
