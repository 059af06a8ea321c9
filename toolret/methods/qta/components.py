"""QTA's query rewriter on the common method shape (``QueryRewriter``: fit / rewrite / save / load).

- ``qta-rewriter`` (trained): ``fit`` samples and scores the preference data of the catalog's train
  split (an artifact; reused when it matches) and trains one LoRA adapter per ``train_m`` by DPO (an
  artifact: ``<models>/<dataset>/qta/m<m>``; never retrained when present); ``rewrite`` writes one
  greedy rewrite per query with the adapter merged into the local LLM (cached like every LLM output).
- ``qta-base`` (zero-shot, the untrained reference policy, the paper's "fixed LLM"): the same prompt on
  the base LLM; its ``fit`` writes the preference data (the sampling half of training) when it was
  built with an output path (``toolret fit --component qta-base --out .../preferences.jsonl``).

Both write one greedy rewrite per user query, and ``rewrites - 1`` sampled ones where ``rewrites`` > 1; the
query's and the rewrites' rankings are fused by weighted RRF (``search``, ``query_weight``). An output that does
not parse falls back to the user query (``stats["fallback_reasons"]`` counts why).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.atomic import atomic_directory
from toolret.catalog.model import Catalog
from toolret.errors import CatalogError
from toolret.jsonl_artifacts import read_jsonl, write_jsonl
from toolret.llm.models import ensure_local_model
from toolret.methods.qta.config import QTAConfig
from toolret.methods.qta.generation import (INIT_ADAPTER, PROMPT_VERSION, QTALLM, adapter_sha, rewrite_queries,
                                            sample_rewrites)
from toolret.methods.qta.preferences import build_preferences, dpo_pairs, load_preferences, preference_key
from toolret.methods.qta.training import train_adapter, training_key
from toolret.pipeline import rows_of
from toolret.registry import COMPONENT_FILE, write_component_meta
from toolret.retrieval.dense import DenseRetriever
from toolret.retrieval.fusion import weighted_rrf


def copies_query(query: str, record: dict) -> bool:
    """A usable rewrite that is its query verbatim (surrounding whitespace aside); a fallback is not one."""
    return not record.get("fallback") and record["rewrite"].strip() == query.strip()


class QTARewriter:
    """The QTA rewriter. ``adapter_root``: the adapter artifact folder (``None``: the zero-shot base LLM).

    Args:
        config: QTA settings (``params.qta``).
        documents: the tool documents T_sub is sampled from (the ``qta.docs`` variant of the catalog).
        tool_ids: their tool ids.
        adapter_root: folder holding one adapter per m (``m10/`` ...); ``None`` = zero-shot.
        preferences: the preference-data JSONL (read, or written by ``fit`` when absent / stale).
        write_preferences: ``fit`` only writes the preference data (``qta-base`` with an output path).
        retriever: the frozen retriever the reward ranks with (built from ``dense_config`` when ``None``).
        llm: a :class:`QTALLM` factory ``adapter -> QTALLM`` (tests inject tiny models).
        outputs: rewrite records already known (``text -> record``).
        frozen: the adapters were trained elsewhere (``qta.adapter_from``): ``fit`` trains nothing.
        init_adapter: ``fit`` trains on top of this saved adapter (merged first; the new adapter keeps a copy).
    """

    name = "qta-rewriter"

    def __init__(self, config: QTAConfig | None = None, *, documents: Sequence[str] = (), tool_ids: Sequence[str] = (),
                 adapter_root: str | Path | None = None, preferences: str | Path | None = None,
                 write_preferences: bool = False, docs: str = "original", dense_config=None, retriever=None,
                 llm=None, outputs: Mapping[str, dict] | None = None, model_folder: str | Path | None = None,
                 frozen: bool = False, init_adapter: str | Path | None = None) -> None:
        self.config = config or QTAConfig()
        self.documents, self.tool_ids = list(documents), list(tool_ids)
        self.adapter_root = Path(adapter_root) if adapter_root else None
        self.preferences = Path(preferences) if preferences else None
        self.write_preferences = write_preferences
        self.docs = docs
        self.dense_config = dense_config
        self._retriever = retriever
        self._llm_factory = llm or (lambda adapter: QTALLM(self.config, adapter))
        self._llm: QTALLM | None = None
        self._outputs: dict[str, dict] = dict(outputs or {})
        self.model_folder = model_folder
        self.frozen = frozen  # adapters come from elsewhere (cross-dataset): fit never trains
        self.init_adapter = Path(init_adapter) if init_adapter else None
        self.stats: dict[str, Any] = {"llm_outputs": 0, "fallback": 0, "fallback_reasons": {}}
        self._served: set[str] = set()  # queries rewritten so far (stats: how many rewrites copy their query)
        self._slots: list[list[str]] | None = None  # the last rewrite()'s fused texts per query (for fuse())

    # ------------------------------------------------------------------ artifacts
    @property
    def trained(self) -> bool:
        return self.adapter_root is not None

    def adapter_dir(self, m: int | None = None) -> Path:
        if self.adapter_root is None:
            raise CatalogError("qta-base has no adapter")
        return self.adapter_root / self.config.adapter_name(m)

    def _retriever_model(self) -> str:
        return getattr(getattr(self.retriever, "config", None), "model", "") or type(self.retriever).__name__

    @property
    def retriever(self):
        if self._retriever is None:

            self._retriever = DenseRetriever(self.dense_config)
        return self._retriever

    def preference_records(self, catalog: Catalog) -> list[dict]:
        """The preference data of ``catalog``'s train split: the stored artifact when it matches, else sampled
        (and written to the artifact path)."""

        key = preference_key(catalog, self.config, self._retriever_model(), self.docs)
        if self.preferences is not None:
            stored = load_preferences(self.preferences, key, self.config.rounds)
            if stored is not None:
                return stored
        self.retriever.index(catalog.tool_ids, catalog.docs(self.docs))
        records, _ = build_preferences(catalog, self.config, self._llm_factory(None), self.retriever, self.preferences,
                                       docs=self.docs, retriever_model=self._retriever_model())
        return records

    def fit(self, catalog: Catalog) -> None:
        """``qta-base`` built with an output path: write the preference data. ``qta-rewriter``: train every
        adapter of ``train_m`` that is absent (preference data sampled first when needed)."""
        if self.write_preferences:
            self.preference_records(catalog)
            return
        if not self.trained or self.frozen:
            return  # zero-shot, or adapters trained on another catalog: nothing to learn here
        missing = [m for m in self.config.train_m if not self._adapter_ready(m)]
        if not missing:
            return
        if self.init_adapter is not None and not (self.init_adapter / "adapter_config.json").is_file():
            # checked before any cost (sampling the preference data, converting the rewriter: minutes)
            raise CatalogError(f"qta: no adapter at {self.init_adapter} to train on top of; fit it first")

        records = self.preference_records(catalog)
        folder = self.model_folder or ensure_local_model(self.config.llm_model)
        for m in missing:
            pairs = dpo_pairs(records, m, self.config.pair_rule)
            if not pairs:
                raise CatalogError(f"qta: no preference pairs in the first {m} rounds of {catalog.name!r} under "
                                   f"pair_rule {self.config.pair_rule!r}: nothing to train on")
            train_adapter(pairs, self.config, m, self.adapter_dir(m), model_folder=folder,
                          run_name=f"{catalog.name}/{self.config.adapter_name(m)}",
                          extra={"dataset": catalog.name, "train_queries": len(catalog.split("train"))},
                          init_adapter=self.init_adapter, committed=self.committed_checkpoint(m))

    def committed_checkpoint(self, m: int) -> Path | None:
        """Where the training of the adapter for ``m`` exports its checkpoints for another session: beside the
        preference data (``data/qta/<catalog>/checkpoints/<adapter folder>/<adapter>``, kept by git, outside the
        adapters' DVC output); ``None`` without a preference-data path."""
        if self.preferences is None or self.adapter_root is None:
            return None
        return self.preferences.parent / "checkpoints" / self.adapter_root.name / self.config.adapter_name(m)

    def _adapter_ready(self, m: int) -> bool:
        """An adapter for ``m`` exists; one trained with other settings is an error (never silently reused)."""
        folder = self.adapter_dir(m)
        report = folder / "qta.json"
        if not report.is_file():
            return False
        made = json.loads(report.read_text(encoding="utf-8")).get("training")
        init = self.init_adapter or (folder / INIT_ADAPTER if (folder / INIT_ADAPTER).is_dir() else None)
        wanted = json.loads(json.dumps(training_key(self.config, m, init)))
        if made != wanted:
            diff = sorted(k for k in set(made or {}) | set(wanted) if (made or {}).get(k) != wanted.get(k))
            raise CatalogError(f"{folder}: adapter trained with other settings ({diff}); delete it to retrain, "
                               "or point --model at another adapter folder")
        return True

    # ------------------------------------------------------------------ rewrite
    @property
    def llm(self) -> QTALLM:
        if self._llm is None:
            adapter = None
            if self.trained:
                adapter = self.adapter_dir()
                if not self._adapter_ready(self.config.m):
                    raise CatalogError(f"qta: no adapter at {adapter}; fit it first (`toolret fit --component "
                                       "qta-rewriter ...`, or `toolret evaluate`, which trains what is absent)")
            self._llm = self._llm_factory(adapter)
        return self._llm

    def outputs_for(self, texts: Sequence[str]) -> list[dict]:
        """Each query's record: its greedy rewrite and, with ``rewrites`` > 1, ``samples`` (the sampled ones)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._outputs]
        if missing:
            if not self.documents:
                raise CatalogError(f"{self.name}: no stored rewrite for {len(missing)} queries and no tool documents "
                                   f"to prompt with (first {missing[0]!r})")
            reasons = Counter(self.stats["fallback_reasons"])
            for rec in rewrite_queries(self.llm, missing, self.documents, self.config):
                self._outputs[rec["text"]] = rec
                self.stats["llm_outputs"] += 1
                if rec["fallback"]:
                    self.stats["fallback"] += 1
                    reasons[rec["reason"]] += 1
            self.stats["fallback_reasons"] = dict(reasons)
        extra = self.config.rewrites - 1
        short = [t for t in dict.fromkeys(texts) if len(self._outputs[t].get("samples", ())) < extra]
        if short:
            if not self.documents:
                raise CatalogError(f"{self.name}: no stored sampled rewrites for {len(short)} queries and no tool "
                                   f"documents to prompt with (first {short[0]!r})")
            for t, samples in zip(short, sample_rewrites(self.llm, short, self.documents, self.config, extra)):
                self._outputs[t]["samples"] = samples
                self.stats["sampled_rewrites"] = self.stats.get("sampled_rewrites", 0) + len(samples)
        self._served.update(texts)
        self.stats["rewritten_queries"] = len(self._served)
        self.stats["copies_query"] = sum(copies_query(t, self._outputs[t]) for t in self._served)
        return [self._outputs[t] for t in texts]

    def slots(self, query: str, record: dict) -> list[str]:
        """The texts whose rankings are fused for ``query``, one per weight of :meth:`slot_weights`: the query
        (``query_and_rewrite``), the greedy rewrite, then the ``rewrites - 1`` sampled ones (a text may repeat)."""
        rewrites = [record["rewrite"], *(r["rewrite"] for r in record.get("samples", ())[:self.config.rewrites - 1])]
        return rewrites if self.config.search == "rewrite" else [query, *rewrites]

    def slot_weights(self) -> list[float]:
        """RRF weights of the slots: the query's ``query_weight``, the rewrites sharing the rest (``search:
        rewrite``: the rewrites alone, equal weights)."""
        n = self.config.rewrites
        if self.config.search == "rewrite":
            return [1.0 / n] * n
        return [self.config.query_weight, *[(1.0 - self.config.query_weight) / n] * n]

    def rewrite(self, queries: Sequence[str]) -> list[list[str]]:
        """Each query's distinct search texts, the query first under ``search: query_and_rewrite`` (a rewrite that
        copies it, or another rewrite, is searched once; :meth:`fuse` counts it with every slot it fills)."""
        recs = self.outputs_for(list(queries))
        self._slots = [self.slots(q, rec) for q, rec in zip(queries, recs)]
        return [list(dict.fromkeys(slots)) for slots in self._slots]

    def fuse(self, groups: Sequence[Sequence[str]], ranking, k: int, query_ids: Sequence[str]):
        """The slots' rankings fused by weighted RRF (:meth:`slot_weights`) for the groups the last :meth:`rewrite`
        returned (``ranking`` ranks every tool for every text, rows in ``groups`` order)."""

        slots = self._slots
        if slots is None or len(slots) != len(groups):
            raise CatalogError(f"{self.name}: fuse() needs the groups of the last rewrite() call")
        first = np.concatenate([[0], np.cumsum([len(g) for g in groups])[:-1]]).astype(np.int64)
        rows = np.array([[start + list(g).index(t) for t in texts] for start, g, texts in zip(first, groups, slots)],
                        dtype=np.int64)
        qids = list(query_ids)
        return weighted_rrf([rows_of(ranking, rows[:, j], qids) for j in range(rows.shape[1])], self.slot_weights(), k)

    def write_artifact(self, catalog: Catalog, split: str, out: str | Path) -> dict[str, Any]:
        """Rewrite every judged query of ``split`` into ``out`` (JSONL + meta; ``toolret rewrite``)."""

        queries = catalog.split(split)
        records = self.outputs_for([q.text for q in queries])
        rows = [{"query_id": q.id, **r} for q, r in zip(queries, records)]
        meta = {"kind": "qta_rewrites", "dataset": catalog.name, "split": split, "config": self.config.to_dict(),
                "adapter": adapter_sha(self.adapter_dir()) if self.trained else None, "prompt_version": PROMPT_VERSION,
                "counts": {"n": len(rows), "fallback": sum(r["fallback"] for r in rows),
                           "reasons": dict(Counter(r["reason"] for r in rows if r["fallback"]))}}
        write_jsonl(out, rows, meta)
        return meta

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        """Stored rewrites, the tool documents, and the adapter (a copy: the saved rewriter serves new queries)."""

        with atomic_directory(path) as tmp:
            rows = list(self._outputs.values())
            (tmp / "outputs.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                               encoding="utf-8")
            (tmp / "documents.json").write_text(json.dumps({"tool_ids": self.tool_ids, "documents": self.documents},
                                                           ensure_ascii=False), encoding="utf-8")
            sha = None
            if self.trained and self.adapter_dir().is_dir():
                shutil.copytree(self.adapter_dir(), tmp / "adapter" / self.config.adapter_name())
                sha = adapter_sha(self.adapter_dir())
            write_component_meta(tmp, self.name, config=self.config.to_dict(), docs=self.docs,
                                 trained=self.trained, adapter_sha=sha)

    @classmethod
    def load(cls, path: str | Path) -> QTARewriter:
        path = Path(path)
        meta = json.loads((path / COMPONENT_FILE).read_text(encoding="utf-8"))
        docs = json.loads((path / "documents.json").read_text(encoding="utf-8"))

        rows = read_jsonl(path / "outputs.jsonl")
        return cls(QTAConfig.model_validate(meta["config"]), documents=docs["documents"], tool_ids=docs["tool_ids"],
                   adapter_root=path / "adapter" if meta.get("trained") else None, docs=meta.get("docs", "original"),
                   outputs={r["text"]: r for r in rows})


__all__ = ["QTARewriter"]
