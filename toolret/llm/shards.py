"""Generations that outlive a machine: committed shards of LLM samples, read before any LLM is built.

A long generation job (Re-Invoke's synthetic queries for thousands of tools) takes longer than a
session, and only git outlives one. It therefore advances in **shards**: small JSONL files under
``data/generations/<model slug>/<job>/``, each written atomically once all of its samples exist, with a
``.meta.json`` sidecar (provenance: model name, model id and revision, engine, quantisation, prompt
versions, sampling settings, seed; and the run's throughput). A shard is never half-written (temp file +
rename), so whatever is on disk can be committed; a killed job resumes from the LLM JSONL cache of its
machine (:mod:`toolret.llm.cache`) and, on a new machine, from the committed shards.

Each shard record is an LLM cache record (:mod:`toolret.llm.cache`) plus ``prompt_key``: the sha256 of
the *unrendered* prompt (a chat as canonical JSON). Lookups use ``prompt_key``, so answering from the
store needs no tokenizer and no model: :class:`StoreFirstGenerator` answers every request the store
holds and builds the real engine only for the rest. A shard is used only when its meta's model name and
engine match the reader's; its records carry the sampling settings and seed in their key.

``n`` is not part of a key: shards holding samples 0-4 of a prompt and a later shard holding 5-9 make
n = 10 together; a run asks the engine only for the missing sample indices.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from toolret.atomic import write_text
from toolret.llm.base import (Generation, Prompt, SampleRequest, SamplingParams, canonical_chat, generate_via_iter,
                              sha256_text)
from toolret.llm.models import model_slug
from toolret.paths import project_dir

log = logging.getLogger(__name__)

GENERATIONS_DIR = "data/generations"
SHARD_GLOB = "shard-*.jsonl"

StoreKey = tuple[str, str, int, int]  # (prompt_key, params key_str, seed, sample_index)


def prompt_key(prompt: Prompt) -> str:
    """sha256 of the unrendered prompt: plain text as is, a chat as canonical JSON."""
    return sha256_text(prompt if isinstance(prompt, str) else "chat:" + canonical_chat(prompt))


def store_root(model: str, project: str | os.PathLike | None = None) -> Path:
    """``<project>/data/generations/<model slug>``: every committed shard of one generator."""

    return Path(project or project_dir()) / GENERATIONS_DIR / model_slug(model)


def _key(rec: dict) -> StoreKey:
    params = rec["params"] if isinstance(rec["params"], str) else json.dumps(rec["params"], sort_keys=True, separators=(",", ":"))
    return (rec["prompt_key"], params, int(rec["seed"]), int(rec["sample_index"]))


class ShardStore:
    """The committed shards of one generator (``model`` name, ``engine``) under ``root``."""

    def __init__(self, root: str | os.PathLike, model: str, engine: str) -> None:
        self.root = Path(root)
        self.model = model
        self.engine = engine
        self._index: dict[StoreKey, dict] = {}
        self.shards: list[Path] = []
        self.ignored: list[str] = []
        self.provenance: dict[str, Any] = {}
        self._load()

    def _load(self) -> None:
        if not self.root.is_dir():
            return
        for path in sorted(self.root.rglob(SHARD_GLOB)):
            meta_file = path.with_suffix(".meta.json")
            if not meta_file.is_file():
                self.ignored.append(f"{path}: no {meta_file.name} (not a finished shard)")
                continue
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            if meta.get("model") != self.model or meta.get("engine") != self.engine:
                self.ignored.append(f"{path}: made by {meta.get('model')!r} on {meta.get('engine')!r}")
                continue
            n = 0
            with open(path, encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                        key = _key(rec)
                        rec["output"]
                    except (ValueError, KeyError, TypeError) as exc:
                        raise ValueError(f"{path}:{lineno}: not a generation record ({exc})") from exc
                    self._index.setdefault(key, rec)
                    n += 1
            if n != meta.get("n_records", n):
                raise ValueError(f"{path}: {n} records, its meta says {meta['n_records']} (a torn shard?)")
            self.shards.append(path)
            self.provenance = {k: meta[k] for k in ("model", "model_id", "revision", "engine") if k in meta}
        if self.ignored:
            log.info("%s: %d shard(s) not used: %s", self.root, len(self.ignored), "; ".join(self.ignored[:3]))

    def __len__(self) -> int:
        return len(self._index)

    def absorb(self, other: "ShardStore") -> int:
        """Answer from ``other``'s records too (read-only: new shards are still written under this store's
        root); returns how many records it added. Stores of another model or engine are refused."""
        if (other.model, other.engine) != (self.model, self.engine):
            raise ValueError(f"{other.root}: shards of {other.model!r} on {other.engine!r}, not "
                             f"{self.model!r} on {self.engine!r}")
        before = len(self._index)
        for key, rec in other._index.items():
            self._index.setdefault(key, rec)
        if not self.provenance:
            self.provenance = dict(other.provenance)
        return len(self._index) - before

    def get(self, pkey: str, params: SamplingParams, sample_index: int) -> dict | None:
        return self._index.get((pkey, params.key_str(), int(params.seed), int(sample_index)))

    def missing(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[SampleRequest]:
        """The samples ``0..params.n-1`` of ``prompts`` the store lacks (each prompt once, in order)."""
        seen: set[str] = set()
        out = []
        for p in prompts:
            k = prompt_key(p)
            if k in seen:
                continue
            seen.add(k)
            out.extend(SampleRequest(p, j) for j in range(params.n) if self.get(k, params, j) is None)
        return out

    def write_shard(self, job: str, records: Sequence[dict], meta: dict[str, Any]) -> Path:
        """Write one finished shard (records + meta sidecar) atomically; its name is the next free
        number in ``job``'s folder plus a hash of its contents (two machines never collide)."""

        if not records:
            raise ValueError("an empty shard")
        folder = self.root / job
        folder.mkdir(parents=True, exist_ok=True)
        body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n" for r in records)
        numbers = [int(m.group(1)) for p in folder.glob(SHARD_GLOB) if (m := re.match(r"shard-(\d+)-", p.name))]
        path = folder / f"shard-{(max(numbers) + 1 if numbers else 0):05d}-{sha256_text(body)[:8]}.jsonl"
        meta = {**meta, "model": self.model, "engine": self.engine, "n_records": len(records)}
        # records first, meta last: a shard counts only once its meta exists
        write_text(path, body)
        write_text(path.with_suffix(".meta.json"), json.dumps(meta, indent=1, sort_keys=True) + "\n")
        for r in records:
            self._index.setdefault(_key(r), r)
        self.shards.append(path)
        return path


