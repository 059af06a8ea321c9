"""The generator seam: what every LLM backend (local transformers today, a remote
OpenAI-compatible server later) must provide, and the small value types shared by all of them.

Shapes
------
``Generator.generate(prompts, params) -> list[str]`` returns ``len(prompts) * params.n`` texts,
grouped per prompt: the samples of ``prompts[i]`` are ``out[i*n:(i+1)*n]`` in sample order
(``group(out, n)`` reshapes into a list of lists). This is the convenience API.

The primitive every backend implements is ``iter_generate(requests, params)``: it takes explicit
``SampleRequest(prompt, sample_index)`` items and yields, batch by batch, ``(request_position,
Generation)`` pairs. Callers that must persist progress (``CachedGenerator``) consume it batch by
batch; ``generate`` is built on top of it (``generate_via_iter``).

Seeding
-------
Each sample has its own seed, derived from ``(params.seed, prompt_hash, sample_index)`` by
``sample_seed``. It does not depend on the sample's position in the list, on the batch it lands in,
or on ``n``: asking for ``n=10`` after ``n=5`` reproduces the first 5 samples (and the cache reuses
them). A remote backend should pass ``sample_seed(...)`` as the request's ``seed``.

Prompts
-------
A prompt is either a plain string (sent as is, no chat template) or a chat: a list of
``{"role": ..., "content": ...}`` dicts, rendered by the backend (``Generator.render``) with the
model's chat template + generation prompt. The cache key hashes the *rendered* text, so a template
change invalidates the cache. A remote backend would render a chat to canonical JSON instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, Protocol, Union, runtime_checkable

ChatMessage = dict  # {"role": "system"|"user"|"assistant", "content": str}
Prompt = Union[str, list[ChatMessage]]

FinishReason = Literal["stop", "length", "cached"]


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings. ``temperature == 0`` means greedy (``do_sample`` is derived).

    - ``n``: samples per prompt (independent, seeded by ``sample_seed``).
    - ``stop``: extra stop strings; the text is cut before the first one (EOS always stops).
    - ``repetition_penalty``: CTRL-style penalty (1.0 = off) on tokens already in prompt+output;
      small models loop, 1.1-1.2 helps for list outputs.
    """

    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    n: int = 1
    stop: tuple[str, ...] = ()
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.n < 1:
            raise ValueError("n must be >= 1")
        if self.repetition_penalty <= 0:
            raise ValueError("repetition_penalty must be > 0")
        if isinstance(self.stop, list):  # be forgiving: frozen dataclass, normalise to a tuple
            object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def do_sample(self) -> bool:
        return self.temperature > 0

    def key(self) -> dict:
        """What determines ONE sample's output besides prompt, model, seed and sample_index.

        ``n`` and ``seed`` are excluded (seed is stored separately; n only says how many samples).
        When greedy, temperature/top_p are irrelevant and normalised away so equal decodes share
        cache entries.
        """
        d = asdict(self)
        d.pop("n")
        d.pop("seed")
        d["stop"] = list(self.stop)
        if not self.do_sample:
            d["temperature"] = 0.0
            d["top_p"] = 1.0
        return d

    def key_str(self) -> str:
        return json.dumps(self.key(), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class SampleRequest:
    """One sample to generate. ``seed``: an explicit per-sample seed (a served engine receives the
    client's ``sample_seed``); ``None`` derives it with :func:`sample_seed` (see :func:`request_seed`)."""

    prompt: Prompt
    sample_index: int = 0
    seed: int | None = None


@dataclass
class Generation:
    """One generated sample. ``finish_reason``: "stop" (EOS or stop string) or "length"
    (hit ``max_new_tokens``: the text may be cut mid-item; parsers report it as truncated)."""

    text: str
    prompt_hash: str
    sample_index: int
    seed: int
    n_tokens: int
    finish_reason: str
    meta: dict = field(default_factory=dict)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_chat(messages: Sequence[ChatMessage]) -> str:
    """Canonical JSON of a chat (used by backends that do not render templates locally)."""
    return json.dumps([{"role": m["role"], "content": m["content"]} for m in messages], ensure_ascii=False, separators=(",", ":"))


def sample_seed(seed: int, prompt_hash: str, sample_index: int) -> int:
    """Per-sample 63-bit seed, independent of batch composition and list order."""
    h = hashlib.sha256(f"{int(seed)}|{prompt_hash}|{int(sample_index)}".encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


def request_seed(req: SampleRequest, params: SamplingParams, prompt_hash: str) -> int:
    """The seed one sample is drawn with: the request's explicit seed, else the derived one."""
    return int(req.seed) if req.seed is not None else sample_seed(params.seed, prompt_hash, req.sample_index)


def group(outputs: Sequence, n: int) -> list[list]:
    """Reshape a flat ``generate`` result (grouped per prompt) into one list per prompt."""
    if n < 1 or len(outputs) % n:
        raise ValueError(f"{len(outputs)} outputs cannot be grouped by n={n}")
    return [list(outputs[i : i + n]) for i in range(0, len(outputs), n)]


def expand_requests(prompts: Sequence[Prompt], n: int) -> list[SampleRequest]:
    return [SampleRequest(p, j) for p in prompts for j in range(n)]


@runtime_checkable
class Generator(Protocol):
    """What callers program against. ``model_id`` + ``revision`` identify exactly what produced a
    text (they go into cache keys and run metadata)."""

    model_id: str
    revision: str

    def render(self, prompt: Prompt) -> str:
        """The exact text the model conditions on (chat template applied)."""
        ...

    def iter_generate(
        self, requests: Sequence[SampleRequest], params: SamplingParams
    ) -> Iterator[list[tuple[int, Generation]]]:
        """Yield, per internal batch, ``(position in requests, Generation)`` pairs. Every request
        appears exactly once over the whole iteration (order is the backend's choice)."""
        ...

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[str]:
        """``len(prompts) * params.n`` texts, grouped per prompt (see module docstring)."""
        ...


def generate_generations(gen: Generator, prompts: Sequence[Prompt], params: SamplingParams) -> list[Generation]:
    """Like ``generate`` but returns the full ``Generation`` records (finish_reason, n_tokens...)."""
    requests = expand_requests(prompts, params.n)
    out: list[Generation | None] = [None] * len(requests)
    for batch in gen.iter_generate(requests, params):
        for pos, g in batch:
            out[pos] = g
    missing = [i for i, g in enumerate(out) if g is None]
    if missing:
        raise RuntimeError(f"backend returned no generation for {len(missing)} requests")
    return out  # type: ignore[return-value]


def generate_via_iter(gen: Generator, prompts: Sequence[Prompt], params: SamplingParams) -> list[str]:
    return [g.text for g in generate_generations(gen, prompts, params)]


def default_threads(configured: int | None = None) -> int:
    """CPU threads for a local engine: ``configured``, else ``$TOOLRET_LLM_THREADS``, else all usable CPUs.
    (On an oversubscribed box 1 thread is much faster than 2: threads spin-wait for each other.)"""
    import os

    if configured:
        return int(configured)
    env = os.environ.get("TOOLRET_LLM_THREADS")
    if env:
        return int(env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

