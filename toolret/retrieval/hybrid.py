"""``hybrid``: a lexical and a semantic retriever fused (reciprocal-rank or min-max score fusion).

Each side is any registered retriever indexing its own document variant (default: ``bm25`` over the
documents the pipeline is indexed on -- ``original`` keeps the parameter and schema terms BM25 matches --
and ``dense`` over the ``cleaned`` ones, the normalised prose the encoder reads best) and searches ``depth`` candidates; :mod:`toolret.retrieval.fusion`
merges them. The semantic side's weight ``w`` (the lexical side gets ``1 - w``) is selected on the
catalog's dev split when it has one -- or on ``dev_dataset``'s (a test-only benchmark's synthetic training
catalog) -- (Recall@5, ties to the weight nearest 0.5), else it is the configured ``weight``; ``stats``
says which, with the dev curve.

Example:
    >>> from toolret.retrieval.bm25 import BM25Retriever
    >>> h = HybridRetriever([BM25Retriever(), BM25Retriever()], HybridConfig())
    >>> h.index(["a", "b"], ["weather forecast for a city", "movie search by title"])
    >>> h.search(["what is the weather"], k=1).ranked_ids(0)
    ['a']
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from toolret.atomic import atomic_directory
from toolret.catalog.model import DOC_VARIANTS
from toolret.config import StrictModel
from toolret.errors import CatalogError
from toolret.metrics.per_query import per_query_metrics
from toolret.registry import COMPONENT_FILE, load_component, write_component_meta
from toolret.retrieval.fusion import FUSIONS, check_weight_grid
from toolret.roles import Corpus, Ranking, concurrent_safe


class HybridSide(StrictModel):
    """One fused retriever: a registered retriever name and the document variant it indexes (``None``:
    the documents the pipeline is indexed on)."""

    component: str
    docs: str | None = None

    @field_validator("docs")
    @classmethod
    def _known_variant(cls, v: str | None) -> str | None:
        if v is not None and v not in DOC_VARIANTS:
            raise ValueError(f"unknown document variant {v!r}; choose one of {DOC_VARIANTS}")
        return v


class HybridConfig(StrictModel):
    """``params.yaml: hybrid``."""

    # bm25 reads the documents the pipeline is indexed on (its evaluation's `docs`), dense the cleaned ones
    sides: list[HybridSide] = Field(default_factory=lambda: [HybridSide(component="bm25"),
                                                             HybridSide(component="dense", docs="cleaned")])
    fusion: Literal["rrf", "minmax"] = "rrf"
    rrf_k: float = Field(60.0, gt=0)  # Cormack et al.'s constant
    depth: int = Field(100, ge=1)  # candidates each side contributes
    weight: float = Field(0.5, ge=0, le=1)  # the second side's weight where no dev split selects it
    select_on_dev: bool = True
    # select on this catalog's dev split instead of the evaluated one's (a dataset name, a curated catalog
    # or data/curated/<name>: e.g. the synthetic training catalog of a test-only benchmark)
    dev_dataset: str | None = None
    weight_grid: list[float] = Field(default_factory=lambda: [round(0.1 * i, 1) for i in range(11)])
    dev_metric_k: int = Field(5, ge=1)

    @field_validator("sides")
    @classmethod
    def _two_sides(cls, v: list[HybridSide]) -> list[HybridSide]:
        if len(v) != 2:
            raise ValueError(f"hybrid fuses exactly two retrievers, got {len(v)}")
        return v

    @field_validator("weight_grid")
    @classmethod
    def _weights_in_unit_interval(cls, v: list[float]) -> list[float]:
        return check_weight_grid(v, "weight_grid")


def side_documents(corpus, variant: str | None) -> tuple[list[str], str | None]:
    """The documents one side indexes and the variant it got: ``variant`` where every tool has it, else the
    pipeline's documents (``None``) -- a catalog imported without cleaned documents still serves."""
    if variant is None:
        return list(corpus.documents), None
    docs = [t.docs.get(variant) for t in corpus.tools]
    if len(docs) != len(corpus.tool_ids) or any(d is None for d in docs):
        return list(corpus.documents), None
    return docs, variant


