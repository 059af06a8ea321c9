"""``Generator`` on llama.cpp (``llama-cpp-python``'s low-level API) over the GGUF a package ships.

Made for fast CPU generation of many samples from long, similar prompts (Re-Invoke's query generator:
~480-token prompts, 316 of them the shared template, 10 samples each):

- **shared prefix once**: the token prefix common to a group of prompts is decoded once into a spare
  sequence and its KV copied (``llama_memory_seq_cp``) to every sequence of the group;
- **one prefill per prompt**: each prompt's remaining tokens are decoded once, and its KV is copied to
  the sequences of its other samples, which all start from the prompt's last logits;
- **batched decoding**: every live sequence of the group advances one token per ``llama_decode``;
- **sampling semantics of the transformers backend**: temperature, then top-p (nucleus), then a draw
  from a per-sample RNG seeded with ``sample_seed(params.seed, prompt_hash, sample_index)`` (so a
  sample does not depend on what it is batched with); ``temperature == 0`` is greedy; the repetition
  penalty counts prompt and output tokens; EOS / end-of-generation tokens and stop strings end a sample.

``model_id`` names the model, ``revision`` the engine and the GGUF file's content hash (its
quantisation included), so cached generations of different engines never mix.
"""

from __future__ import annotations

import ctypes
import logging
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
    sample_seed,
    sha256_text,
)
from toolret.llm.models import DEFAULT_MODEL, KNOWN_MODELS, file_sha256, packaged_gguf

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LlamaCppConfig:
    """Engine settings.

    Attributes:
        model: a ``KNOWN_MODELS`` name (its package's GGUF) or a path to a ``.gguf`` file.
        n_threads: CPU threads (None: ``$TOOLRET_LLM_THREADS`` or all CPUs).
        max_sequences: parallel sequences per decode step (samples of several prompts).
        n_ctx: KV cells shared by all sequences (the prefix is stored once per sequence).
        n_batch: tokens per ``llama_decode`` call during prefill.
        max_prompt_tokens: longer prompts keep their last tokens.
        n_gpu_layers: layers offloaded to a GPU build of llama.cpp (0 on CPU).
        progress: tqdm bar over samples.
    """

    model: str = DEFAULT_MODEL
    n_threads: int | None = None
    max_sequences: int = 64
    n_ctx: int = 32768
    n_batch: int = 512
    max_prompt_tokens: int = 1536
    n_gpu_layers: int = 0
    progress: bool = True


def resolve_gguf(model: str) -> Path:
    if model in KNOWN_MODELS:
        return packaged_gguf(model)
    path = Path(model)
    if path.suffix != ".gguf" or not path.is_file():
        raise FileNotFoundError(f"llama.cpp model {model!r}: not a known model ({sorted(KNOWN_MODELS)}) nor a .gguf file")
    return path


