"""A method's LLM: a ``CachedGenerator`` over an engine built on first use (shared by Re-Invoke and QTA).

``cfg`` is the method's config section; it names the model and backend settings (``llm_model``,
``llm_device``, ``llm_batch_size``, ``llm_num_threads``, ``cache_dir``). Subclasses choose the engine
(:meth:`LazyCachedLLM.build`) and may adapt the built generator before it is cached (:meth:`prepare`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from toolret.config import cache_home
from toolret.llm.cache import CachedGenerator
from toolret.llm.engines import build_generator
from toolret.llm.shards import ShardStore, StoreFirstGenerator, store_root


def llm_cache_path(cfg: Any) -> Path:
    """One JSONL cache per LLM (records are keyed by prompt, model and sampling, so every catalog --
    and every method -- shares it); under the machine's cache home by default."""

    root = Path(cfg.cache_dir) if cfg.cache_dir else cache_home() / "llm"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", cfg.llm_model) or "model"
    return root / f"{safe}.jsonl"


class LazyCachedLLM:
    """``generator`` may be any ``toolret.llm.base.Generator`` (tests pass a tiny or fake one); it is
    wrapped in the JSONL cache at ``cache_path`` unless it already is a ``CachedGenerator``.

    ``shards``: answer from the committed generation shards (:mod:`toolret.llm.shards`) first and build
    the engine only for what they lack (a method whose prompts go to the plain base model sets it)."""

    shards = False

    def __init__(self, cfg: Any, cache_path: str | Path | None = None, generator=None) -> None:
        self.cfg = cfg
        self.cache_path = Path(cache_path) if cache_path else llm_cache_path(cfg)
        self._inner = generator
        self._cached = None

    def build(self):
        """The engine (default: the local transformers backend)."""

        return build_generator("transformers", self.cfg.llm_model, device=self.cfg.llm_device,
                               batch_size=self.cfg.llm_batch_size, num_threads=self.cfg.llm_num_threads)

    def prepare(self, inner):
        """Adapt the built (or injected) generator before it is cached."""
        return inner

    def engine_name(self) -> str:
        """The engine :meth:`build` uses (it names the shards this LLM may answer from)."""
        return "transformers"

    def record_models(self) -> list[dict]:
        """The generator a result record names: its ``engine`` and, once built here, ``revision`` and device."""
        entry: dict = {"role": "generator", "name": self.store_model(), "engine": self.engine_name()}
        if self._cached is not None:
            if getattr(self._cached, "revision", None):
                entry["revision"] = str(self._cached.revision)
            if getattr(self.cfg, "llm_device", None):
                entry["device"] = str(self.cfg.llm_device)
        return [entry]

    def store_model(self) -> str:
        """The generator's name in the committed shards."""
        return self.cfg.llm_model

    def store_dir(self) -> Path:
        """Where its committed shards live: ``data/generations/<model slug>``."""

        return store_root(self.store_model())

    def _cached_engine(self):
        inner = self.prepare(self._inner if self._inner is not None else self.build())
        cached = inner if isinstance(inner, CachedGenerator) else CachedGenerator(inner, self.cache_path)
        self._engine = cached.inner
        return cached

    @property
    def engine(self):
        """The engine itself (built on first use; no cache, no shards in front of it)."""
        if getattr(self, "_engine", None) is None:
            self._cached_engine()
        return self._engine

    @property
    def generator(self):
        if self._cached is None:
            if self.shards and self._inner is None:

                store = ShardStore(self.store_dir(), self.store_model(), self.engine_name())
                self._cached = StoreFirstGenerator(store, self._cached_engine)
            else:
                self._cached = self._cached_engine()
        return self._cached

    @property
    def stats(self) -> dict[str, int]:
        g = self._cached
        if g is None:
            return {"hits": 0, "generated": 0}
        if isinstance(g, StoreFirstGenerator):  # a sample the committed shards held is a cache hit
            inner = dict(g.inner.stats) if g.built else {"hits": 0, "generated": 0}
            return {**inner, "hits": inner["hits"] + g.stats["shard_hits"]}
        return dict(g.stats)

    def describe(self) -> dict[str, Any]:
        g = self.generator
        return {"model_id": g.model_id, "revision": g.revision}
