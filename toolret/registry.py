"""The one registry: every method is one declarative :class:`Method`, registered with one call.

A method is one folder under ``toolret/methods/<name>/`` whose ``__init__`` builds its ``METHOD`` and calls
:func:`register_method` once. A ``Method`` holds what the method brings:

- ``components`` -- rewriters, retrievers and rerankers (:class:`Component`): how to build one for a
  catalog (``build(ctx)``), how to load a saved one (``load(path)``), which ``params.yaml`` sections it reads;
- ``pipelines`` -- names for compositions (:class:`NamedPipeline`: ``reinvoke`` = ``reinvoke-intents+reinvoke-qgen``);
- ``sections`` -- its ``params.yaml`` sections (:class:`Section`: a pydantic model, the single source of defaults);
- ``stages`` -- its DVC stage templates (:class:`StageTemplate`, most made by the factories of
  :mod:`toolret.stages`; ``toolret stages`` writes ``dvc.yaml`` from them, Dagster one asset per stage item);
- ``report`` -- its ablation report writer (``toolret report-ablations --method <name>``);
- ``generation_jobs`` -- its durable LLM jobs (``toolret generate-shards --job``);
- ``cli`` -- the ``toolret`` subcommands it contributes (:class:`CliCommand`).

Every lookup (:func:`component`, :func:`pipelines`, :func:`config_sections`, :func:`stage_templates`,
:func:`report_hook` ...) reads the registered methods. The core stages are a method like any other
(:mod:`toolret.methods.core`).

On the command line any registered pipeline name, component name or ``+``-joined composition
(``[rewriter+]retriever[+reranker...]``, e.g. ``reinvoke-intents+bm25``) names what to evaluate.

A method package outside the ``toolret`` tree (a *plugin*) registers its ``Method`` with the same call; it
is imported by module name (importable from ``sys.path`` or the project directory) when named by
``$TOOLRET_PLUGINS`` (comma-separated) or by the ``plugins:`` list of ``params.yaml`` -- see
:func:`load_plugins` and :func:`import_plugins`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from toolret.errors import CatalogError
from toolret.paths import data_dir, portable_path, project_dir, read_params_file
from toolret.roles import ROLES

if TYPE_CHECKING:
    from toolret.catalog.model import Catalog


@dataclass(frozen=True)
class BuildContext:
    """What a component builder gets: the catalog it will serve, the validated params (a
    :class:`toolret.config.CoreParams`, typed ``Any``: the registry never imports the config), and an
    optional ``model`` path (``--model``: an encoder folder, a fine-tune artifact ...)."""

    catalog: Catalog
    params: Any
    model: str | None = None

    def artifact_dir(self, group: str) -> Path:
        """``data/<group>/<dataset>``: where a component's stage artifacts for this catalog live."""
        return data_dir() / group / self.catalog.name

    @property
    def training_name(self) -> str:
        """The dataset a learning component of this catalog trains on: ``params.trained_on`` maps a
        test-only benchmark to one (its synthetic training catalog); else the catalog itself."""
        return (getattr(self.params, "trained_on", None) or {}).get(self.catalog.name, self.catalog.name)


