"""``params.yaml``: the one parameter file shared by DVC, Dagster, MLflow and the CLI.

Every section of ``params.yaml`` is a pydantic model with ``extra="forbid"``; the models are the single
source of defaults. Core sections are declared here; each registered component (``toolret.registry``)
brings its own section model (``bm25:`` -> :class:`toolret.retrieval.bm25.BM25Config`, ``reinvoke:`` ->
:class:`toolret.methods.reinvoke.config.ReInvokeSection` ...). :func:`load_params` validates the file:
an unknown or mistyped key is a :class:`toolret.errors.ConfigError` naming the key and the file. The
project's paths and the raw file are :mod:`toolret.paths`, shared with the registry (which this module
imports; the registry never imports this one).

Example:
    >>> p = validate_params({"bm25": {"k1": 0.9}})
    >>> p.bm25.k1, p.bm25.b
    (0.9, 0.75)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, create_model, model_validator

from toolret.errors import ConfigError
from toolret.paths import portable_path, read_params_file, under_project
from toolret.registry import config_sections, import_plugins


class StrictModel(BaseModel):
    """Base of every config section: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    _source: dict[str, Any] | None = PrivateAttr(default=None)  # the params file it was read from (load_params)

    def replace(self, **changes: Any):
        """A validated copy with ``changes`` applied (unknown keys are errors)."""
        return type(self).model_validate({**self.model_dump(), **changes})

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ComponentSection(StrictModel):
    """A method's ``params.yaml`` section: its component config plus keys only its stages and report read
    (grids, runs, paper columns). Declared ``class XSection(XConfig, ComponentSection)``;
    :meth:`component_config` is the ``XConfig`` part."""

    def component_config(self) -> StrictModel:
        model = next(c for c in type(self).__mro__[1:]
                     if issubclass(c, StrictModel) and not issubclass(c, ComponentSection))
        return model.model_validate({k: v for k, v in self.model_dump().items() if k in model.model_fields})


class SourceConfig(StrictModel):
    root: str = "../shared/datasets"  # raw datasets, verified against MANIFEST.tsv ($TOOLRET_DATA_SOURCE wins)
    beir: dict[str, str] = Field(default_factory=dict)  # extra user catalogs: name -> BEIR directory


class CatalogConfig(StrictModel):
    dev_fraction: float = Field(0.05, ge=0, lt=1)  # dev split carved from train (never from test)
    seed: int = 13
    # k-fold over the test queries (toolret.catalog.folds): fold `fold` of `folds` becomes the train split
    # of a catalog named <dataset>-fold<fold>of<folds>. 0 = the dataset's own splits, except for a
    # pipeline that learns on a dataset without a train split, which gets `auto_folds` folds.
    folds: int = Field(0, ge=0)
    fold: int = Field(0, ge=0)
    auto_folds: int = Field(9, ge=0)  # MTRB: 9 folds of 10 training / 80 test queries (QTA's protocol)


class CleanupConfig(StrictModel):
    target_length: str | int = "median"  # bring docs near the catalog's median token count
    # the tokenizer document lengths are counted in (a model package name or folder): the cleaning is a core
    # stage and names its own tokenizer rather than reading a retriever's section
    tokenizer: str = "all-MiniLM-L6-v2"


class EvaluationConfig(StrictModel):
    ks: list[int] = Field(default_factory=lambda: [1, 3, 5, 10])
    k_max: int = 100
    bootstrap_samples: int = 1000
    seed: int = 13


class StorageConfig(StrictModel):
    """Where caches and the default DVC remote live: outside the work tree, so a fresh checkout on the
    same machine reuses them. Empty = ``$TOOLRET_CACHE_HOME`` or ``$XDG_CACHE_HOME/toolret`` or
    ``~/.cache/toolret``."""

    cache_home: str = ""


class GridVariant(StrictModel):
    """One row of an evaluation grid (``toolret evaluate-grid``): a pipeline, params overrides, and the
    row it is paired-tested against."""

    method: str
    set: dict[str, Any] = Field(default_factory=dict)  # "section.key" -> value, e.g. {"reinvoke.n_queries": 1}
    baseline: str | None = None


