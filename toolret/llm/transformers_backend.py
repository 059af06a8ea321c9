"""Local batched generation with transformers (CPU or CUDA).

Why a hand-written decode loop instead of ``model.generate``: ``generate`` samples the whole batch
from one global RNG, so a sampled text depends on which other prompts share its batch. Here every
row has its own ``torch.Generator`` seeded with ``sample_seed(seed, prompt_hash, sample_index)``, and
sampling runs on CPU in float32, so a sample's random stream is the same whatever its batch.

What is guaranteed
------------------
- Same model folder + dtype + device + params + prompt + seed + sample_index + batch layout ->
  identical text (bit-for-bit; CPU kernels are deterministic for a given shape).
- Across different batch compositions, each sample sees the same random numbers; the text is the
  same as long as the logits are. Batched (left-padded) forward passes use different matmul shapes,
  so logits can differ in the last float bits; a near-tie can then flip a token. In practice greedy
  and sampled outputs for short generations match between "alone" and "in a batch" (tested), but
  that is an observation, not a guarantee. The cache (``CachedGenerator``) is what makes reruns
  exactly reproducible.

Speed (2-core CPU, SmolLM2-135M fp32): prompts are sorted by token length so a batch holds similar
lengths (little padding); the prefill computes logits for the last position only; n samples of the
same prompt share one prefill (KV cache rows are duplicated); finished rows are dropped from the KV
cache once enough of them have finished. See ``benchmarks/llm_throughput.py``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from toolret.llm.base import (
    Generation,
    Prompt,
    SampleRequest,
    SamplingParams,
    default_threads,
    generate_via_iter,
    request_seed,
    sha256_text,
)
from toolret.llm.models import DEFAULT_MODEL, KNOWN_MODELS, ensure_local_model, model_revision, set_offline_env

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TransformersConfig:
    model: str = DEFAULT_MODEL  # a KNOWN_MODELS name or a local HF folder
    models_dir: str | None = None  # where known models are materialised (default <cache home>/llm-models)
    device: str = "cpu"  # "cpu" | "cuda" | "cuda:N" | "auto"
    dtype: str = "auto"  # "auto" (fp32 on CPU, bf16 on CUDA) | "float32" | "bfloat16" | "float16"
    batch_size: int = 32  # rows (samples) per forward pass
    max_batch_tokens: int | None = None  # optional cap on rows * (prompt_len + max_new_tokens)
    num_threads: int | None = None  # torch threads; None = $TOOLRET_LLM_THREADS or the CPUs available
    max_prompt_tokens: int = 2048  # longer prompts are cut from the LEFT (keeps the instruction end)
    progress: bool = True  # tqdm bar over batches
    min_shared_prefix: int = 8  # prefill a common token prefix once per batch when at least this long
    preallocate_kv_cache: bool = True  # K/V written into preallocated buffers (False: transformers' torch.cat layers)


def _resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _resolve_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


class TransformersGenerator:
    """``Generator`` backed by a local transformers causal LM."""

    def __init__(self, config: TransformersConfig | None = None, **overrides) -> None:
        import dataclasses

        config = config or TransformersConfig()
        if overrides:
            config = dataclasses.replace(config, **overrides)
        self.config = config
        set_offline_env()
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        # explicit (config / $TOOLRET_LLM_THREADS) or, on CPU, all usable CPUs; thread count can change float rounding
        if config.num_threads is not None or os.environ.get("TOOLRET_LLM_THREADS") or not torch.cuda.is_available():
            n = default_threads(config.num_threads)
            if torch.get_num_threads() != n:
                torch.set_num_threads(n)
        self.device = _resolve_device(config.device)
        self.dtype = _resolve_dtype(config.dtype, self.device)
        t0 = time.perf_counter()
        self.folder = Path(ensure_local_model(config.model, config.models_dir))
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        self.tokenizer.padding_side = "left"
        self.model = AutoModelForCausalLM.from_pretrained(self.folder, dtype=self.dtype).to(self.device)
        self.model.eval()
        self.load_seconds = time.perf_counter() - t0
        self.model_id = config.model if config.model in KNOWN_MODELS else self.folder.name
        dtype_tag = {torch.float32: "", torch.bfloat16: "-bf16", torch.float16: "-fp16"}[self.dtype]
        self.revision = model_revision(self.folder) + dtype_tag
        eos = set()
        for src in (self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id, self.model.config.eos_token_id):
            if isinstance(src, int):
                eos.add(src)
            elif src:
                eos.update(int(x) for x in src)
        self.eos_ids = sorted(eos)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.eos_ids[0]
        self._has_chat_template = bool(getattr(self.tokenizer, "chat_template", None))
        log.info("loaded %s (%s, rev %s) on %s/%s in %.1f s", self.model_id, self.folder, self.revision, self.device, self.dtype, self.load_seconds)

    # ------------------------------------------------------------------ prompts
    def render(self, prompt: Prompt) -> str:
        if isinstance(prompt, str):
            return prompt
        if not self._has_chat_template:
            # Plain fallback for base models without a template.
            return "".join(f"{m['role']}: {m['content']}\n" for m in prompt) + "assistant: "
        return self.tokenizer.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)

    def tokenize(self, text: str) -> list[int]:
        """The token ids the model conditions on for a rendered prompt (cut to ``max_prompt_tokens``)."""
        return self._encode(text)

    def _encode(self, text: str) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > self.config.max_prompt_tokens:
            ids = ids[-self.config.max_prompt_tokens :]
        return ids

    # ------------------------------------------------------------------ API
    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[str]:
        return generate_via_iter(self, prompts, params)

    def iter_generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[tuple[int, Generation]]]:
        from tqdm.auto import tqdm

        items = []  # (pos, ids, prompt_hash, sample_index, seed)
        enc_cache: dict[str, tuple[list[int], str]] = {}
        for pos, req in enumerate(requests):
            text = self.render(req.prompt)
            if text not in enc_cache:
                enc_cache[text] = (self._encode(text), sha256_text(text))
            ids, ph = enc_cache[text]
            items.append((pos, ids, ph, req.sample_index, request_seed(req, params, ph)))
        # Longest first (memory problems show up at once), identical prompts adjacent (shared prefill).
        items.sort(key=lambda it: (-len(it[1]), it[2], it[3]))
        batches = self._make_batches(items, params)
        bar = tqdm(total=len(items), desc=f"generate {self.model_id}", unit="sample", disable=not self.config.progress)
        try:
            for batch in batches:
                texts = self._generate_batch(batch, params)
                out = []
                for (pos, _ids, ph, j, seed), (text, ntok, reason) in zip(batch, texts):
                    out.append((pos, Generation(text, ph, j, seed, ntok, reason)))
                bar.update(len(batch))
                yield out
        finally:
            bar.close()

    def _make_batches(self, items: list, params: SamplingParams) -> list[list]:
        bs = max(1, self.config.batch_size)
        cap = self.config.max_batch_tokens
        batches, cur = [], []
        for it in items:
            if cur and (len(cur) >= bs or (cap and (len(cur) + 1) * (len(cur[0][1]) + params.max_new_tokens) > cap)):
                batches.append(cur)
                cur = []
            cur.append(it)
        if cur:
            batches.append(cur)
        return batches

    # ------------------------------------------------------------------ decoding
    def _generate_batch(self, batch: list, params: SamplingParams) -> list[tuple[str, int, str]]:
        import torch
        from transformers import DynamicCache

        dev = self.device
        # Unique prompts in this batch (rows with the same prompt share the prefill).
        uniq: dict[str, int] = {}
        uniq_ids: list[list[int]] = []
        row_to_uniq = []
        for _pos, ids, ph, _j, _seed in batch:
            if ph not in uniq:
                uniq[ph] = len(uniq_ids)
                uniq_ids.append(ids)
            row_to_uniq.append(uniq[ph])
        U, B = len(uniq_ids), len(batch)
        # Shared token prefix (chat template + instructions + few-shot examples are identical across
        # prompts): prefill it once with one row, then prefill only the suffixes. Layout per row:
        # [prefix][left pads][suffix], pads masked out, positions continue after the prefix.
        P = _common_prefix_len(uniq_ids) if U > 1 else 0
        if P < self.config.min_shared_prefix:
            P = 0
        suffixes = [ids[P:] for ids in uniq_ids]
        S = max(1, max(len(x) for x in suffixes))
        input_ids = torch.full((U, S), self.pad_id, dtype=torch.long)
        smask = torch.zeros((U, S), dtype=torch.long)
        for i, ids in enumerate(suffixes):
            if ids:
                input_ids[i, S - len(ids) :] = torch.tensor(ids, dtype=torch.long)
                smask[i, S - len(ids) :] = 1
        if not smask.any(dim=1).all():  # an empty prompt: condition on the pad/EOS token
            smask[:, -1] = 1
        pos_ids = (P + smask.cumsum(-1) - 1).clamp(min=P)
        attn = torch.cat([torch.ones((U, P), dtype=torch.long), smask], dim=1)
        input_ids, attn, pos_ids = input_ids.to(dev), attn.to(dev), pos_ids.to(dev)

        with torch.inference_mode():
            cache = DynamicCache(config=self.model.config)
            if self.config.preallocate_kv_cache:
                cache = _preallocated(cache, P + S + params.max_new_tokens)
            if P:
                prefix = torch.tensor([uniq_ids[0][:P]], dtype=torch.long, device=dev)
                self.model(input_ids=prefix, past_key_values=cache, use_cache=True, logits_to_keep=1)
                cache.batch_select_indices(torch.zeros(U, dtype=torch.long, device=dev))
            out = self.model(
                input_ids=input_ids, attention_mask=attn, position_ids=pos_ids,
                past_key_values=cache, use_cache=True, logits_to_keep=1,
            )
            logits = out.logits[:, -1, :]
            expand = torch.tensor(row_to_uniq, dtype=torch.long, device=dev)
            if U != B:
                cache.batch_select_indices(expand)
                logits = logits.index_select(0, expand)
                attn = attn.index_select(0, expand)
                pos_ids = pos_ids.index_select(0, expand)
            cache_obj = out.past_key_values if out.past_key_values is not None else cache
            last_pos = pos_ids[:, -1]

            seen = None
            if params.repetition_penalty != 1.0:
                seen = torch.zeros((B, logits.shape[-1]), dtype=torch.bool, device=dev)
                for r in range(B):
                    seen[r, torch.tensor(uniq_ids[row_to_uniq[r]] or [self.pad_id], device=dev)] = True
                seen[:, self.pad_id] = False  # pad == EOS here: never penalise stopping

            gens = None
            if params.do_sample:
                gens = [torch.Generator(device="cpu").manual_seed(it[4]) for it in batch]
            eos = torch.tensor(self.eos_ids, device=dev)

            tokens: list[list[int]] = [[] for _ in range(B)]
            finished = [None] * B  # finish reason per row
            active = list(range(B))  # original row index of each live cache row
            stop_strs = params.stop
            for step in range(params.max_new_tokens):
                if seen is not None:
                    logits = _apply_repetition_penalty(logits, seen, params.repetition_penalty)
                nxt = self._select(logits, params, [gens[r] for r in active] if gens else None)
                nxt_list = nxt.tolist()
                done_mask = torch.isin(nxt, eos).tolist()
                newly_done = 0
                for k, r in enumerate(active):
                    if finished[r] is not None:  # finished earlier, row not yet dropped from the cache
                        continue
                    if done_mask[k]:
                        finished[r] = "stop"
                        newly_done += 1
                        continue
                    tokens[r].append(nxt_list[k])
                    if stop_strs and _hit_stop(self.tokenizer, tokens[r], stop_strs):
                        finished[r] = "stop"
                        newly_done += 1
                    elif step == params.max_new_tokens - 1:
                        finished[r] = "length"
                if step == params.max_new_tokens - 1:
                    break
                keep = [k for k, r in enumerate(active) if finished[r] is None]
                if not keep:
                    break
                if seen is not None:
                    seen.scatter_(1, nxt[:, None], True)
                # Drop finished rows once they are a quarter of the batch (each drop copies the cache).
                n_dead = len(active) - len(keep)
                if n_dead and (n_dead * 4 >= len(active)):
                    idx = torch.tensor(keep, dtype=torch.long, device=dev)
                    cache_obj.batch_select_indices(idx)
                    attn = attn.index_select(0, idx)
                    last_pos = last_pos.index_select(0, idx)
                    nxt = nxt.index_select(0, idx)
                    if seen is not None:
                        seen = seen.index_select(0, idx)
                    active = [active[k] for k in keep]
                attn = torch.cat([attn, torch.ones((attn.shape[0], 1), dtype=attn.dtype, device=dev)], dim=1)
                last_pos = last_pos + 1
                out = self.model(
                    input_ids=nxt[:, None], attention_mask=attn, position_ids=last_pos[:, None],
                    past_key_values=cache_obj, use_cache=True,
                )
                logits = out.logits[:, -1, :]
                cache_obj = out.past_key_values if out.past_key_values is not None else cache_obj

        results = []
        for r in range(B):
            text = self.tokenizer.decode(tokens[r], skip_special_tokens=True)
            if stop_strs:
                cut = min((i for i in (text.find(s) for s in stop_strs if s) if i >= 0), default=-1)
                if cut >= 0:
                    text = text[:cut]
            results.append((text.strip(), len(tokens[r]), finished[r] or "length"))
        return results

    @staticmethod
    def _select(logits, params: SamplingParams, gens):
        import torch

        if not params.do_sample:
            return logits.argmax(dim=-1)
        x = logits.float().cpu() / params.temperature
        if params.top_p < 1.0:
            sorted_x, idx = torch.sort(x, dim=-1, descending=True)
            probs = torch.softmax(sorted_x, dim=-1)
            cum = probs.cumsum(dim=-1)
            remove = (cum - probs) > params.top_p  # keep the smallest prefix reaching top_p (>= 1 token)
            sorted_x = sorted_x.masked_fill(remove, float("-inf"))
            x = torch.full_like(x, float("-inf")).scatter(1, idx, sorted_x)
        probs = torch.softmax(x, dim=-1)
        picks = [int(torch.multinomial(probs[k], 1, generator=g)) for k, g in enumerate(gens)]
        return torch.tensor(picks, dtype=torch.long, device=logits.device)


_LAYER_CLASS = None


def _preallocated_layer_class():
    """A ``DynamicLayer`` that writes new key/value states into a preallocated buffer.

    The stock layer appends with ``torch.cat``, i.e. copies the whole cache of every layer at every
    decode step. Here ``keys`` / ``values`` are views of a ``[batch, heads, capacity, head_dim]``
    buffer (grown by doubling if ever full): same values, same attention inputs, no per-step copy.
    Measured on ToolBench query-generation prompts (~485 tokens): 0.85x the generation time of the
    stock layer with identical texts (``benchmarks/reinvoke_generation_cost.py``).
    """
    global _LAYER_CLASS
    if _LAYER_CLASS is None:
        from transformers.cache_utils import DynamicLayer

        class PreallocatedLayer(DynamicLayer):
            def __init__(self, capacity: int) -> None:
                super().__init__()
                self.capacity, self.length = max(1, capacity), 0
                self._k = self._v = None

            def lazy_initialization(self, key_states, value_states) -> None:
                super().lazy_initialization(key_states, value_states)
                self._k = key_states.new_empty(key_states.shape[:2] + (self.capacity, key_states.shape[-1]))
                self._v = value_states.new_empty(value_states.shape[:2] + (self.capacity, value_states.shape[-1]))

            def _views(self) -> None:
                self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

            def update(self, key_states, value_states, *args, **kwargs):
                if not self.is_initialized:
                    self.lazy_initialization(key_states, value_states)
                end = self.length + key_states.shape[-2]
                if end > self._k.shape[-2]:
                    grow = max(end, 2 * self._k.shape[-2]) - self._k.shape[-2]
                    self._k = _grown(self._k, grow)
                    self._v = _grown(self._v, grow)
                self._k[:, :, self.length : end].copy_(key_states)
                self._v[:, :, self.length : end].copy_(value_states)
                self.length = end
                self._views()
                return self.keys, self.values

            def get_seq_length(self) -> int:
                return self.length

            def batch_select_indices(self, indices) -> None:
                if self.length:
                    self._k, self._v = self._k.index_select(0, indices), self._v.index_select(0, indices)
                    self._views()

            def crop(self, tokens_to_remove: int) -> None:
                raise NotImplementedError("PreallocatedLayer is only used by toolret's own decode loop")

        _LAYER_CLASS = PreallocatedLayer
    return _LAYER_CLASS


def _grown(buf, extra: int):
    """``buf`` with ``extra`` uninitialised positions appended along the sequence axis."""
    out = buf.new_empty(buf.shape[:2] + (buf.shape[2] + extra, buf.shape[3]))
    out[:, :, : buf.shape[2]].copy_(buf)
    return out


def _preallocated(cache, capacity: int):
    """Swap a fresh ``DynamicCache``'s plain layers for preallocated ones (other layer kinds, e.g.
    sliding-window, are left as they are)."""
    from transformers.cache_utils import DynamicLayer

    if cache.layers and all(type(layer) is DynamicLayer for layer in cache.layers):
        cls = _preallocated_layer_class()
        cache.layers = [cls(capacity) for _ in cache.layers]
    return cache


def _common_prefix_len(seqs: list[list[int]]) -> int:
    """Longest common token prefix, leaving every sequence at least one token of suffix."""
    if not seqs:
        return 0
    limit = min(len(x) for x in seqs) - 1
    first = seqs[0]
    n = 0
    while n < limit and all(x[n] == first[n] for x in seqs):
        n += 1
    return max(0, n)


def _apply_repetition_penalty(logits, seen, penalty: float):
    import torch

    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalised, logits)


def _hit_stop(tokenizer, toks: list[int], stops: tuple[str, ...]) -> bool:
    tail = tokenizer.decode(toks[-16:], skip_special_tokens=True)
    return any(s and s in tail for s in stops)