@dataclass(frozen=True)
class Component:
    """A registered rewriter, retriever or reranker.

    Attributes:
        name: unique across roles (it is what users type).
        role: ``"rewriter"``, ``"retriever"`` or ``"reranker"``.
        build: ``ctx -> component`` (unfitted and unindexed; learned parts are loaded or trained here).
        load: ``path -> component`` for a directory written by the component's ``save``.
        sections: the ``params.yaml`` sections it reads (DVC param deps, MLflow params).
        description: one line for ``toolret datasets`` and docs.
        trains: its ``fit`` learns from a train split: the evaluated catalog's (on a dataset without
            one the CLI evaluates it on a k-fold of the test split: ``catalog.folds`` / ``catalog.auto_folds``)
            unless ``train_dataset(params)`` names another dataset it learns from.
        train_dataset: ``params -> dataset name | None``: where a learning component trains when that is
            not the evaluated catalog (ToolRerank's ``toolrerank.train_dataset``).
        reads_docs: ``params -> document variants`` it reads beside the pipeline's own (``hybrid``'s dense
            side reads ``cleaned``): ``toolret evaluate`` derives those the catalog lacks.
        reads_catalogs: ``params -> catalog names`` it loads whatever the evaluated catalog
            (``hybrid``'s ``dev_dataset``): every stage building it lists their curated folders as deps.
    """

    name: str
    role: str
    build: Callable[[BuildContext], Any]
    load: Callable[[Path], Any]
    sections: tuple[str, ...] = ()
    description: str = ""
    trains: bool = False  # fit learns from a train split (a dataset without one is k-folded, see cli)
    train_dataset: Callable[[Any], str | None] | None = None
    reads_docs: Callable[[Any], tuple[str, ...]] | None = None
    reads_catalogs: Callable[[Any], tuple[str, ...]] | None = None

    def learns_from(self, catalog_name: str, params: Any) -> bool:
        """Whether ``fit`` learns from this catalog's own train split (not from its own
        ``train_dataset(params)``, nor from ``params.trained_on[catalog_name]``)."""
        if not self.trains:
            return False
        other = self.train_dataset(params) if self.train_dataset is not None else None
        if other is None:
            other = (getattr(params, "trained_on", None) or {}).get(catalog_name)
        return other is None or other == catalog_name

    def embed_models(self, path: Path) -> None:
        """Copy the local models the component saved at ``path`` reads into that folder, where its class has
        an ``embed_models(path)`` (a self-contained save: :meth:`toolret.pipeline.Pipeline.save`); else
        nothing (it reads none, or only packaged ones)."""
        cls = getattr(self.load, "__self__", None) or getattr(self.load, "target_class", lambda: None)()
        embed = getattr(cls, "embed_models", None)
        if embed is not None:
            embed(path)

    @property
    def package(self) -> str:
        """The module that registered it (its source closure is the component's code)."""
        return self.build.__module__

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"component {self.name!r}: role must be one of {ROLES}, got {self.role!r}")


@dataclass(frozen=True)
class PipelineSpec:
    """``[rewriter] -> retriever -> [reranker ...]`` by component names."""

    retriever: str
    rewriter: str | None = None
    rerankers: tuple[str, ...] = ()
    name: str | None = None
    settings: tuple[tuple[str, Any], ...] = ()  # a registered pipeline's own params (NamedPipeline.settings)

    @property
    def components(self) -> list[str]:
        return [c for c in (self.rewriter, self.retriever, *self.rerankers) if c]

    @property
    def label(self) -> str:
        return self.name or "+".join(self.components)

    def reads_docs(self, params: Any) -> set[str]:
        """The document variants its components read beside the pipeline's own."""
        return {v for c in self.components if component(c).reads_docs for v in component(c).reads_docs(params)}

    def sections(self) -> list[str]:
        seen: dict[str, None] = {}
        for c in self.components:
            for s in component(c).sections:
                seen.setdefault(s, None)
        return list(seen)


@dataclass(frozen=True)
class StageTemplate:
    """One ``dvc.yaml`` stage definition, generated by ``toolret stages``.

    ``entry`` (``"toolret.cli:cmd_index"``) is the function the command runs: the stage's code deps are
    the source files it imports (transitively), derived by :mod:`toolret.stages`. ``outs`` entries are
    paths, or ``{path: {"cache": False}}`` for small artifacts kept in git.

    ``item_deps(params, item)`` gives each ``foreach`` item its own deps (e.g. a dataset's raw source
    folders). DVC cannot interpolate a list into ``deps``, so the stage is then written with a mapping
    ``foreach: {item: {src0: path, src1: path}}`` and deps ``${item.src0}`` ...; its ``cmd`` / ``outs``
    name the item ``${key}``. An item with fewer paths than the widest one repeats its last path.

    ``keep(params, item)`` drops ``foreach`` items that get no stage (a ``trained_on`` entry naming a training
    catalog has no test split to evaluate); the kept list or mapping is then written out literally.
    ``params_deps(params)``: deps read from params when ``dvc.yaml`` is generated (e.g. the dense-ft models
    the evaluated datasets' first stage reads). Either way: regenerate ``dvc.yaml`` after editing those params
    (``tests/test_stages.py`` checks it is current).
    """

    name: str
    desc: str
    cmd: str
    entry: str
    deps: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    outs: tuple[Any, ...] = ()
    foreach: str | None = None
    matrix: dict[str, Any] | None = None  # name -> "${params list}" or a literal list
    order: int = 100
    costly: bool = False  # hours of training / generation: `make run` runs it only where its outputs exist
    trains: bool = False  # trains a model: `make paper` (Dagster job toolret_all) reruns it even when up to date
    components: tuple[str, ...] = ()  # pipelines / components the command builds (their packages are code deps)
    components_param: str | None = None  # ... or a params list naming them (e.g. "methods")
    only_if: str | None = None  # a params key (dotted); the stage is generated only where its value is non-empty
    item_deps: Callable[[Any, str], tuple[str, ...]] | None = None  # per-item deps (with a foreach)
    keep: Callable[[Any, str], bool] | None = None  # the foreach items that get a stage (default: all)
    params_deps: Callable[[Any], tuple[str, ...]] | None = None  # deps derived from params
    # the module whose code wrote the template (what importing it executes is a code dep of the stage): a
    # stage factory of toolret.stages names itself; empty = the module of the Method listing it
    module: str = ""


