"""Generations as data: an append-only JSONL cache in front of any ``Generator``.

Each line is one sample::

    {"prompt_hash", "model_id", "revision", "params" (SamplingParams.key()), "seed",
     "sample_index", "output", "n_tokens", "finish_reason", "created"}

Key = (prompt_hash, model_id, revision, params, seed, sample_index). ``prompt_hash`` is the sha256 of
the *rendered* prompt (chat template applied). ``n`` is not part of the key: n=10 after n=5 reuses the
first five samples.

Crash safety: records are appended, flushed and fsync'ed after every backend batch, so ``kill -9``
loses at most the batch in flight; a re-run reads what landed and generates only the rest. A torn last
line (killed mid-write) is skipped on read, and a newline is written before the next append so new
records never glue onto it. Appends take an exclusive ``flock``; duplicate keys (two writers racing)
are harmless: the first record wins on read.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from toolret.llm.base import (
    Generation,
    Generator,
    Prompt,
    SampleRequest,
    SamplingParams,
    generate_via_iter,
    sample_seed,
    sha256_text,
)

log = logging.getLogger(__name__)

CacheKey = tuple[str, str, str, str, int, int]


def record_key(rec: dict) -> CacheKey:
    params = rec["params"] if isinstance(rec["params"], str) else json.dumps(rec["params"], sort_keys=True, separators=(",", ":"))
    return (rec["prompt_hash"], rec["model_id"], rec["revision"], params, int(rec["seed"]), int(rec["sample_index"]))


def read_records(path: str | os.PathLike) -> tuple[list[dict], int]:
    """All well-formed records of a cache file and the number of unreadable lines skipped."""
    path = Path(path)
    records, bad = [], 0
    if not path.exists():
        return records, 0
    with open(path, "rb") as fh:
        for raw in fh:
            line = raw.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
                record_key(rec)
                rec["output"]
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            records.append(rec)
    return records, bad


class CachedGenerator:
    """Wraps a ``Generator``; only missing samples reach it. Satisfies ``Generator`` itself."""

    def __init__(self, generator: Generator, path: str | os.PathLike) -> None:
        self.inner = generator
        self.path = Path(path)
        self.model_id = generator.model_id
        self.revision = generator.revision
        self._index: dict[CacheKey, dict] = {}
        self.skipped_lines = 0
        self.stats = {"hits": 0, "generated": 0}
        self._load()

    def _load(self) -> None:
        records, bad = read_records(self.path)
        for rec in records:
            self._index.setdefault(record_key(rec), rec)
        self.skipped_lines = bad
        if bad:
            log.warning("%s: skipped %d unreadable line(s) (torn write from an interrupted run?)", self.path, bad)

    def __len__(self) -> int:
        return len(self._index)

    def render(self, prompt: Prompt) -> str:
        return self.inner.render(prompt)

    def _key(self, prompt_hash: str, params: SamplingParams, sample_index: int) -> CacheKey:
        return (prompt_hash, self.model_id, self.revision, params.key_str(), int(params.seed), int(sample_index))

    def lookup(self, prompt: Prompt, params: SamplingParams, sample_index: int = 0) -> dict | None:
        return self._index.get(self._key(sha256_text(self.render(prompt)), params, sample_index))

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[str]:
        return generate_via_iter(self, prompts, params)

    def iter_generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[tuple[int, Generation]]]:
        hits: list[tuple[int, Generation]] = []
        missing_pos: list[int] = []
        pending: dict[CacheKey, int] = {}  # the same sample requested twice is generated once
        dup_of: dict[int, int] = {}
        for pos, req in enumerate(requests):
            ph = sha256_text(self.render(req.prompt))
            key = self._key(ph, params, req.sample_index)
            rec = self._index.get(key)
            if rec is not None:
                hits.append((pos, _to_generation(rec)))
            elif key in pending:
                dup_of[pos] = pending[key]
            else:
                pending[key] = pos
                missing_pos.append(pos)
        self.stats["hits"] += len(hits)
        if hits:
            yield hits
        if not missing_pos:
            return
        sub = [requests[p] for p in missing_pos]
        waiting_dups: dict[int, list[int]] = {}
        for pos, orig in dup_of.items():
            waiting_dups.setdefault(orig, []).append(pos)
        for batch in self.inner.iter_generate(sub, params):
            mapped = [(missing_pos[i], g) for i, g in batch]
            self._append([self._record(g, params) for _, g in mapped])
            self.stats["generated"] += len(mapped)
            extra = [(d, g) for pos, g in mapped for d in waiting_dups.get(pos, [])]
            yield mapped + extra

    def _record(self, g: Generation, params: SamplingParams) -> dict:
        rec = {
            "prompt_hash": g.prompt_hash,
            "model_id": self.model_id,
            "revision": self.revision,
            "params": params.key(),
            "seed": int(params.seed),
            "sample_index": int(g.sample_index),
            "sample_seed": int(g.seed),
            "output": g.text,
            "n_tokens": int(g.n_tokens),
            "finish_reason": g.finish_reason,
            "created": round(time.time(), 3),
        }
        self._index.setdefault(record_key(rec), rec)
        return rec

    def _append(self, records: list[dict]) -> None:
        if not records:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records).encode()
        with open(self.path, "ab+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                fh.seek(0, os.SEEK_END)
                if fh.tell() > 0:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":  # torn last line from a killed writer: terminate it
                        data = b"\n" + data
                fh.seek(0, os.SEEK_END)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _to_generation(rec: dict) -> Generation:
    return Generation(
        text=rec["output"],
        prompt_hash=rec["prompt_hash"],
        sample_index=int(rec["sample_index"]),
        seed=int(rec.get("sample_seed", sample_seed(rec["seed"], rec["prompt_hash"], rec["sample_index"]))),
        n_tokens=int(rec.get("n_tokens", -1)),
        finish_reason=rec.get("finish_reason", "stop"),
        meta={"cached": True},
    )