class LlamaCppGenerator:
    """Batched, prefix-sharing llama.cpp generation behind the ``Generator`` protocol."""

    def __init__(self, config: LlamaCppConfig | None = None, **overrides) -> None:
        import dataclasses

        import llama_cpp as L

        self.L = L
        config = config or LlamaCppConfig()
        if overrides:
            config = dataclasses.replace(config, **overrides)
        self.config = config
        self.path = resolve_gguf(config.model)
        n_threads = default_threads(config.n_threads)
        t0 = time.perf_counter()
        L.llama_backend_init()
        mparams = L.llama_model_default_params()
        mparams.n_gpu_layers = config.n_gpu_layers
        self._model = L.llama_model_load_from_file(str(self.path).encode(), mparams)
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {self.path}")
        self._vocab = L.llama_model_get_vocab(self._model)
        cparams = L.llama_context_default_params()
        cparams.n_ctx = config.n_ctx
        cparams.n_batch = config.n_batch
        cparams.n_ubatch = config.n_batch
        cparams.n_seq_max = config.max_sequences + 1  # + the shared-prefix sequence
        cparams.n_threads = cparams.n_threads_batch = n_threads
        if hasattr(cparams, "kv_unified"):
            cparams.kv_unified = True  # sequences share KV cells (prefix copies are cheap)
        self._ctx = L.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            raise RuntimeError("llama.cpp could not create a context")
        self._mem = L.llama_get_memory(self._ctx)
        self.n_vocab = L.llama_vocab_n_tokens(self._vocab)
        self.load_seconds = time.perf_counter() - t0
        self.model_id = config.model if config.model in KNOWN_MODELS else self.path.stem
        self.revision = f"llama.cpp-{file_sha256(self.path)[:12]}"
        self._template = self._chat_template()
        self._bos = self._token_text(L.llama_vocab_bos(self._vocab))
        self._eos = self._token_text(L.llama_vocab_eos(self._vocab))
        log.info("llama.cpp: %s (%s) loaded in %.1f s, %d threads", self.model_id, self.path.name, self.load_seconds, n_threads)

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        try:
            self.L.llama_free(self._ctx)
            self.L.llama_model_free(self._model)
        except Exception:
            pass

    # ------------------------------------------------------------------ prompts
    def _chat_template(self) -> str | None:
        L = self.L
        buf = ctypes.create_string_buffer(1 << 16)
        n = L.llama_model_meta_val_str(self._model, b"tokenizer.chat_template", buf, len(buf))
        return buf.value.decode("utf-8") if n > 0 else None

    def _token_text(self, token: int) -> str:
        buf = ctypes.create_string_buffer(256)
        n = self.L.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
        return buf.raw[: max(n, 0)].decode("utf-8", errors="replace")

    def render(self, prompt: Prompt) -> str:
        """The model's own chat template (from the GGUF metadata) with the generation prompt."""
        if isinstance(prompt, str):
            return prompt
        if not self._template:
            return "".join(f"{m['role']}: {m['content']}\n" for m in prompt) + "assistant: "
        import jinja2

        env = jinja2.Environment(loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True)
        return env.from_string(self._template).render(messages=list(prompt), add_generation_prompt=True,
                                                      bos_token=self._bos, eos_token=self._eos)

    def tokenize(self, text: str) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (self.L.llama_token * cap)()
        n = self.L.llama_tokenize(self._vocab, data, len(data), buf, cap, False, True)
        if n < 0:
            raise RuntimeError(f"tokenization needs {-n} tokens")
        ids = list(buf[:n])
        return ids[-self.config.max_prompt_tokens:] if len(ids) > self.config.max_prompt_tokens else ids

    def detokenize(self, ids: Sequence[int]) -> str:
        out = bytearray()
        buf = ctypes.create_string_buffer(256)
        for t in ids:
            n = self.L.llama_token_to_piece(self._vocab, int(t), buf, len(buf), 0, False)
            out += buf.raw[: max(n, 0)]
        return out.decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ API
    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[str]:
        return generate_via_iter(self, prompts, params)

    def iter_generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[tuple[int, Generation]]]:
        from tqdm.auto import tqdm

        by_prompt: dict[str, dict] = {}
        for pos, req in enumerate(requests):
            text = self.render(req.prompt)
            entry = by_prompt.setdefault(text, {"hash": sha256_text(text), "samples": []})
            entry["samples"].append((pos, req.sample_index, req.seed))
        prompts = [(self.tokenize(t), e["hash"], e["samples"]) for t, e in by_prompt.items()]
        prompts.sort(key=lambda p: p[0])  # lexicographic: neighbours share long prefixes
        groups, cur, used = [], [], 0
        for p in prompts:
            k = len(p[2])
            if k > self.config.max_sequences:  # more samples than sequences: split the prompt's samples
                for i in range(0, k, self.config.max_sequences):
                    groups.append([(p[0], p[1], p[2][i:i + self.config.max_sequences])])
                continue
            if cur and used + k > self.config.max_sequences:
                groups.append(cur)
                cur, used = [], 0
            cur.append(p)
            used += k
        if cur:
            groups.append(cur)
        bar = tqdm(total=len(requests), desc=f"generate {self.model_id} (llama.cpp)", unit="sample",
                   disable=not self.config.progress)
        try:
            for group in groups:
                out = self._generate_group(group, params)
                bar.update(len(out))
                yield out
        finally:
            bar.close()

    # ------------------------------------------------------------------ decoding
    def _decode(self, batch, tokens: list[tuple[int, int, int, bool]]) -> None:
        """Decode ``(token, pos, seq, want_logits)`` items, in ``n_batch`` chunks."""
        L = self.L
        step = self.config.n_batch
        for start in range(0, len(tokens), step):
            chunk = tokens[start:start + step]
            batch.n_tokens = len(chunk)
            for i, (tok, pos, seq, logits) in enumerate(chunk):
                batch.token[i] = tok
                batch.pos[i] = pos
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = seq
                batch.logits[i] = logits
            rc = L.llama_decode(self._ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode failed ({rc}): KV cache full? raise n_ctx (now {self.config.n_ctx})")

    def _sampler(self, params: SamplingParams, seed: int, history: Sequence[int]):
        L = self.L
        chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
        if params.repetition_penalty != 1.0:
            L.llama_sampler_chain_add(chain, L.llama_sampler_init_penalties(-1, params.repetition_penalty, 0.0, 0.0))
        if params.do_sample:
            L.llama_sampler_chain_add(chain, L.llama_sampler_init_temp(params.temperature))
            if params.top_p < 1.0:
                L.llama_sampler_chain_add(chain, L.llama_sampler_init_top_p(params.top_p, 1))
            L.llama_sampler_chain_add(chain, L.llama_sampler_init_dist(seed & 0xFFFFFFFF))
        else:
            L.llama_sampler_chain_add(chain, L.llama_sampler_init_greedy())
        if params.repetition_penalty != 1.0:
            for t in history:  # the penalty sees the prompt's tokens, as in the transformers backend
                L.llama_sampler_accept(chain, t)
        return chain

    def _generate_group(self, group: list, params: SamplingParams) -> list[tuple[int, Generation]]:
        L = self.L
        n_seq = sum(len(samples) for _, _, samples in group)
        shared_seq = n_seq  # a spare sequence holds the group's common prefix
        L.llama_memory_clear(self._mem, True)
        batch = L.llama_batch_init(max(self.config.n_batch, n_seq), 0, 1)
        samplers = []
        try:
            token_lists = [ids for ids, _, _ in group]
            common = _common_prefix_len(token_lists) if len(group) > 1 else 0
            common = min(common, min(len(t) for t in token_lists) - 1)  # every prompt keeps >= 1 own token
            if common > 0:
                self._decode(batch, [(t, p, shared_seq, False) for p, t in enumerate(token_lists[0][:common])])
            seqs = []  # (request pos, prompt hash, sample index, seed, seq id, prompt ids)
            out_tokens: dict[int, list[int]] = {}
            seq = 0
            for ids, ph, samples in group:
                lead = seq
                if common > 0:
                    L.llama_memory_seq_cp(self._mem, shared_seq, lead, 0, common)
                self._decode(batch, [(t, common + i, lead, common + i == len(ids) - 1)
                                     for i, t in enumerate(ids[common:])])
                for k, (pos, j, fixed_seed) in enumerate(samples):
                    if k > 0:
                        L.llama_memory_seq_cp(self._mem, lead, seq, 0, len(ids))
                    s = int(fixed_seed) if fixed_seed is not None else sample_seed(params.seed, ph, j)
                    smpl = self._sampler(params, s, ids)
                    samplers.append(smpl)
                    # every sample of the prompt starts from its last logits (output -1), sampled now, before
                    # the next prompt's prefill replaces them
                    out_tokens[seq] = [int(L.llama_sampler_sample(smpl, self._ctx, -1))]
                    seqs.append((pos, ph, j, s, seq, ids))
                    seq += 1
            finish: dict[int, str] = {}
            stops = params.stop
            live = []
            for s in seqs:
                sid = s[4]
                if self._ended(out_tokens[sid], stops, params):
                    finish[sid] = self._reason(out_tokens[sid], params)
                else:
                    live.append(s)
            while live:
                items = [(out_tokens[s[4]][-1], len(s[5]) + len(out_tokens[s[4]]) - 1, s[4], True) for s in live]
                self._decode(batch, items)
                still = []
                for bi, s in enumerate(live):
                    sid = s[4]
                    tok = L.llama_sampler_sample(samplers[sid], self._ctx, bi)
                    out_tokens[sid].append(int(tok))
                    if self._ended(out_tokens[sid], stops, params):
                        finish[sid] = self._reason(out_tokens[sid], params)
                    else:
                        still.append(s)
                live = still
            results = []
            for pos, ph, j, s, sid, _ids in seqs:
                toks = out_tokens[sid]
                reason = finish[sid]
                if toks and L.llama_vocab_is_eog(self._vocab, toks[-1]):
                    toks = toks[:-1]
                text = self.detokenize(toks)
                for st in stops:
                    cut = text.find(st)
                    if cut >= 0:
                        text, reason = text[:cut], "stop"
                results.append((pos, Generation(text.strip(), ph, j, s, len(toks), reason)))
            return results
        finally:
            for smpl in samplers:
                L.llama_sampler_free(smpl)
            L.llama_batch_free(batch)
            L.llama_memory_clear(self._mem, True)

    def _ended(self, toks: list[int], stops: tuple[str, ...], params: SamplingParams) -> bool:
        if not toks:
            return False
        if self.L.llama_vocab_is_eog(self._vocab, toks[-1]) or len(toks) >= params.max_new_tokens:
            return True
        return bool(stops) and any(st in self.detokenize(toks[-16:]) for st in stops)

    def _reason(self, toks: list[int], params: SamplingParams) -> str:
        if toks and self.L.llama_vocab_is_eog(self._vocab, toks[-1]):
            return "stop"
        return "length" if len(toks) >= params.max_new_tokens else "stop"


def _common_prefix_len(seqs: list[list[int]]) -> int:
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs[1:]):
            return i
    return n