# the most a file kept in git may weigh (a test checks every tracked file): trained artifacts are born small
# (LoRA adapters, learned embeddings) so a fresh clone evaluates every method without training anything
MAX_GIT_FILE_MB = 25


def in_git(*paths: str) -> tuple[dict[str, dict[str, bool]], ...]:
    """``StageTemplate.outs`` entries kept in git rather than the DVC cache (``cache: false``): small costly
    artifacts (LLM generations, trained adapters and embeddings), so a fresh clone has them without a remote
    and ``dvc repro`` reruns them only when their recorded deps change (``tests/test_dvc_lock.py``)."""
    return tuple({p: {"cache": False}} for p in paths)


@dataclass(frozen=True)
class NamedPipeline:
    """A name for a composition, e.g. ``NamedPipeline("reinvoke", "reinvoke-intents+reinvoke-qgen")``.

    ``spec`` may name a component by a params key, ``"${toolrerank.first_stage}+toolrerank-ce"``: it is
    resolved against the params :func:`parse_spec` gets (``--set`` overrides included).

    ``settings``: ``(("section.key", value), ...)`` that define the pipeline beyond its components (e.g.
    which views a reranker scores); applied to the params its components are built with, over any value of
    the same key (to vary one, spell the composition out and ``--set`` it)."""

    name: str
    spec: str
    description: str = ""
    settings: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Section:
    """``params.yaml`` section ``name`` validated by ``model``; ``staged``: it also gets a ``<name>_datasets``
    list naming the datasets its stages run on."""

    name: str
    model: type
    staged: bool = False


@dataclass(frozen=True)
class CliCommand:
    """A ``toolret`` subcommand a method contributes (``toolret <name> ...``).

    ``run`` (``"module:function"``, imported when the command runs) is called as ``function(args, params,
    catalog)``: ``params`` the validated ``params.yaml`` (``--params``, with ``--set`` overrides where
    ``overrides``), ``catalog`` the one ``--catalog DIR`` / ``--dataset NAME`` names where ``source``, else
    ``None``. ``arguments(parser)`` adds the command's own options."""

    name: str
    help: str
    run: str
    arguments: Callable[[Any], None] | None = None
    source: bool = False
    overrides: bool = True


@dataclass(frozen=True)
class Method:
    """Everything one method brings, registered at once by :func:`register_method` (see the module doc).

    ``report`` and the values of ``generation_jobs`` are ``"module:function"`` targets, imported on use:
    a report writer is called as ``(runs, datasets, out, params=..., notes=...)``; a generation job as
    ``(catalog, params, n)`` returning ``(prompts, sampling params, LazyCachedLLM, provenance)``.
    ``module`` (the package defining it) is filled in by :func:`register_method`."""

    name: str
    description: str = ""
    components: tuple[Component, ...] = ()
    pipelines: tuple[NamedPipeline, ...] = ()
    sections: tuple[Section, ...] = ()
    stages: tuple[StageTemplate, ...] = ()
    report: str | None = None
    generation_jobs: Mapping[str, str] = field(default_factory=dict)
    cli: tuple[CliCommand, ...] = ()
    module: str = ""

    def __post_init__(self) -> None:
        for name in ("components", "pipelines", "sections", "stages", "cli"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "generation_jobs", MappingProxyType(dict(self.generation_jobs)))