def _generation(rec: dict) -> Generation:
    return Generation(text=rec["output"], prompt_hash=rec["prompt_hash"], sample_index=int(rec["sample_index"]),
                      seed=int(rec["sample_seed"]), n_tokens=int(rec.get("n_tokens", -1)),
                      finish_reason=rec.get("finish_reason", "stop"), meta={"cached": True, "shard": True})


_record_job: str | None = None


def record_generations(job: str | None) -> None:
    """From now on in this process, every sample a :class:`StoreFirstGenerator` did not find in its store is
    also written to it as a shard of ``job`` (``None``: stop). Generations made inside an evaluation (QTA's
    rewrites of test queries) become committed shards this way, so a clone answers them without the LLM."""
    global _record_job
    _record_job = job


class StoreFirstGenerator:
    """A ``Generator`` that answers from a :class:`ShardStore` and builds ``make_inner()`` (the cached
    engine) only for requests the store lacks (written to the store as a shard of ``record_job``, when
    set: :func:`record_generations`)."""

    def __init__(self, store: ShardStore, make_inner: Callable[[], Any], record_job: str | None = None) -> None:
        self.store = store
        self._make_inner = make_inner
        self._inner = None
        self.stats = {"shard_hits": 0}
        self.record_job = record_job if record_job is not None else _record_job

    @property
    def inner(self):
        if self._inner is None:
            self._inner = self._make_inner()
        return self._inner

    @property
    def built(self) -> bool:
        return self._inner is not None

    @property
    def model_id(self) -> str:
        return self.inner.model_id if self.built or "model_id" not in self.store.provenance else self.store.provenance["model_id"]

    @property
    def revision(self) -> str:
        return self.inner.revision if self.built or "revision" not in self.store.provenance else self.store.provenance["revision"]

    def render(self, prompt: Prompt) -> str:
        return self.inner.render(prompt)

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[str]:
        return generate_via_iter(self, prompts, params)

    def iter_generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[tuple[int, Generation]]]:
        hits, missing = [], []
        for pos, req in enumerate(requests):
            rec = self.store.get(prompt_key(req.prompt), params, req.sample_index) if req.seed is None else None
            if rec is not None:
                hits.append((pos, _generation(rec)))
            else:
                missing.append(pos)
        self.stats["shard_hits"] += len(hits)
        if hits:
            yield hits
        if missing:
            recorded: list[dict] = []
            for batch in self.inner.iter_generate([requests[p] for p in missing], params):
                if self.record_job:
                    recorded += [shard_record(g, requests[missing[i]], params, self.inner.model_id,
                                              self.inner.revision) for i, g in batch]
                yield [(missing[i], g) for i, g in batch]
            if recorded:
                self.store.write_shard(self.record_job, recorded, {
                    "job": self.record_job, "model_id": self.inner.model_id, "revision": self.inner.revision,
                    "sampling": params.key(), "seed": int(params.seed),
                    "prompts": len({r["prompt_key"] for r in recorded})})