class SyntheticSpec(StrictModel):
    """One synthetic training catalog (``params.yaml: synthetic: {<name>: ...}``, built by
    :mod:`toolret.llm.synthetic_catalog` into ``data/curated/<name>``)."""

    # the catalog whose tools the job wrote queries for: a dataset of `datasets` (its curated catalog is read)
    # or another named dataset -- a corpus too large to evaluate in `make run` (the 46,879-API environment) --
    # which the synthesize stage loads from its own source folders and cleans
    source: str
    job: str = "reinvoke-queries"  # a per-tool generation job (toolret generate-shards --job)
    n: int = Field(5, ge=1)  # samples per tool used (the first n)
    # a seeded sample of the source's tools the job wrote for (0 = every tool; `generate-shards --sample-tools`
    # with the same n and seed writes them): for corpora too large to cover, drawn without reading any query
    sample_tools: int = Field(0, ge=0)
    holdout_categories: float = Field(0.1, ge=0, lt=1)  # seeded fraction of categories with no training query
    holdout_tools: float = Field(0.1, ge=0, lt=1)  # ... and of the other categories' parent tools
    dev_fraction: float = Field(0.05, ge=0, lt=1)  # of the seen tools' queries
    # consistency filtering: keep a training query whose API BM25 ranks high (dev queries are all kept)
    filter: Literal["none", "bm25"] = "none"
    filter_depth: int = Field(10, ge=1)
    # multi-API queries: seeded groups of 2-3 APIs of one parent tool and of 2-3 tools of one category (one
    # API each), one request written per group by `multi_job` (0 = none)
    multi_tool_groups: int = Field(0, ge=0)
    multi_category_groups: int = Field(0, ge=0)
    multi_job: str = "synthetic-multi-api"
    # the generator whose committed shards ``job`` is read from, and ``multi_job``'s (each None: Re-Invoke's
    # ``reinvoke.llm_model`` / ``llm_engine``); `toolret generate-shards --set reinvoke.llm_model=... --set
    # reinvoke.llm_engine=...` writes them
    llm_model: str | None = None
    llm_engine: Literal["transformers", "llama.cpp", "openai"] | None = None
    multi_llm_model: str | None = None
    multi_llm_engine: Literal["transformers", "llama.cpp", "openai"] | None = None
    # composed requests, ToolBench's instruction shape (several requests in one message, one API each): per
    # single-API query of a split, ``compose`` requests joined from 2-3 of that split's queries -- half for APIs of
    # one parent tool, half for tools of one category (toolret.llm.synthetic_catalog.compose_requests; 0 = none)
    compose: float = Field(0.0, ge=0)
    seed: int = 13


class SelectionSpec(StrictModel):
    """One catalog sliced from another's judged queries (``params.yaml: selections: {<name>: ...}``, built by
    :mod:`toolret.catalog.select` into ``data/curated/<name>``; its test split = the selected queries)."""

    source: str  # a curated catalog (a dataset or a synthetic training catalog)
    split: Literal["train", "dev", "test"]
    min_gold: int = Field(1, ge=1)  # keep the queries with at least this many gold tools
    sample: int = Field(0, ge=0)  # a seeded sample of that many of them (0 = all)
    seed: int = 13


class AdaptSettings(StrictModel):
    """``params.yaml: adapt``: how ``toolret adapt`` runs where its flags do not say (the Dagster adapt assets and
    their sensors run it with these): the budget, requests per tool, the generator, the candidates, and
    dense-ft's training over the budget's (e.g. ``{epochs: 1}``)."""

    budget: Literal["fast", "full"] = "fast"
    n: int | None = Field(None, ge=1)  # requests per tool; None: the budget's
    llm_model: str = "qwen2.5-coder-0.5b-instruct"
    llm_engine: str = "transformers"  # transformers | llama.cpp
    llm_base_url: str | None = None  # an OpenAI-compatible server writes the requests instead
    candidates: list[str] | None = None  # these candidates only; None: all
    finetune: dict[str, Any] = Field(default_factory=dict)  # over the budget's dense-ft training settings