_METHODS: dict[str, Method] = {}
_PLUGINS: dict[str, str] = {}  # imported plugin module -> where it was configured
_loaded = False
PLUGINS_ENV = "TOOLRET_PLUGINS"
METHODS_ENTRY_POINTS = "toolret.methods"  # the methods shipped with toolret (pyproject.toml)

# what a method registers, by kind: the names it gives each (unique across methods)
_KINDS: dict[str, Callable[[Method], list[str]]] = {
    "component": lambda m: [c.name for c in m.components],
    "pipeline": lambda m: [p.name for p in m.pipelines],
    "section": lambda m: [s.name for s in m.sections],
    "stage": lambda m: [t.name for t in m.stages],
    "generation job": lambda m: list(m.generation_jobs),
    "command": lambda m: [c.name for c in m.cli],
}


def register_method(method: Method) -> Method:
    """Register a method package's :class:`Method` (its one registration call); returns it as registered
    (``module``: the calling module unless set). Registering a method of the same name from the same module
    again (a re-import) replaces it.

    Raises:
        ValueError: a name (method, component, pipeline, section, stage, generation job, command) already
            registered by another method, or a pipeline whose composition does not parse.
    """
    import sys

    if not method.module:
        method = replace(method, module=sys._getframe(1).f_globals.get("__name__", ""))
    previous = _METHODS.get(method.name)
    if previous is not None and previous.module != method.module:
        raise ValueError(f"method {method.name!r} registered twice ({previous.module}, {method.module})")
    for kind, names in _KINDS.items():
        mine = names(method)
        if len(set(mine)) != len(mine):
            raise ValueError(f"method {method.name!r}: a {kind} name given twice in {mine}")
        taken = {n: other.name for other in _METHODS.values() if other.name != method.name for n in names(other)}
        clash = {n: taken[n] for n in mine if n in taken}
        if clash:
            raise ValueError(f"method {method.name!r}: {kind} names {clash} already registered by those methods")
    _METHODS[method.name] = method
    try:
        for p in method.pipelines:
            if "${" not in p.spec:  # checked now; a template is checked when resolved
                _parse_composition(p.spec, name=p.name)
    except BaseException:
        if previous is None:
            del _METHODS[method.name]
        else:
            _METHODS[method.name] = previous
        raise
    return method


def methods() -> dict[str, Method]:
    """The registered methods by name (built-in and plugins)."""
    load_plugins()
    return dict(_METHODS)


def _components() -> dict[str, Component]:
    return {c.name: c for m in _METHODS.values() for c in m.components}


def _pipelines() -> dict[str, NamedPipeline]:
    return {p.name: p for m in _METHODS.values() for p in m.pipelines}


def _stages() -> dict[str, tuple[StageTemplate, Method]]:
    return {t.name: (t, m) for m in _METHODS.values() for t in m.stages}


def resolve_spec_template(spec: str, params: Any) -> str:
    """``spec`` with every ``${section.key}`` replaced by that value of ``params`` (the validated
    ``params.yaml``: the caller loads it, the registry never reads the config)."""
    import re

    if "${" not in spec:
        return spec

    def value(match: re.Match) -> str:
        node = params
        for part in match.group(1).split("."):
            node = getattr(node, part, None)
            if node is None:
                raise CatalogError(f"pipeline {spec!r}: params key {match.group(1)!r} is not set")
        return str(node)

    return re.sub(r"\$\{([\w.]+)\}", value, spec)


def stage_owner(name: str) -> str:
    """The module that wrote stage template ``name`` (e.g. ``toolret.methods.reinvoke``; a factory's own
    module for a template it made)."""
    template, method = _stages()[name]
    return template.module or method.module


