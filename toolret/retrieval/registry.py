"""Method names -> retriever builders; the one place `toolret evaluate`, `toolret index` and DVC stages
look methods up. Every builder takes the catalog (for artifacts such as a fine-tuned model keyed by
dataset) and the parameters from ``params.yaml``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolret.catalog.model import Catalog, CatalogError
from toolret.config import data_dir
from toolret.retrieval.base import Retriever


def _bm25(catalog: Catalog, params: dict[str, Any], model: str | None) -> Retriever:
    from toolret.retrieval.bm25 import BM25Config, BM25Retriever

    p = params.get("bm25", {})
    return BM25Retriever(BM25Config(k1=p.get("k1", 1.2), b=p.get("b", 0.75), stopwords=p.get("stopwords", "en")))


def _dense_config(params: dict[str, Any], model: str | None):
    from toolret.retrieval.dense import DenseConfig

    p = params.get("dense", {})
    return DenseConfig(model=model or p.get("model", "all-MiniLM-L6-v2"), batch_size=p.get("batch_size", 64),
                       max_seq_length=p.get("max_seq_length", 256), device=p.get("device", "cpu"))


def _dense(catalog: Catalog, params: dict[str, Any], model: str | None) -> Retriever:
    from toolret.retrieval.dense import DenseRetriever

    return DenseRetriever(_dense_config(params, model))


def finetuned_model_dir(dataset: str) -> Path:
    return data_dir() / "models" / dataset / "dense-ft"


def _dense_ft(catalog: Catalog, params: dict[str, Any], model: str | None) -> Retriever:
    """``model`` is the fine-tune artifact directory (holding ``model/`` and ``finetune.json``); it is
    trained on the catalog's train split when absent, never modified when present."""
    from toolret.retrieval.dense import DenseRetriever

    folder = Path(model) if model else finetuned_model_dir(catalog.name)
    if not (folder / "model").is_dir():
        if model:
            raise CatalogError(f"dense-ft: {folder} is not a fine-tune artifact (no model/ inside)")
        if not catalog.split("train"):
            raise CatalogError(f"dense-ft: dataset {catalog.name!r} has no training split to fine-tune on")
        from toolret.retrieval.finetune import finetune

        finetune(catalog, folder, finetune_config(params))
    from dataclasses import replace

    config = replace(_dense_config(params, str(folder / "model")), max_seq_length=finetune_config(params).max_seq_length)
    retriever = DenseRetriever(config)
    retriever.name = "dense-ft"
    return retriever


def finetune_config(params: dict[str, Any]):
    from toolret.retrieval.finetune import FinetuneConfig

    p = params.get("finetune", {})
    known = set(FinetuneConfig.__dataclass_fields__)
    extra = {"model": params.get("dense", {}).get("model", "all-MiniLM-L6-v2"),
             "device": params.get("dense", {}).get("device", "cpu")}
    return FinetuneConfig(**{**extra, **{k: v for k, v in p.items() if k in known}})


METHODS: dict[str, Callable[[Catalog, dict[str, Any], str | None], Retriever]] = {
    "bm25": _bm25,
    "dense": _dense,
    "dense-ft": _dense_ft,
}


def register_method(name: str, builder: Callable[[Catalog, dict[str, Any], str | None], Retriever]) -> None:
    """Add a method (used by the method sub-packages: reinvoke, qta, ...)."""
    METHODS[name] = builder


def build_retriever(method: str, catalog: Catalog, params: dict[str, Any], model: str | None = None) -> Retriever:
    _load_method_plugins()
    if method not in METHODS:
        raise CatalogError(f"unknown method {method!r}; choose one of {sorted(METHODS)}")
    return METHODS[method](catalog, params, model)


def available_methods() -> list[str]:
    _load_method_plugins()
    return sorted(METHODS)


def _load_method_plugins() -> None:
    """Import the method sub-packages so they register themselves (cheap: heavy imports are lazy)."""
    import importlib
    import pkgutil

    import toolret.methods as methods_pkg

    for info in pkgutil.iter_modules(methods_pkg.__path__):
        importlib.import_module(f"toolret.methods.{info.name}")


def load_index(path: str | Path) -> Retriever:
    """Load a saved index directory (``index.json`` names the retriever class)."""
    path = Path(path)
    meta = json.loads((path / "index.json").read_text(encoding="utf-8"))
    kind = meta["retriever"]
    if kind == "bm25":
        from toolret.retrieval.bm25 import BM25Retriever

        return BM25Retriever.load(path)
    if kind in ("dense", "dense-ft"):
        from toolret.retrieval.dense import DenseRetriever

        r = DenseRetriever.load(path)
        r.name = kind
        return r
    raise CatalogError(f"{path / 'index.json'}: unknown retriever {kind!r}")
