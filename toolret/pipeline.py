"""A pipeline ``[rewriter] -> retriever -> [reranker ...]``: built, indexed, evaluated, saved and served
as one thing.

Search: the rewriter turns every query into one or more search queries; the retriever searches them
all; when a query has several rewrites the rewriter's ``fuse`` merges their rankings (Re-Invoke: multi-
view ranking); each reranker then reorders (and may extend) the list -- a reranker whose
``reads_rewrites`` is true also receives the rewrites (``rerank(..., rewrites=...)``: ToolRerank's cross-
encoder can score every intent of a multi-request query, not only the whole query). The first stage searches at least
as deep as the deepest ``candidate_depth`` a reranker declares (ToolRerank reranks the top 50 even
when 5 results are asked for).

Example:
    >>> from toolret.pipeline import Pipeline
    >>> from toolret.retrieval.bm25 import BM25Retriever
    >>> p = Pipeline(BM25Retriever())
    >>> p.index_documents(["a", "b"], ["weather forecast for a city", "movie search by title"])
    >>> p.search(["what is the weather"], k=1).ranked_ids(0)
    ['a']
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolret.atomic import atomic_directory
from toolret.catalog.model import Tool
from toolret.catalog.tool_records import TOOLS_FILE, catalog_summary, read_tools, tool_record, write_tools
from toolret.config import apply_overrides
from toolret.errors import CatalogError
from toolret.out_folders import PIPELINE_FILE
from toolret.registry import COMPONENT_FILE, BuildContext, build_component, component, load_component, parse_spec
from toolret.roles import Corpus, Ranking, default_query_ids, index_retriever

if TYPE_CHECKING:
    from toolret.catalog.model import Catalog
    from toolret.config import CoreParams
    from toolret.registry import PipelineSpec


class Pipeline:
    """Components chained by role (any of them may be ``None``/empty except the retriever)."""

    def __init__(self, retriever, rewriter=None, rerankers: Sequence[Any] = (), name: str | None = None) -> None:
        self.retriever = retriever
        self.rewriter = rewriter
        self.rerankers = list(rerankers)
        parts = [c.name for c in (rewriter, retriever, *self.rerankers) if c is not None]
        self.name = name or "+".join(parts)
        # what a served pipeline tells agents (toolret.catalog.tool_records): the indexed tools' records and the
        # catalog it was fitted on; saved as tools.jsonl / pipeline.json "catalog", None when unknown
        self.tool_records: list[dict[str, Any]] | None = None
        self.catalog_info: dict[str, Any] | None = None
        self._indexed_tools: list[Any] | None = None  # the Corpus tools, turned into records on save

    @property
    def components(self) -> list[Any]:
        return [c for c in (self.rewriter, self.retriever, *self.rerankers) if c is not None]

    # ---------------------------------------------------------------- learn / index
    def fit(self, catalog: Catalog) -> None:
        """Fit every component on the catalog (train split; dev split for selection)."""

        for c in self.components:
            c.fit(catalog)
        self.catalog_info = catalog_summary(catalog)

    def index(self, corpus: Corpus) -> None:
        index_retriever(self.retriever, corpus)
        for r in self.rerankers:
            r.index(corpus)
        self._indexed_tools, self.tool_records = list(corpus.tools), None

    def index_documents(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None:
        """Index plain documents (no hierarchy: rerankers see each tool as its own parent)."""

        tools = [Tool(id=t, name=t, docs={"original": d}) for t, d in zip(tool_ids, documents)]
        self.index(Corpus(list(tool_ids), list(documents), tools))

    # ---------------------------------------------------------------- search
    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking:
        """The top ``k`` tools of each query, as one :class:`Ranking` (a batch: ``ranked_ids(i)`` is query i's)."""
        if isinstance(queries, (str, bytes)):  # a str is a sequence too: it would be searched letter by letter
            raise TypeError(f"Pipeline.search takes a list of queries, got the str {queries[:40]!r}: pass "
                            "[query] (or load the saved pipeline with toolret.ToolSearcher for a query's hits)")
        qids = default_query_ids(len(queries), query_ids)
        # a reranker may ask for more first-stage candidates than it returns (``candidate_depth``)
        depth = max([k, *(getattr(r, "candidate_depth", 0) for r in self.rerankers)])
        ranking, groups = self._first_stage(list(queries), depth, qids)
        for r in self.rerankers:
            if getattr(r, "reads_rewrites", False):
                ranking = r.rerank(queries, ranking, k, rewrites=groups)
            else:
                ranking = r.rerank(queries, ranking, k)
        return ranking

    def _first_stage(self, queries: list[str], k: int, qids: list[str]) -> tuple[Ranking, list[list[str]] | None]:
        """The first-stage ranking and the rewriter's rewrites (``None`` without a rewriter)."""
        if self.rewriter is None:
            return self.retriever.search(queries, k, qids), None
        groups = self.rewriter.rewrite(queries)
        if len(groups) != len(queries) or any(not g for g in groups):
            raise CatalogError(f"rewriter {self.rewriter.name!r} must return at least one rewrite per query")
        flat = [q for g in groups for q in g]
        if all(len(g) == 1 for g in groups):
            return self.retriever.search(flat, k, qids), groups
        fuse = getattr(self.rewriter, "fuse", None)
        if fuse is None:
            raise CatalogError(f"rewriter {self.rewriter.name!r} returned several rewrites per query but "
                               "defines no fuse()")
        n_tools = len(self.retriever.tool_ids)
        flat_ranking = self.retriever.search(flat, n_tools)  # every rewrite ranks every tool
        return fuse(groups, flat_ranking, k, qids), groups

    # ---------------------------------------------------------------- persistence
    def save(self, path: str | Path, self_contained: bool = False) -> None:
        """``path/pipeline.json`` + one sub-directory per component (each loadable on its own) + the tool
        records ``tools.jsonl`` (where the pipeline knows its tools: indexed here or loaded with them).

        ``self_contained``: each component, nested ones included, copies the local models it reads into its
        folder (a component class's ``embed_models(folder)``, e.g. a fine-tuned encoder), so the save ranks
        the same after those models are retrained in place, moved or deleted (what ``toolret adapt`` writes
        as a champion: a later adapt retrains its work folder). Packaged models stay named."""

        if self._indexed_tools is not None:
            self.tool_records = [tool_record(t) for t in self._indexed_tools]
            self._indexed_tools = None
        with atomic_directory(path) as tmp:
            entries = []
            for i, c in enumerate(self.components):
                sub = f"{i}-{c.name}"
                c.save(tmp / sub)
                entries.append({"dir": sub, "component": c.name})
            roles = {"rewriter": self.rewriter is not None, "rerankers": len(self.rerankers)}
            catalog = {"catalog": self.catalog_info} if self.catalog_info is not None else {}
            (tmp / PIPELINE_FILE).write_text(json.dumps({"name": self.name, "components": entries, **roles,
                                                         **catalog}, indent=1), encoding="utf-8")
            if self.tool_records is not None:
                write_tools(tmp / TOOLS_FILE, self.tool_records)
            if self_contained:
                for meta_file in sorted(tmp.rglob(COMPONENT_FILE)):
                    component(json.loads(meta_file.read_text(encoding="utf-8"))["component"]).embed_models(
                        meta_file.parent)

    @classmethod
    def load(cls, path: str | Path) -> Pipeline:
        """A saved pipeline; its tool records and catalog summary where it was saved with them (an older
        index without ``tools.jsonl`` loads with ``tool_records = None``)."""

        path = Path(path)
        meta_file = path / PIPELINE_FILE
        if not meta_file.is_file():
            raise CatalogError(f"{path}: not a saved pipeline (no {PIPELINE_FILE})")
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        comps = [load_component(path / e["dir"]) for e in meta["components"]]
        rewriter = comps.pop(0) if meta.get("rewriter") else None
        pipeline = cls(comps[0], rewriter, comps[1:], name=meta["name"])
        pipeline.catalog_info = meta.get("catalog")
        if (path / TOOLS_FILE).is_file():
            pipeline.tool_records = read_tools(path / TOOLS_FILE)
        return pipeline


def build_pipeline(spec: str | PipelineSpec, catalog: Catalog, params: CoreParams, model: str | None = None) -> Pipeline:
    """The named / composed pipeline for ``catalog`` (unindexed; learned parts loaded or trained)."""

    spec = parse_spec(spec, params=params) if isinstance(spec, str) else spec
    if spec.settings:  # a registered pipeline's own params (NamedPipeline.settings)

        params = apply_overrides(params, dict(spec.settings))
    ctx = BuildContext(catalog, params, model)
    rewriter = build_component(spec.rewriter, ctx) if spec.rewriter else None
    retriever = build_component(spec.retriever, ctx)
    rerankers = [build_component(r, ctx) for r in spec.rerankers]
    return Pipeline(retriever, rewriter, rerankers, name=spec.label)


def rows_of(ranking: Ranking, rows: Sequence[int], query_ids: Sequence[str]) -> Ranking:
    """The sub-ranking of ``rows`` (renamed to ``query_ids``)."""
    idx = np.asarray(rows, dtype=np.int64)
    return Ranking(list(query_ids), ranking.tool_ids, ranking.indices[idx], ranking.scores[idx])


__all__ = ["PIPELINE_FILE", "Pipeline", "build_pipeline", "rows_of"]