class HybridRetriever:
    """Two retrievers searched ``depth`` deep each and fused; see the module docstring."""

    name = "hybrid"

    def __init__(self, sides: Sequence[Any], config: HybridConfig | None = None, weight: float | None = None,
                 dev_catalog=None) -> None:
        self.config = config or HybridConfig()
        self.dev_catalog = dev_catalog  # where fit selects the weight (None: the fitted catalog itself)
        if len(sides) != 2:
            raise ValueError(f"hybrid fuses exactly two retrievers, got {len(sides)}")
        self.sides = list(sides)
        self.weight = self.config.weight if weight is None else weight
        self.tool_ids: list[str] = []
        self.stats: dict[str, Any] = {"weight": self.weight, "weight_source": "config", "fusion": self.config.fusion}

    @property
    def concurrent_search(self) -> bool:
        """Searching only reads both sides and fuses fresh rankings: safe without a lock exactly when both
        sides are (:func:`toolret.roles.concurrent_safe`)."""

        return all(concurrent_safe(side) for side in self.sides)

    # ------------------------------------------------------------------ learn / index
    def fit(self, catalog) -> None:
        """Fit both sides; then select the weight on the dev split of ``dev_catalog`` (default: the
        catalog itself) where it has one."""
        for side in self.sides:
            side.fit(catalog)
        selection = self.dev_catalog if self.dev_catalog is not None else catalog
        dev = selection.split("dev")
        if not (self.config.select_on_dev and dev):
            return

        self.index_corpus(Corpus.from_catalog(selection))
        self.select_weight([q.text for q in dev], [selection.gold(q.id) for q in dev])
        self.stats["dev_dataset"] = selection.name

    def select_weight(self, queries: Sequence[str], gold: Sequence[set[str]]) -> float:
        """The grid weight with the best mean Recall@k on ``queries`` (ties: nearest 0.5, then smallest)."""

        k = self.config.dev_metric_k
        qids = [str(i) for i in range(len(queries))]
        per_side = self._side_rankings(queries, qids, k)
        gold_by_id = dict(zip(qids, gold))
        curve = {}
        for w in self.config.weight_grid:
            _, metrics = per_query_metrics(self._fuse(per_side, w, k).as_lists(), gold_by_id, [k])
            curve[w] = float(metrics[f"recall@{k}"].mean()) if len(metrics[f"recall@{k}"]) else 0.0
        best = max(curve.values())
        self.weight = min((w for w, v in curve.items() if v >= best - 1e-12), key=lambda w: (abs(w - 0.5), w))
        self.stats.update(weight=self.weight, weight_source="dev", dev_queries=len(queries),
                          dev_curve={f"{w:g}": round(v, 4) for w, v in curve.items()}, dev_metric=f"recall@{k}")
        return self.weight

    def index(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None:
        """Both sides index ``documents`` (no document variants known)."""
        self.tool_ids = list(tool_ids)
        for side in self.sides:
            side.index(tool_ids, documents)

    def index_corpus(self, corpus) -> None:
        """Each side indexes its configured document variant (see :func:`side_documents`)."""
        self.tool_ids = list(corpus.tool_ids)
        got = []
        for side, spec in zip(self.sides, self.config.sides):
            docs, variant = side_documents(corpus, spec.docs)
            side.index(corpus.tool_ids, docs)
            got.append(variant or "pipeline")
        self.stats["side_docs"] = got

    # ------------------------------------------------------------------ search
    def _side_rankings(self, queries: Sequence[str], query_ids: Sequence[str] | None, k: int) -> list[Ranking]:
        """Each side's top ``max(depth, k)`` (at most the corpus)."""
        depth = min(max(self.config.depth, k), len(self.tool_ids))
        return [side.search(queries, depth, query_ids) for side in self.sides]

    def _fuse(self, rankings: list[Ranking], weight: float, k: int) -> Ranking:
        fuse = FUSIONS[self.config.fusion]
        weights = [1.0 - weight, weight]
        if self.config.fusion == "rrf":
            return fuse(rankings, weights, k, rrf_k=self.config.rrf_k)
        return fuse(rankings, weights, k)

    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking:
        if not self.tool_ids:
            raise CatalogError("hybrid: search before index")
        k = min(k, len(self.tool_ids))
        return self._fuse(self._side_rankings(queries, query_ids, k), self.weight, k)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        with atomic_directory(path) as tmp:
            dirs = []
            for i, side in enumerate(self.sides):
                sub = f"side{i}-{side.name}"
                side.save(tmp / sub)
                dirs.append(sub)
            write_component_meta(tmp, self.name, config=self.config.to_dict(), weight=self.weight,
                                 side_dirs=dirs, stats=self.stats, tool_ids=self.tool_ids)

    @classmethod
    def load(cls, path: str | Path) -> HybridRetriever:
        path = Path(path)
        meta = json.loads((path / COMPONENT_FILE).read_text(encoding="utf-8"))
        missing = [d for d in meta.get("side_dirs", []) if not (path / d).is_dir()]
        if len(meta.get("side_dirs", [])) != 2 or missing:
            raise CatalogError(f"{path}: a saved hybrid needs its two side folders (missing {missing})")
        r = cls([load_component(path / d) for d in meta["side_dirs"]], HybridConfig(**meta["config"]), meta["weight"])
        r.stats = meta.get("stats", r.stats)
        r.tool_ids = list(meta["tool_ids"])
        return r


__all__ = ["HybridConfig", "HybridRetriever", "HybridSide", "side_documents"]
