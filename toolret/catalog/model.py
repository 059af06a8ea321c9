"""The canonical catalog: tools (with category -> tool -> API hierarchy), queries with splits, qrels.

Every dataset loader produces a :class:`Catalog`; every retriever, method and metric consumes one.
A tool's retrievable text comes in named *document variants* (``original`` always; ``human`` where the
source ships a human rewrite, e.g. MTRB-RestBench; ``cleaned`` after :mod:`toolret.catalog.cleanup`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolret.catalog.tool_fields import ToolFields, tool_fields
from toolret.errors import CatalogError

DOC_VARIANTS = ("original", "cleaned", "human")
SPLITS = ("train", "dev", "test")


# What a catalog is for (``provenance["purpose"]``) decides the split it must have: an evaluation catalog
# (the default) a test split, a training-only one (toolret.llm.synthetic_catalog) a train split, a serving one
# (imported from an OpenAPI file or an MCP server without queries: toolret.catalog.importers) none. The BEIR
# loader (which qrels file is required) and validation (``splits.<split>_present``) both read it from here.
PURPOSES = {"evaluation": "test", "training": "train", "serving": None}


def required_split(provenance: dict[str, Any] | None) -> str | None:
    """The split a catalog with this provenance must have (:data:`PURPOSES`; no purpose: evaluation)."""
    purpose = (provenance or {}).get("purpose") or "evaluation"
    if purpose not in PURPOSES:
        raise CatalogError(f"unknown catalog purpose {purpose!r} in its provenance; choose one of {sorted(PURPOSES)}")
    return PURPOSES[purpose]


@dataclass
class Tool:
    """One retrievable unit (an API endpoint in ToolBench/ToolLens terms).

    Attributes:
        id: unique id within the catalog.
        name: the API's own name (e.g. ``"Suggestions"`` or ``"GET /movie/{movie_id}"``).
        docs: document variants, at least ``{"original": ...}``.
        tool: the parent tool (ToolBench ``tool_name``) where the source has a hierarchy, else ``name``.
        category: the parent category where the source has one.
        metadata: anything else the source carried (parameters, method ...), JSON-serialisable.

    Its typed fields (``fields``: name, description, parent, category, parameters, ``input_schema``,
    ``returns``) are read from ``docs["original"]`` and ``metadata`` by :mod:`toolret.catalog.tool_fields`.
    """

    id: str
    name: str
    docs: dict[str, str]
    tool: str | None = None
    category: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.docs["original"]

    @property
    def fields(self) -> ToolFields:
        """The tool field by field (:func:`toolret.catalog.tool_fields.tool_fields`): what cleanup renders
        documents from and serving answers with."""
        return tool_fields(self)

    @property
    def description(self) -> str:
        return self.fields.description

    @property
    def input_schema(self) -> dict[str, Any] | None:
        return self.fields.input_schema

    @property
    def returns(self) -> Any:
        return self.fields.returns

    @property
    def extra(self) -> dict[str, Any]:
        """What the source carried beyond the fields (``metadata``)."""
        return self.metadata


@dataclass
class Query:
    """A user request with its split (``train``, ``dev`` or ``test``)."""

    id: str
    text: str
    split: str


@dataclass
class Catalog:
    """Tools, queries and relevance judgements of one dataset.

    Attributes:
        name: dataset name (``toollens``, ``mtrb-restbench`` ...).
        tools: the corpus, in a fixed order (ranking indices refer to this order).
        queries: all queries of all splits.
        qrels: ``query id -> {tool id: relevance}`` (binary relevance in every shipped dataset).
        provenance: where the catalog came from (source paths, checksums, loader parameters).
    """

    name: str
    tools: list[Tool]
    queries: list[Query]
    qrels: dict[str, dict[str, int]]
    provenance: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._tool_index = {t.id: i for i, t in enumerate(self.tools)}

    # -- lookups -------------------------------------------------------------------------------
    @property
    def tool_ids(self) -> list[str]:
        return [t.id for t in self.tools]

    def tool_position(self, tool_id: str) -> int:
        return self._tool_index[tool_id]

    def docs(self, variant: str = "original") -> list[str]:
        """Texts of every tool for one document variant; a clear error if the variant is absent."""
        if variant not in DOC_VARIANTS:
            raise CatalogError(f"unknown document variant {variant!r}; choose one of {DOC_VARIANTS}")
        missing = [t.id for t in self.tools if variant not in t.docs]
        if missing:
            hint = " (run the cleanup step first)" if variant == "cleaned" else ""
            raise CatalogError(
                f"catalog {self.name!r} has no {variant!r} documents{hint}; "
                f"{len(missing)} tools lack it, first: {missing[0]!r}"
            )
        return [t.docs[variant] for t in self.tools]

    def doc_variants(self) -> list[str]:
        return [v for v in DOC_VARIANTS if all(v in t.docs for t in self.tools)]

    def split(self, name: str) -> list[Query]:
        """Queries of one split that have at least one gold tool (queries without gold are excluded)."""
        return [q for q in self.queries if q.split == name and self.qrels.get(q.id)]

    def has_split(self, name: str) -> bool:
        return any(q.split == name for q in self.queries)

    def gold(self, query_id: str) -> set[str]:
        return {t for t, rel in self.qrels.get(query_id, {}).items() if rel > 0}

    def stats(self) -> dict[str, Any]:
        per_split = {s: len(self.split(s)) for s in SPLITS if self.has_split(s)}
        return {
            "name": self.name,
            "n_tools": len(self.tools),
            "n_queries": per_split,
            "n_categories": len({t.category for t in self.tools if t.category}),
            "n_parent_tools": len({t.tool for t in self.tools if t.tool}),
            "doc_variants": self.doc_variants(),
        }
