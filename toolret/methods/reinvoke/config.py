"""Re-Invoke settings (one flat dataclass, the paper's defaults) and how ``params.yaml`` maps onto it.

Paper defaults (Sec. 4.3): 10 synthetic queries per tool sampled at temperature 0.7, expanded copies
``"Documentation: <doc> Query: <q>"`` (append mode), the tool's representation is the MEAN over its
copies, intent extraction on, multi-view ranking. Choices the paper leaves open are ours and are
written down here:

- ``top_p=0.95`` for the query generator ("other parameters remain at default"; 0.95 is the common
  default of text-bison and of our prompt module);
- the intent extractor decodes greedily (one extraction per query, deterministic);
- BM25 backbone: every expanded copy is one BM25 document; a tool's score is the mean (or max) of its
  copies' BM25 scores -- the sparse analogue of averaging copy embeddings (BM25 scores are linear in
  the document's term weights);
- ``synthetic_only`` copies are the synthetic query text alone;
- a tool whose generations all fail to parse keeps one copy: its plain document (counted);
- an intent output that does not parse falls back to the raw user query (counted);
- HyDE: one greedy hypothetical document per query, searched document-to-document (the query itself
  is not mixed in, as in the Re-Invoke paper's description of its HyDE baseline).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

BACKBONES = ("dense", "bm25")
AGGREGATIONS = ("mean", "max")
EXPANSIONS = ("append", "synthetic_only")


@dataclass(frozen=True)
class ReInvokeConfig:
    """Everything that determines a Re-Invoke run (besides the backbone's own bm25/dense params).

    Attributes:
        backbone: ``dense`` (bi-encoder from ``params.dense``) or ``bm25`` (``params.bm25``).
        query_generator: expand tool documents with synthetic queries (Sec. 3.1).
        intent_extractor: replace the user query by its extracted intents (Sec. 3.2).
        n_queries: synthetic queries per tool used for the index (the first ``n`` samples).
        generate_queries: how many are generated (default and minimum: n_queries; the ablations
            1/5/10 reuse the first n of one 10-sample artifact).
        aggregation: ``mean`` or ``max`` over a tool's expanded copies.
        expansion: ``append`` ("Documentation: <doc> Query: <q>") or ``synthetic_only`` ("<q>").
        temperature, top_p, seed: query-generator sampling.
        query_max_new_tokens, intent_max_new_tokens, hyde_max_new_tokens: generation budgets.
        max_intents: at most this many intents per query are used.
        llm_model: a ``toolret.llm.models.KNOWN_MODELS`` name or a local HF folder.
        llm_batch_size, llm_num_threads, llm_device: backend settings (num_threads None = $TOOLRET_LLM_THREADS
            or all CPUs, fastest on an idle box; 1 is much faster on a shared, loaded 2-core box, where
            2 threads spin against other jobs).
        cache_dir: where the LLM JSONL caches live (default ``data/llm_cache/reinvoke``).
        embedding_cache_dir: where dense embeddings of expanded copies and intents persist across runs
            (default ``data/embed_cache``; ``"off"``: memory only). Datasets sharing a corpus (the six
            ToolBench groups) then encode their copies once. A cache, not a setting: results do not
            depend on it beyond the last float bits (see ``toolret.retrieval.embedding_store``).
    """

    backbone: str = "dense"
    query_generator: bool = True
    intent_extractor: bool = True
    n_queries: int = 10
    generate_queries: int | None = None
    aggregation: str = "mean"
    expansion: str = "append"
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int = 0
    query_max_new_tokens: int = 48
    intent_max_new_tokens: int = 96
    hyde_max_new_tokens: int = 80
    max_intents: int = 10
    llm_model: str = "smollm2-135m-instruct"
    llm_batch_size: int = 64
    llm_num_threads: int | None = None
    llm_device: str = "cpu"
    cache_dir: str | None = None
    embedding_cache_dir: str | None = None

    def __post_init__(self) -> None:
        if self.backbone not in BACKBONES:
            raise ValueError(f"backbone must be one of {BACKBONES}, got {self.backbone!r}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.expansion not in EXPANSIONS:
            raise ValueError(f"expansion must be one of {EXPANSIONS}, got {self.expansion!r}")
        if self.n_queries < 1:
            raise ValueError("n_queries must be >= 1")
        if self.generate_queries is None or self.generate_queries < self.n_queries:
            object.__setattr__(self, "generate_queries", self.n_queries)

    def replace(self, **changes: Any) -> ReInvokeConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_params(cls, params: dict[str, Any] | None, **overrides: Any) -> ReInvokeConfig:
        """Build from ``params.yaml``'s ``reinvoke:`` section (unknown keys ignored), then
        ``reinvoke.per_dataset[<dataset>]`` when ``dataset=`` is given, then explicit overrides."""
        section = dict((params or {}).get("reinvoke", {}) or {})
        dataset = overrides.pop("dataset", None)
        if dataset is not None:  # recorded protocol deviations, e.g. fewer queries per tool on ToolBench
            section.update((section.get("per_dataset", {}) or {}).get(dataset, {}) or {})
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in section.items() if k in known}
        values.update({k: v for k, v in overrides.items() if k in known})
        return cls(**values)


def parse_overrides(pairs: list[str] | None) -> dict[str, Any]:
    """``["n_queries=5", "aggregation=max", "intent_extractor=false"]`` -> typed overrides."""
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"override {pair!r} is not key=value")
        key, value = pair.split("=", 1)
        out[key.strip()] = yaml.safe_load(value)
    known = {f.name for f in dataclasses.fields(ReInvokeConfig)}
    unknown = sorted(set(out) - known)
    if unknown:
        raise ValueError(f"unknown Re-Invoke setting(s) {unknown}; known: {sorted(known)}")
    return out
