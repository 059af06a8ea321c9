"""Re-Invoke settings (pydantic models: the paper's defaults are the single source) and ``params.yaml: reinvoke``.

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

from typing import Literal

from pydantic import Field, model_validator

from toolret.config import ComponentSection, GridVariant, StrictModel

# the generator whose outputs are the DVC-tracked artifacts: Qwen2.5-Coder-0.5B-Instruct (packaged GGUF) beat
# SmolLM2-135M-Instruct on RestBench (full Re-Invoke nDCG@5 0.396 vs 0.276, paired p < 0.001) and tied on MetaTool
DEFAULT_LLM = "qwen2.5-coder-0.5b-instruct"


class ReInvokeConfig(StrictModel):
    """Everything that determines Re-Invoke's components (the backbone's own settings are ``params.dense`` /
    ``params.bm25``; which components run is the pipeline: ``reinvoke`` = ``reinvoke-intents+reinvoke-qgen``).

    Attributes:
        n_queries: synthetic queries per tool used for the index (the first ``n`` samples).
        generate_queries: how many are generated (default and minimum: n_queries; the ablations
            1/5/10 reuse the first n of one 10-sample artifact).
        aggregation: ``mean`` or ``max`` over a tool's expanded copies.
        expansion: ``append`` ("Documentation: <doc> Query: <q>") or ``synthetic_only`` ("<q>").
        temperature, top_p, seed: query-generator sampling.
        query_max_new_tokens, intent_max_new_tokens, hyde_max_new_tokens: generation budgets.
        max_intents: at most this many intents per query are used.
        intent_ranking: ``multiview`` (the paper: the intents' rankings merged, Sec. 3.3) or ``query``: the
            first stage ranks by the query itself and the intents only reach a reranker that reads a
            pipeline's rewrites (``toolrerank.score_views: rewrites``).
        llm_model: a ``toolret.llm.models.KNOWN_MODELS`` name or a local HF folder (a ``.gguf`` for llama.cpp).
        llm_engine: ``transformers`` (default), ``llama.cpp`` (optional: ``pip install llama-cpp-python``;
            on the Re-Invoke prompt mix it measured no faster than the transformers backend on 2 CPU cores,
            ``benchmarks/llm_engines.py``; on a GPU build set ``llm_device: cuda`` to offload all layers) or
            ``openai``: any OpenAI-compatible server (vLLM, TGI, llama.cpp's server, ``toolret serve-llm``)
            at ``llm_base_url`` (``null`` = ``$TOOLRET_LLM_BASE_URL``), ``llm_batch_size`` requests in flight.
        llm_batch_size, llm_num_threads, llm_device: backend settings (num_threads None = $TOOLRET_LLM_THREADS
            or all CPUs, fastest on an idle box; 1 is much faster on a shared, loaded 2-core box).
        tool_vectors: the folder of committed per-tool mean copy vectors (:mod:`tool_vectors`; written by
            ``toolret reinvoke-tool-vectors``), read at index time with ``aggregation: mean`` so that tools whose
            copies match encode nothing; ``off``: always encode the copies.
        cache_dir: where the LLM JSONL cache lives (default ``<cache home>/llm``, outside the work tree).
            Embeddings of expanded copies persist in the dense backbone's store (``dense.embedding_cache``).
    """

    n_queries: int = Field(10, ge=1)  # paper: 10 synthetic queries per tool
    generate_queries: int | None = None
    aggregation: Literal["mean", "max"] = "mean"  # paper default (ablation: max)
    expansion: Literal["append", "synthetic_only"] = "append"
    temperature: float = 0.7  # paper
    top_p: float = 0.95
    seed: int = 0
    query_max_new_tokens: int = 48  # 2-core CPU: ~27 tokens per query on average
    intent_max_new_tokens: int = 96
    hyde_max_new_tokens: int = 80
    max_intents: int = 10
    intent_ranking: Literal["multiview", "query"] = "multiview"
    llm_model: str = DEFAULT_LLM
    llm_engine: Literal["transformers", "llama.cpp", "openai"] = "transformers"  # llama.cpp: optional, no faster here
    llm_base_url: str | None = None  # llm_engine openai: e.g. http://127.0.0.1:8080/v1
    llm_batch_size: int = 64
    llm_num_threads: int | None = None
    llm_device: str = "cpu"
    tool_vectors: str = "data/reinvoke/tool-vectors"
    cache_dir: str | None = None

    @model_validator(mode="after")
    def _generate_at_least_n(self):
        if self.generate_queries is None or self.generate_queries < self.n_queries:
            object.__setattr__(self, "generate_queries", self.n_queries)
        return self


class ReInvokeSection(ReInvokeConfig, ComponentSection):
    """``params.yaml: reinvoke``: the component settings plus the paper's ablation grid (Table 3) and
    which paper column each dataset is reported against (``toolret report --ablations``)."""

    ablations: dict[str, GridVariant] = Field(default_factory=dict)
    # datasets whose tools' mean copy vectors are committed (stage reinvoke_tool_vectors); one per corpus suffices:
    # the vectors are content-addressed, so catalogs sharing tools share them
    tool_vector_datasets: list[str] = Field(default_factory=list)
    paper_columns: dict[str, str] = Field(default_factory=dict)  # dataset -> single-tool|multi-tool|I1|I2|I3
