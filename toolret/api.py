"""The public Python API, re-exported by ``toolret``: catalogs in, tools out.

    >>> import toolret                                                            # doctest: +SKIP
    >>> catalog = toolret.load_catalog("toollens")              # a dataset name or a catalog folder
    >>> pipeline = toolret.build("hybrid", catalog)             # fitted and indexed
    >>> toolret.evaluate(pipeline, catalog).means["recall@5"]
    >>> pipeline.save("my-index")
    >>> searcher = toolret.ToolSearcher.load("my-index")        # or "models:/adapt-myapi@champion"
    >>> searcher.search("book a table for two tonight", k=3)[0].name
    >>> toolret.adapt("my-catalog/", "adapted/")              # trained, selected, registered

Errors: every error toolret raises on purpose is a ``toolret.ToolretError`` naming what to fix.

Everything here is a thin, typed layer over the modules that do the work; the CLI, the server and the
benchmarks call the same functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from toolret.adapt import adapt as _adapt
from toolret.adapt import resolve_index
from toolret.catalog.datasets import load_dataset
from toolret.catalog.io import load_catalog as load_folder
from toolret.catalog.model import Catalog, Tool
from toolret.catalog.tool_records import ToolHit, id_record
from toolret.config import load_params
from toolret.errors import ToolretError
from toolret.evaluate_api import EvalResult, Run, compare
from toolret.evaluate_api import evaluate as score_run
from toolret.evaluation import qrels_from_catalog, rank_split
from toolret.pipeline import Pipeline, build_pipeline
from toolret.roles import Corpus


def load_catalog(path_or_name: str | Path, *, root: str | Path | None = None) -> Catalog:
    """A catalog folder (curated, imported, or any BEIR layout) or a named dataset of the datasets folder
    (``root``: default ``../shared/datasets`` / ``$TOOLRET_DATA_SOURCE``; files verified by checksum)."""
    if Path(path_or_name).is_dir():

        return load_folder(path_or_name)

    return load_dataset(str(path_or_name), root=root)


def build(spec: str, catalog: Catalog, params: Any = None, *, docs: str = "original"):
    """The pipeline ``spec`` names (``bm25``, ``hybrid``, ``reinvoke-intents+dense`` ...) fitted on
    ``catalog`` and indexed on its ``docs`` variant; ``params`` default: the project's ``params.yaml``."""

    params = params if params is not None else load_params()
    pipeline = build_pipeline(spec, catalog, params)
    pipeline.fit(catalog)
    pipeline.index(Corpus.from_catalog(catalog, docs))
    return pipeline


def evaluate(pipeline, catalog: Catalog, split: str = "test", ks: Sequence[int] = (1, 3, 5, 10),
             bootstrap_samples: int = 1000, seed: int = 13):
    """Score ``pipeline`` on ``catalog``'s ``split``: a :class:`toolret.evaluate_api.EvalResult` (means, 95%
    CIs, per-query values), ready for :func:`compare`."""

    ranking = rank_split(pipeline, catalog, split, max(ks))
    return score_run(Run.from_ranking(ranking), qrels_from_catalog(catalog, ranking.query_ids), ks=ks,
                 bootstrap_samples=bootstrap_samples, seed=seed)


class ToolSearcher:
    """A saved pipeline (a folder, or a registry URI ``models:/<name>@<alias>``) answering with tools.

    Example:
        >>> searcher = ToolSearcher.load("data/adapt/myapi/champion")          # doctest: +SKIP
        >>> [h.name for h in searcher.search("renew my library loan", k=2)]    # doctest: +SKIP
        ['renewLoan', 'listLoans']
    """

    def __init__(self, pipeline, records: Mapping[str, Mapping[str, Any]]) -> None:
        self.pipeline = pipeline
        self._records = dict(records)

    @classmethod
    def load(cls, ref: str | Path, *, tracking_uri: str | None = None) -> ToolSearcher:
        pipeline = Pipeline.load(resolve_index(str(ref), tracking_uri))
        by_id = {r["id"]: r for r in pipeline.tool_records or []}
        return cls(pipeline, {t: by_id.get(t) or id_record(t) for t in pipeline.retriever.tool_ids})

    def __len__(self) -> int:
        return len(self._records)

    def search(self, query: str, k: int = 5) -> list[ToolHit]:
        """The top ``k`` tools for ``query``, best first (fewer when a lexical retriever matches fewer)."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 5) -> list[list[ToolHit]]:
        ranking = self.pipeline.search(list(queries), k)
        return [[ToolHit.from_record(self._records.get(ranking.tool_ids[i]) or id_record(ranking.tool_ids[i]),
                                     float(score), ranking.tool_ids[i])
                 for i, score in zip(ranking.indices[row], ranking.scores[row]) if i >= 0][:k]
                for row in range(len(queries))]


def adapt(catalog: str | Path, out: str | Path, **kwargs: Any) -> dict[str, Any]:
    """:func:`toolret.adapt.adapt`: a trained, selected, registered retriever for ``catalog``."""

    return _adapt(catalog, out, **kwargs)


__all__ = ["Catalog", "EvalResult", "Tool", "ToolHit", "ToolSearcher", "ToolretError", "adapt", "build", "compare",
           "evaluate", "load_catalog"]