class CoreParams(StrictModel):
    """Sections every project has; component sections are added by :func:`params_model`."""

    source: SourceConfig = Field(default_factory=SourceConfig)
    datasets: list[str] = Field(default_factory=list)
    finetune_datasets: list[str] = Field(default_factory=list)  # datasets with a train split to learn on
    methods: list[str] = Field(default_factory=lambda: ["bm25", "dense"])  # evaluated on every dataset
    # method packages outside toolret/methods (module names, imported before this file is validated, so
    # their sections validate; see toolret.registry.import_plugins)
    plugins: list[str] = Field(default_factory=list)
    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    cleanup: CleanupConfig = Field(default_factory=CleanupConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    synthetic: dict[str, SyntheticSpec] = Field(default_factory=dict)  # training catalogs from tool documents
    selections: dict[str, SelectionSpec] = Field(default_factory=dict)  # evaluation slices (e.g. a dev split's)
    adapt: AdaptSettings = Field(default_factory=AdaptSettings)  # toolret adapt's defaults (user catalogs)
    # evaluated dataset -> the dataset its learning components (dense-ft, hybrid's dense-ft side ...) train on:
    # itself, or for a test-only benchmark its training catalog (a ToolBench group -> toolbench-synthetic);
    # unlisted: the dataset itself. Every entry gets the index_ft / evaluate_ft stages (dense-ft of the value).
    trained_on: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _selection_sources_are_built(self):
        """A selection is sliced from a curated catalog: a dataset's or a synthetic one's."""
        known = set(self.datasets) | set(self.synthetic)
        missing = {name: spec.source for name, spec in self.selections.items() if spec.source not in known}
        if missing:
            raise ValueError(f"selections {missing} name a source that is neither in `datasets` nor in `synthetic`")
        return self

    @model_validator(mode="after")
    def _trained_on_is_trained(self):
        """A ``trained_on`` value naming a dataset (not a folder) must be one dense-ft is trained on."""
        untrained = {k: v for k, v in self.trained_on.items() if "/" not in v and v not in self.finetune_datasets}
        if untrained:
            raise ValueError(f"trained_on {untrained}: not in `finetune_datasets`, so no stage trains "
                             "data/models/<it>/dense-ft; add it there (or give a folder path)")
        return self


_MODELS: dict[tuple, type[CoreParams]] = {}


def params_model() -> type[CoreParams]:
    """``CoreParams`` plus one field per registered component config section (and its
    ``<section>_datasets`` list where the component has per-dataset stages)."""

    sections = config_sections()
    key = tuple(sorted((name, id(model), staged) for name, (model, staged) in sections.items()))
    if key not in _MODELS:
        fields: dict[str, Any] = {}
        for name, (model, staged) in sections.items():
            fields[name] = (model, Field(default_factory=model))
            if staged:
                fields[f"{name}_datasets"] = (list[str], Field(default_factory=list))
        _MODELS[key] = create_model("Params", __base__=CoreParams, **fields)
    return _MODELS[key]


def _format_error(err: ValidationError, source: str) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            lines.append(f"{source}: unknown key {key!r}")
        else:
            lines.append(f"{source}: key {key!r}: {e['msg']} (got {e.get('input')!r})")
    return "\n".join(lines)


def validate_params(data: dict[str, Any] | None, source: str = "params") -> CoreParams:
    """Validate a params mapping; a :class:`ConfigError` names every bad key and ``source``. The plugins
    it names (``plugins:``, a list of module names) are imported first: their sections validate."""
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if isinstance(plugins, list) and all(isinstance(p, str) for p in plugins):  # else validation reports it

        import_plugins(plugins, f"{source}: plugins")
    try:
        return params_model().model_validate(data or {})
    except ValidationError as e:
        raise ConfigError(_format_error(e, source)) from None


def load_params(path: str | Path | None = None, overrides: list[str] | None = None) -> CoreParams:
    """Read and validate ``params.yaml`` (default: the project's), then apply ``section.key=value``
    overrides (``--set`` on the command line). Unknown keys are errors naming the key and the file."""
    data, path = read_params_file(path)
    params = validate_params(data, str(path))
    params = apply_overrides(params, overrides) if overrides else params
    return with_source(params, path, overrides)


def with_source(params: CoreParams, path: Path, overrides: list[str] | None = None) -> CoreParams:
    """``params`` remembering the file it was read from (portable path and sha256, or ``None`` when the project
    has no params file) and the overrides applied: :func:`params_source` gives it to every result."""

    digest = None
    if path.is_file():
        import hashlib

        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    params._source = {"file": portable_path(path.resolve()) if path.is_file() else None, "sha256": digest,
                      "overrides": list(overrides or [])}
    return params


def params_source(params: Any) -> dict[str, Any] | None:
    """Which params file (and overrides) ``params`` came from (``None`` for params built in code)."""
    return getattr(params, "_source", None)


def apply_overrides(params: CoreParams, overrides: list[str] | dict[str, Any]) -> CoreParams:
    """``["reinvoke.n_queries=5", "bm25.k1=0.9"]`` (YAML values) or ``{"reinvoke.n_queries": 5}``."""
    import yaml

    pairs: dict[str, Any] = {}
    if isinstance(overrides, dict):
        pairs = dict(overrides)
    else:
        for pair in overrides:
            if "=" not in pair:
                raise ConfigError(f"override {pair!r} is not section.key=value")
            key, value = pair.split("=", 1)
            pairs[key.strip()] = yaml.safe_load(value)
    data = params.model_dump()
    for key, value in pairs.items():
        parts = key.split(".")
        node = data
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                raise ConfigError(f"override {key!r}: {p!r} is not a section of params")
            node = node[p]
        node[parts[-1]] = value
    return validate_params(data, "overrides " + ", ".join(sorted(pairs)))


def cache_home(params: CoreParams | None = None) -> Path:
    """The machine-wide cache root (LLM generations, embeddings, the default DVC remote): outside the
    work tree, so it survives a fresh checkout. ``params.storage.cache_home``, else
    ``$TOOLRET_CACHE_HOME``, else ``$XDG_CACHE_HOME/toolret``, else ``~/.cache/toolret``."""
    configured = params.storage.cache_home if params is not None else ""
    root = (configured or os.environ.get("TOOLRET_CACHE_HOME")
            or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "toolret"))
    return under_project(root)