# ------------------------------------------------------------------ the durable job
def shard_record(g: Generation, req: SampleRequest, params: SamplingParams, model_id: str, revision: str) -> dict:
    return {"prompt_key": prompt_key(req.prompt), "prompt_hash": g.prompt_hash, "model_id": model_id,
            "revision": revision, "params": params.key(), "seed": int(params.seed), "sample_index": int(g.sample_index),
            "sample_seed": int(g.seed), "output": g.text, "n_tokens": int(g.n_tokens), "finish_reason": g.finish_reason}


def git_commit(paths: Sequence[Path], message: str, cwd: str | os.PathLike, attempts: int = 20) -> bool:
    """Commit exactly ``paths`` (nothing else staged goes with them); retried while another git command
    holds the index lock. False (logged) when it never succeeded."""
    rel = [str(Path(p).resolve().relative_to(Path(cwd).resolve())) for p in paths]
    for attempt in range(attempts):
        add = subprocess.run(["git", "add", "--", *rel], cwd=cwd, capture_output=True, text=True)
        if add.returncode == 0:
            done = subprocess.run(["git", "commit", "-q", "--no-verify", "-m", message, "--", *rel],
                                  cwd=cwd, capture_output=True, text=True)
            if done.returncode == 0:
                return True
            err = done.stderr + done.stdout
        else:
            err = add.stderr
        if "index.lock" not in err:
            log.error("git commit of %s failed: %s", rel, err.strip())
            return False
        time.sleep(3 + attempt)
    log.error("git commit of %s: index stayed locked", rel)
    return False


def run_durable(store: ShardStore, job: str, prompts: Sequence[Prompt], params: SamplingParams,
                generator, provenance: dict[str, Any], shard_prompts: int = 100,
                on_shard: Callable[[Path, dict], None] | None = None, max_shards: int | None = None) -> dict[str, Any]:
    """Generate the samples ``0..params.n-1`` of ``prompts`` that ``store`` lacks, ``shard_prompts``
    prompts per shard, each shard written once complete (then ``on_shard(path, meta)``).

    ``generator`` is the (cached) engine: a killed run's samples are in its cache, so a re-run makes the
    interrupted shard from them without generating again."""
    from tqdm.auto import tqdm

    todo = store.missing(prompts, params)
    groups: list[list[SampleRequest]] = []
    by_prompt: dict[str, list[SampleRequest]] = {}
    for req in todo:
        by_prompt.setdefault(prompt_key(req.prompt), []).append(req)
    pending = list(by_prompt.values())
    for i in range(0, len(pending), shard_prompts):
        groups.append([r for reqs in pending[i:i + shard_prompts] for r in reqs])
    if max_shards is not None:
        groups = groups[:max_shards]
    summary = {"job": job, "missing_samples": len(todo), "shards_written": 0, "samples": 0, "seconds": 0.0}
    bar = tqdm(total=sum(len(g) for g in groups), desc=f"{job} samples", unit="sample")
    for requests in groups:
        t0 = time.perf_counter()
        load0 = os.getloadavg()[0]
        out: list[dict | None] = [None] * len(requests)
        for batch in generator.iter_generate(requests, params):
            for pos, g in batch:
                out[pos] = shard_record(g, requests[pos], params, generator.model_id, generator.revision)
            bar.update(len(batch))
        if any(r is None for r in out):
            raise RuntimeError(f"{job}: the engine returned no sample for {sum(r is None for r in out)} request(s)")
        seconds = time.perf_counter() - t0
        meta = {**provenance, "job": job, "model_id": generator.model_id, "revision": generator.revision,
                "sampling": params.key(), "seed": int(params.seed), "prompts": len({r["prompt_key"] for r in out}),
                "run_info": {"seconds": round(seconds, 1), "samples_per_s": round(len(out) / max(seconds, 1e-9), 3),
                             "loadavg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)], "cpus": os.cpu_count(),
                             "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
        path = store.write_shard(job, out, meta)  # type: ignore[arg-type]
        meta = {**meta, "n_records": len(out)}
        summary["shards_written"] += 1
        summary["samples"] += len(out)
        summary["seconds"] += seconds
        log.info("%s: %s (%d samples, %.2f samples/s)", job, path.name, len(out), len(out) / max(seconds, 1e-9))
        if on_shard is not None:
            on_shard(path, meta)
    bar.close()
    summary["remaining_samples"] = len(store.missing(prompts, params))
    return summary
