"""Re-Invoke's generated data as versioned artifacts (DVC outputs).

- ``data/reinvoke/<ds>/synthetic_queries.jsonl``: one line per (tool, sample):
  ``{"tool_id", "sample_index", "query", "status", "raw", "finish_reason", "n_tokens", "doc_sha"}``
- ``data/reinvoke/<ds>/intents.jsonl``: one line per test query:
  ``{"query_id", "text", "intents", "status", "fallback", "raw", "finish_reason", "n_tokens"}``
- ``data/reinvoke/<ds>/hyde.jsonl``: one line per test query: ``{"query_id", "text", "document", ...}``

Each file has a ``<name>.meta.json`` sidecar (config, model id + revision, prompt versions, parse-status
counts, generation/cached counts, seconds). Files are written atomically (``toolret.atomic``): a killed
run leaves the previous artifact; its finished generations are already in the LLM JSONL cache
(``<cache home>/llm/<model>.jsonl``, outside the work tree and DVC's outputs, so ``dvc repro`` never deletes it), so the
re-run only generates what is missing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolret.catalog.model import Catalog
from toolret.errors import CatalogError
from toolret.jsonl_artifacts import meta_path, read_jsonl, write_jsonl
from toolret.methods.reinvoke.config import ReInvokeConfig
from toolret.methods.reinvoke.generation import (LazyLLM, extract_intents, generate_synthetic_queries, hyde_documents,
                                                 prompt_versions, status_counts)


def doc_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _meta(kind: str, catalog: Catalog, cfg: ReInvokeConfig, llm: LazyLLM, records, seconds: float,
          extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The artifact's meta (deterministic: what made it) and its run info (seconds, cache hits)."""
    described = llm.describe()
    meta = {"kind": kind, "dataset": catalog.name, "config": cfg.to_dict(),
            "llm": {k: described[k] for k in ("model_id", "revision")},
            "prompt_versions": prompt_versions(), "counts": status_counts(records), **(extra or {})}
    meta["run_info"] = {"llm_calls": llm.stats, "seconds": round(seconds, 1), "cache": described["cache"]}
    return meta


def build_synthetic_queries(catalog: Catalog, cfg: ReInvokeConfig, out: str | Path | None = None,
                            docs: str = "original", llm: LazyLLM | None = None) -> tuple[list[dict], dict]:
    """Generate ``cfg.generate_queries`` synthetic queries for every tool of ``catalog``."""
    llm = llm or LazyLLM(cfg)
    documents = catalog.docs(docs)
    t0 = time.perf_counter()
    records = generate_synthetic_queries(llm, catalog.tool_ids, documents, cfg)
    shas = {t: doc_sha(d) for t, d in zip(catalog.tool_ids, documents)}
    for r in records:
        r["doc_sha"] = shas[r["tool_id"]]
    meta = _meta("synthetic_queries", catalog, cfg, llm, records, time.perf_counter() - t0,
                 {"docs": docs, "n_tools": len(documents)})
    if out is not None:
        write_jsonl(out, records, meta)
    return records, meta


def _build_per_query(kind: str, generate, catalog: Catalog, cfg: ReInvokeConfig, out: str | Path | None,
                     split: str, llm: LazyLLM | None, summarize=None) -> tuple[list[dict], dict]:
    """One LLM record per judged query of ``split`` (intents, HyDE documents), written with its meta;
    ``summarize(records)`` adds kind-specific fields to the meta."""
    llm = llm or LazyLLM(cfg)
    queries = catalog.split(split)
    t0 = time.perf_counter()
    records = generate(llm, [q.text for q in queries], cfg, [q.id for q in queries])
    meta = _meta(kind, catalog, cfg, llm, records, time.perf_counter() - t0, {"split": split})
    if summarize is not None:
        meta.update(summarize(records))
    if out is not None:
        write_jsonl(out, records, meta)
    return records, meta


def build_intents(catalog: Catalog, cfg: ReInvokeConfig, out: str | Path | None = None, split: str = "test",
                  llm: LazyLLM | None = None) -> tuple[list[dict], dict]:
    """Extract the intents of every judged query of ``split``."""
    return _build_per_query("intents", extract_intents, catalog, cfg, out, split, llm,
                            lambda rs: {"mean_intents": sum(len(r["intents"]) for r in rs) / max(1, len(rs))})


def build_hyde(catalog: Catalog, cfg: ReInvokeConfig, out: str | Path | None = None, split: str = "test",
               llm: LazyLLM | None = None) -> tuple[list[dict], dict]:
    """Write a hypothetical tool document for every judged query of ``split`` (HyDE baseline)."""
    return _build_per_query("hyde", hyde_documents, catalog, cfg, out, split, llm)


def check_synthetic_records(records: Sequence[dict], tool_ids: Sequence[str], documents: Sequence[str] | None,
                            n: int) -> None:
    """Refuse an artifact that does not cover the catalog (or was generated from other documents)."""
    have: dict[str, int] = {}
    shas: dict[str, str] = {}
    for r in records:
        have[r["tool_id"]] = max(have.get(r["tool_id"], 0), r["sample_index"] + 1)
        if "doc_sha" in r:
            shas[r["tool_id"]] = r["doc_sha"]
    short = [t for t in tool_ids if have.get(t, 0) < n]
    if short:
        raise CatalogError(f"synthetic-query artifact has fewer than {n} samples for {len(short)} tools "
                           f"(first {short[0]!r}); regenerate with generate_queries >= {n}")
    if documents is not None and shas:
        changed = [t for t, d in zip(tool_ids, documents) if t in shas and shas[t] != doc_sha(d)]
        if changed:
            raise CatalogError(f"synthetic-query artifact was generated from other documents for {len(changed)} "
                               f"tools (first {changed[0]!r})")


# artifact file -> (key in load_matching's result, generation settings it depends on, prompt, record view)
_ARTIFACTS = {
    "synthetic_queries": ("synthetic", ("llm_model", "llm_engine", "temperature", "top_p", "seed", "query_max_new_tokens"),
                          "reinvoke_query_generation", lambda records: records),
    "intents": ("intents", ("llm_model", "llm_engine", "intent_max_new_tokens", "max_intents"), "reinvoke_intent_extraction",
                lambda records: {r["text"]: r["intents"] for r in records}),
    "hyde": ("hyde", ("llm_model", "llm_engine", "hyde_max_new_tokens"), "hyde_tool_document",
             lambda records: {r["text"]: r["document"] for r in records}),
}


def load_artifact(path: str | Path, cfg: ReInvokeConfig) -> Any:
    """The records of an artifact file generated with ``cfg``'s generation settings and the current
    prompt version, in the view its consumer uses (synthetic: records; intents / hyde: ``{text: output}``);
    ``None`` when absent or generated differently (the component then asks the cached LLM)."""

    path = Path(path)
    name = path.name.removesuffix(".jsonl")
    key, settings, prompt, view = _ARTIFACTS[name]
    meta_file = meta_path(path)
    if not (path.is_file() and meta_file.is_file()):
        return None
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    made = meta.get("config", {})
    if any(made.get(k) != getattr(cfg, k) for k in settings):
        return None
    if meta.get("prompt_versions", {}).get(prompt) != prompt_versions().get(prompt):
        return None
    if key == "synthetic" and (made.get("generate_queries") or 0) < cfg.n_queries:
        return None  # too few samples per tool
    return view(read_jsonl(path))


def load_synthetic(path: str | Path, cfg: ReInvokeConfig) -> list[dict] | None:
    return load_artifact(path, cfg)
