"""Re-Invoke (Chen et al., 2024): unsupervised tool retrieval with LLM query generation, intent
extraction and multi-view ranking; plus the HyDE baseline.

Registers the methods ``reinvoke`` (dense backbone), ``reinvoke-bm25`` and ``hyde`` with
:mod:`toolret.retrieval.registry`. Importing this package is cheap (no torch / transformers): the
heavy parts load when a retriever indexes or searches.

Settings: ``params.yaml`` section ``reinvoke:`` -> :class:`config.ReInvokeConfig`.
"""

from __future__ import annotations

from typing import Any

from toolret.retrieval.registry import register_method


def _backbone_configs(params: dict[str, Any], model: str | None):
    from toolret.retrieval.registry import _dense_config
    from toolret.retrieval.bm25 import BM25Config

    p = params.get("bm25", {}) or {}
    bm25 = BM25Config(k1=p.get("k1", 1.2), b=p.get("b", 0.75), stopwords=p.get("stopwords", "en"))
    return _dense_config(params, model), bm25


def build(method: str, catalog, params: dict[str, Any], model: str | None = None, **overrides: Any):
    """A Re-Invoke / HyDE retriever for ``catalog`` whose LLM calls go through the dataset's JSONL cache."""
    from toolret.methods.reinvoke.config import ReInvokeConfig
    from toolret.methods.reinvoke.generation import LazyLLM, llm_cache_path
    from toolret.methods.reinvoke.retriever import HydeRetriever, ReInvokeRetriever

    backbone = "bm25" if method.endswith("-bm25") else "dense"
    cfg = ReInvokeConfig.from_params(params, dataset=catalog.name, backbone=backbone, **overrides)
    dense, bm25 = _backbone_configs(params, model)
    llm = LazyLLM(cfg, llm_cache_path(cfg, catalog.name))
    # Artifacts of the DVC stages (e.g. after `dvc pull` on a clean clone) are used when they were made
    # with the same generation settings and documents; anything missing goes through the cached LLM.
    from toolret.config import data_dir
    from toolret.methods.reinvoke.artifacts import load_matching

    art = load_matching(data_dir() / "reinvoke" / catalog.name, cfg)
    if method.startswith("hyde"):
        return HydeRetriever(cfg, dense_config=dense, bm25_config=bm25, llm=llm, documents=art.get("hyde"),
                             name=method)
    return ReInvokeRetriever(cfg, dense_config=dense, bm25_config=bm25, llm=llm, synthetic=art.get("synthetic"),
                             intents=art.get("intents"), name=method)


def _builder(method: str):
    return lambda catalog, params, model=None: build(method, catalog, params, model)


for _name in ("reinvoke", "reinvoke-bm25", "hyde"):
    register_method(_name, _builder(_name))