def loads(target: str) -> Callable[[Path], Any]:
    """A :attr:`Component.load` for ``"module:Class"``: ``path -> Class.load(path)``, the module imported only
    when a saved component is loaded (registration stays cheap)."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"loads({target!r}): expected 'module:Class'")

    def target_class() -> Any:
        return getattr(importlib.import_module(module), name)

    def load(path: Path) -> Any:
        return target_class().load(path)

    load.__qualname__ = f"loads({target!r})"
    load.target_class = target_class  # the class itself (Component.embed_models asks it)
    return load


def _target(kind: str, name: str, target: str | None, known: list[str]):
    if not target:
        raise CatalogError(f"no {kind} {name!r}; known: {known}")
    module, _, func = target.partition(":")
    return getattr(importlib.import_module(module), func)


def report_hook(method: str):
    """The ablation report writer of ``method`` (``toolret report-ablations --method``)."""
    load_plugins()
    reports = sorted(n for n, m in _METHODS.items() if m.report)
    found = _METHODS.get(method)
    if found is None or not found.report:
        raise CatalogError(f"no ablation report for {method!r}; methods with one: {reports}")
    return _target("ablation report", method, found.report, reports)


def generation_job(name: str):
    load_plugins()
    jobs = {n: t for m in _METHODS.values() for n, t in m.generation_jobs.items()}
    return _target("generation job", name, jobs.get(name), sorted(jobs))


def generation_jobs() -> list[str]:
    load_plugins()
    return sorted(n for m in _METHODS.values() for n in m.generation_jobs)


def cli_commands() -> list[CliCommand]:
    """The ``toolret`` subcommands the registered methods contribute."""
    load_plugins()
    return [c for _, m in sorted(_METHODS.items()) for c in m.cli]


def load_plugins() -> None:
    """Import the methods shipped with toolret (the ``toolret.methods`` entry points of ``pyproject.toml``) so
    every method registers itself (cheap: heavy imports are lazy), then
    the plugins (:func:`import_plugins`): on the first call those of the project ``params.yaml``'s
    ``plugins:`` list (the raw key, read before any validation), then those of ``$TOOLRET_PLUGINS``
    (comma-separated, read on every call). A params file validated later imports its own ``plugins:``
    first (:func:`toolret.config.validate_params`): a plugin's sections are always registered before the
    params naming them are validated."""
    global _loaded
    if not _loaded:
        builtin = sorted(entry_points(group=METHODS_ENTRY_POINTS), key=lambda ep: ep.name)
        if not builtin:
            raise CatalogError(f"no {METHODS_ENTRY_POINTS!r} entry points: toolret is not installed "
                               "(`make setup`, or `pip install -e .` in the checkout)")
        for ep in builtin:
            importlib.import_module(ep.value)
        data, path = read_params_file()
        if isinstance(data.get("plugins"), list):  # another type: validation names the bad key
            import_plugins(data["plugins"], f"{path}: plugins")
        _loaded = True
    import_plugins(os.environ.get(PLUGINS_ENV, ""), f"${PLUGINS_ENV}")


def import_plugins(modules: str | list[str] | tuple[str, ...], source: str) -> None:
    """Import plugin method packages (module names; a string is comma-separated) configured in ``source``.

    A plugin is a module outside ``toolret/methods`` registering its :class:`Method` with
    :func:`register_method`, exactly like a built-in method package. It is
    imported from ``sys.path``, the project directory appended to it; a module already imported is
    skipped, so naming a plugin twice (``$TOOLRET_PLUGINS`` and ``params.yaml``) is harmless.

    Raises:
        CatalogError: a module that cannot be found, naming it and ``source``.
    """
    import sys

    names = modules.split(",") if isinstance(modules, str) else list(modules)
    for name in (str(n).strip() for n in names):
        if not name or name in _PLUGINS:
            continue
        root = str(project_dir())
        if root not in sys.path:
            sys.path.append(root)
        _PLUGINS[name] = source
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            del _PLUGINS[name]
            if e.name and (name == e.name or name.startswith(e.name + ".")):
                raise CatalogError(f"plugin module {name!r} (configured in {source}) not found: not importable "
                                   f"from sys.path or the project directory {root}") from None
            raise
        except BaseException:
            del _PLUGINS[name]
            raise


def plugin_modules() -> dict[str, str]:
    """The imported plugin modules, each with where it was configured."""
    return dict(_PLUGINS)


def component(name: str) -> Component:
    load_plugins()
    found = _components()
    if name not in found:
        raise CatalogError(f"unknown component {name!r}; choose one of {sorted(found)}")
    return found[name]


def components(role: str | None = None) -> list[Component]:
    load_plugins()
    return [c for n, c in sorted(_components().items()) if role is None or c.role == role]


def pipelines(params: Any) -> dict[str, tuple[PipelineSpec, str]]:
    """Every named pipeline, templates resolved against ``params`` (the validated ``params.yaml``)."""
    load_plugins()
    return {n: (parse_spec(n, params), p.description) for n, p in sorted(_pipelines().items())}


def config_sections() -> dict[str, tuple[type, bool]]:
    load_plugins()
    return {s.name: (s.model, s.staged) for m in _METHODS.values() for s in m.sections}


def stage_templates() -> list[StageTemplate]:
    load_plugins()
    return sorted((t for t, _ in _stages().values()), key=lambda t: (t.order, t.name))


def available_methods() -> list[str]:
    """Every name ``--method`` takes without a ``+``: pipelines and components."""
    load_plugins()
    return sorted(set(_pipelines()) | set(_components()))


def parse_spec(spec: str, params: Any, name: str | None = None) -> PipelineSpec:
    """``"reinvoke"`` (a registered pipeline), ``"bm25"`` (a retriever) or ``"a+b+c"`` (a composition).
    ``params`` (the validated ``params.yaml``, ``--set`` overrides included) resolves a registered pipeline
    that names a component by a params key (:func:`resolve_spec_template`).

    Raises:
        CatalogError: an unknown name, or components in the wrong order / roles.
    """
    load_plugins()
    spec = spec.strip()
    named = _pipelines().get(spec)
    if named is not None:
        parsed = _parse_composition(resolve_spec_template(named.spec, params), name=spec)
        return replace(parsed, settings=tuple(named.settings))
    return _parse_composition(spec, name)


def _parse_composition(spec: str, name: str | None = None) -> PipelineSpec:
    """``"a+b+c"`` (or one component) by component names: no registered pipeline name, no template."""
    load_plugins()
    spec = spec.strip()
    parts = [p.strip() for p in spec.split("+")]
    if not all(parts):
        raise CatalogError(f"pipeline {spec!r}: empty component name")
    roles = [component(p).role for p in parts]
    expected = "rewriter? retriever reranker*"
    i = 0
    rewriter = None
    if roles and roles[0] == "rewriter":
        rewriter, i = parts[0], 1
    if i >= len(parts) or roles[i] != "retriever":
        raise CatalogError(f"pipeline {spec!r}: expected {expected}, got roles {roles}")
    retriever = parts[i]
    rerankers = tuple(parts[i + 1:])
    bad = [p for p, r in zip(rerankers, roles[i + 1:]) if r != "reranker"]
    if bad:
        raise CatalogError(f"pipeline {spec!r}: {bad} after the retriever must be rerankers ({expected})")
    return PipelineSpec(retriever=retriever, rewriter=rewriter, rerankers=rerankers,
                        name=name or (spec if len(parts) == 1 else None))


def build_component(name: str, ctx: BuildContext) -> Any:
    comp = component(name)
    obj = comp.build(ctx)
    obj.name = name
    return obj


COMPONENT_FILE = "component.json"


def load_component(path: str | Path) -> Any:
    """Load a component saved by its ``save(path)`` (``component.json`` names it)."""
    import json

    path = Path(path)
    meta_file = path / COMPONENT_FILE
    if not meta_file.is_file():
        raise CatalogError(f"{path}: not a saved component (no {COMPONENT_FILE})")
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    name = meta.get("component")
    obj = component(name).load(path)
    obj.name = name
    return obj


def write_component_meta(path: Path, name: str, **extra: Any) -> None:
    """Write ``component.json`` (called by every component's ``save`` inside its atomic directory); paths
    inside the project are stored project-relative (:func:`toolret.paths.portable_path`)."""
    import json

    (path / COMPONENT_FILE).write_text(json.dumps(portable_path({"component": name, **extra}), indent=1, default=str),
                                       encoding="utf-8")


__all__ = ["BuildContext", "CliCommand", "Component", "Method", "NamedPipeline", "PipelineSpec", "Section",
           "StageTemplate", "available_methods", "build_component", "cli_commands", "component", "components",
           "config_sections", "generation_job", "generation_jobs", "import_plugins", "in_git", "load_component",
           "load_plugins", "methods", "parse_spec", "pipelines", "plugin_modules", "register_method", "report_hook",
           "resolve_spec_template", "stage_owner", "stage_templates", "write_component_meta"]
