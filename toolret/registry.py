"""The one registry: components (per role), named pipelines, config sections and DVC stage templates.

A method is one folder under ``toolret/methods/<name>/`` whose ``__init__`` registers what it brings:

- :func:`register_component` -- a rewriter, retriever or reranker: how to build it for a catalogue
  (``build(ctx)``), how to load a saved one (``load(path)``), which ``params.yaml`` sections it reads;
- :func:`register_pipeline` -- a name for a composition (``reinvoke`` = ``reinvoke-intents+reinvoke-qgen``);
- :func:`register_section` -- its ``params.yaml`` section (a pydantic model, the single source of defaults);
- :func:`register_stage` -- its DVC stage templates (``toolret stages`` writes ``dvc.yaml`` from them;
  Dagster builds one asset per stage item from ``dvc.yaml``).

On the command line any registered pipeline name, component name or ``+``-joined composition
(``[rewriter+]retriever[+reranker...]``, e.g. ``reinvoke-intents+bm25``) names what to evaluate.

A method package outside the ``toolret`` tree (a *plugin*) registers itself with the same calls; it is
imported by module name (importable from ``sys.path`` or the project directory) when named by
``$TOOLRET_PLUGINS`` (comma-separated) or by the ``plugins:`` list of ``params.yaml`` -- see
:func:`load_plugins` and :func:`import_plugins`.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolret.catalog.model import CatalogError
from toolret.roles import ROLES

if TYPE_CHECKING:
    from toolret.catalog.model import Catalog
    from toolret.config import CoreParams


@dataclass(frozen=True)
class BuildContext:
    """What a component builder gets: the catalogue it will serve, the validated params, and an
    optional ``model`` path (``--model``: an encoder folder, a fine-tune artifact ...)."""

    catalog: Catalog
    params: CoreParams
    model: str | None = None

    def artifact_dir(self, group: str) -> Path:
        """``data/<group>/<dataset>``: where a component's stage artifacts for this catalogue live."""
        from toolret.config import data_dir

        return data_dir() / group / self.catalog.name

    @property
    def training_name(self) -> str:
        """The dataset a learning component of this catalogue trains on: ``params.trained_on`` maps a
        test-only benchmark to one (its synthetic training catalogue); else the catalogue itself."""
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
        trains: its ``fit`` learns from a train split: the evaluated catalogue's (on a dataset without
            one the CLI evaluates it on a k-fold of the test split: ``catalog.folds`` / ``catalog.auto_folds``)
            unless ``train_dataset(params)`` names another dataset it learns from.
        train_dataset: ``params -> dataset name | None``: where a learning component trains when that is
            not the evaluated catalogue (ToolRerank's ``toolrerank.train_dataset``).
        reads_docs: ``params -> document variants`` it reads beside the pipeline's own (``hybrid``'s dense
            side reads ``cleaned``): ``toolret evaluate`` derives those the catalogue lacks.
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

    def learns_from(self, catalog_name: str, params: Any) -> bool:
        """Whether ``fit`` learns from this catalogue's own train split (not from its own
        ``train_dataset(params)``, nor from ``params.trained_on[catalog_name]``)."""
        if not self.trains:
            return False
        other = self.train_dataset(params) if self.train_dataset is not None else None
        if other is None:
            other = (getattr(params, "trained_on", None) or {}).get(catalog_name)
        return other is None or other == catalog_name

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


# the most a file kept in git may weigh (a test checks every tracked file): trained artifacts are born small
# (LoRA adapters, learned embeddings) so a fresh clone evaluates every method without training anything
MAX_GIT_FILE_MB = 25


def in_git(*paths: str) -> tuple[dict[str, dict[str, bool]], ...]:
    """``StageTemplate.outs`` entries kept in git rather than the DVC cache (``cache: false``): small costly
    artifacts (LLM generations, trained adapters and embeddings), so a fresh clone has them without a remote
    and ``dvc repro`` reruns them only when their recorded deps change (``tests/test_dvc_lock.py``)."""
    return tuple({p: {"cache": False}} for p in paths)


_REPORTS: dict[str, str] = {}
_GENERATION_JOBS: dict[str, str] = {}
_COMPONENTS: dict[str, Component] = {}
_PIPELINES: dict[str, tuple[str, str]] = {}  # name -> (spec, possibly a ${params} template; description)
_SECTIONS: dict[str, tuple[type, bool]] = {}
_STAGES: dict[str, StageTemplate] = {}
_STAGE_OWNERS: dict[str, str] = {}
_PLUGINS: dict[str, str] = {}  # imported plugin module -> where it was configured
_loaded = False
PLUGINS_ENV = "TOOLRET_PLUGINS"


def register_component(component_: Component) -> Component:
    other = _COMPONENTS.get(component_.name)
    if other is not None and other is not component_ and other.build is not component_.build:
        raise ValueError(f"component name {component_.name!r} registered twice")
    _COMPONENTS[component_.name] = component_
    return component_


def register_pipeline(name: str, spec: str, description: str = "") -> None:
    """A named composition, e.g. ``register_pipeline("reinvoke", "reinvoke-intents+reinvoke-qgen")``.

    ``spec`` may name a component by a params key, ``"${toolrerank.first_stage}+toolrerank-ce"``: it is
    resolved against the params :func:`parse_spec` gets (``--set`` overrides included)."""
    if "${" not in spec:
        parse_spec(spec, name=name, allow_named=False)  # checked now; a template is checked when resolved
    _PIPELINES[name] = (spec, description)


def resolve_spec_template(spec: str, params: Any = None) -> str:
    """``spec`` with every ``${section.key}`` replaced by that params value (default: ``params.yaml``)."""
    import re

    if "${" not in spec:
        return spec
    if params is None:
        from toolret.config import load_params

        params = load_params()

    def value(match: re.Match) -> str:
        node = params
        for part in match.group(1).split("."):
            node = getattr(node, part, None)
            if node is None:
                raise CatalogError(f"pipeline {spec!r}: params key {match.group(1)!r} is not set")
        return str(node)

    return re.sub(r"\$\{([\w.]+)\}", value, spec)


def register_section(name: str, model: type, *, staged: bool = False) -> None:
    """``params.yaml`` section ``name`` validated by ``model``; ``staged``: it also gets a
    ``<name>_datasets`` list naming the datasets its stages run on."""
    _SECTIONS[name] = (model, staged)


def register_stage(template: StageTemplate) -> None:
    """Register a stage template; the calling module is recorded as its owner (a code dep of the stage)."""
    import sys

    _STAGES[template.name] = template
    _STAGE_OWNERS[template.name] = sys._getframe(1).f_globals.get("__name__", "")


def stage_owner(name: str) -> str:
    """The module that registered stage template ``name`` (e.g. ``toolret.methods.reinvoke``)."""
    return _STAGE_OWNERS[name]


def register_report(method: str, target: str) -> None:
    """A method's ablation report writer, ``"module:function"`` (``toolret report-ablations --method``)."""
    _REPORTS[method] = target


def report_hook(method: str):
    load_plugins()
    if method not in _REPORTS:
        raise CatalogError(f"no ablation report for {method!r}; methods with one: {sorted(_REPORTS)}")
    module, _, func = _REPORTS[method].partition(":")
    return getattr(importlib.import_module(module), func)


def register_generation_job(name: str, target: str) -> None:
    """A durable LLM job (``toolret generate-shards --job NAME``): ``target`` ("module:function") is
    called with ``(catalog, params, n)`` and returns ``(prompts, sampling params, LazyCachedLLM, provenance)``."""
    _GENERATION_JOBS[name] = target


def generation_job(name: str):
    load_plugins()
    if name not in _GENERATION_JOBS:
        raise CatalogError(f"no generation job {name!r}; known: {sorted(_GENERATION_JOBS)}")
    module, func = _GENERATION_JOBS[name].split(":")
    return getattr(importlib.import_module(module), func)


def generation_jobs() -> list[str]:
    load_plugins()
    return sorted(_GENERATION_JOBS)


def load_plugins() -> None:
    """Import ``toolret.methods.*`` so every method registers itself (cheap: heavy imports are lazy), then
    the plugins (:func:`import_plugins`): on the first call those of the project ``params.yaml``'s
    ``plugins:`` list (the raw key, read before any validation), then those of ``$TOOLRET_PLUGINS``
    (comma-separated, read on every call). A params file validated later imports its own ``plugins:``
    first (:func:`toolret.config.validate_params`): a plugin's sections are always registered before the
    params naming them are validated."""
    global _loaded
    if not _loaded:
        import toolret.methods as methods_pkg

        for info in sorted(pkgutil.iter_modules(methods_pkg.__path__), key=lambda i: i.name):
            importlib.import_module(f"toolret.methods.{info.name}")
        from toolret.config import read_params_file

        data, path = read_params_file()
        if isinstance(data.get("plugins"), list):  # another type: validation names the bad key
            import_plugins(data["plugins"], f"{path}: plugins")
        _loaded = True
    import_plugins(os.environ.get(PLUGINS_ENV, ""), f"${PLUGINS_ENV}")


def import_plugins(modules: str | list[str] | tuple[str, ...], source: str) -> None:
    """Import plugin method packages (module names; a string is comma-separated) configured in ``source``.

    A plugin is a module outside ``toolret/methods`` registering components, pipelines, sections and stage
    templates with this module's ``register_*`` calls, exactly like a built-in method package. It is
    imported from ``sys.path``, the project directory appended to it; a module already imported is
    skipped, so naming a plugin twice (``$TOOLRET_PLUGINS`` and ``params.yaml``) is harmless.

    Raises:
        CatalogError: a module that cannot be found, naming it and ``source``.
    """
    import sys

    from toolret.config import project_dir

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
    if name not in _COMPONENTS:
        raise CatalogError(f"unknown component {name!r}; choose one of {sorted(_COMPONENTS)}")
    return _COMPONENTS[name]


def components(role: str | None = None) -> list[Component]:
    load_plugins()
    return [c for n, c in sorted(_COMPONENTS.items()) if role is None or c.role == role]


def pipelines(params: Any = None) -> dict[str, tuple[PipelineSpec, str]]:
    """Every named pipeline, templates resolved against ``params`` (default ``params.yaml``)."""
    load_plugins()
    return {n: (parse_spec(n, params=params), d) for n, (_, d) in sorted(_PIPELINES.items())}


def config_sections() -> dict[str, tuple[type, bool]]:
    load_plugins()
    return dict(_SECTIONS)


def stage_templates() -> list[StageTemplate]:
    load_plugins()
    return sorted(_STAGES.values(), key=lambda t: (t.order, t.name))


def available_methods() -> list[str]:
    """Every name ``--method`` takes without a ``+``: pipelines and components."""
    load_plugins()
    return sorted(set(_PIPELINES) | set(_COMPONENTS))


def parse_spec(spec: str, name: str | None = None, allow_named: bool = True, params: Any = None) -> PipelineSpec:
    """``"reinvoke"`` (a registered pipeline), ``"bm25"`` (a retriever) or ``"a+b+c"`` (a composition).
    ``params`` resolves a registered pipeline that names a component by a params key (default ``params.yaml``).

    Raises:
        CatalogError: an unknown name, or components in the wrong order / roles.
    """
    load_plugins()
    spec = spec.strip()
    if allow_named and spec in _PIPELINES:
        return parse_spec(resolve_spec_template(_PIPELINES[spec][0], params), name=spec, allow_named=False)
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
    inside the project are stored project-relative (:func:`toolret.config.portable_path`)."""
    import json

    from toolret.config import portable_path

    (path / COMPONENT_FILE).write_text(json.dumps(portable_path({"component": name, **extra}), indent=1, default=str),
                                       encoding="utf-8")


__all__ = ["BuildContext", "Component", "PipelineSpec", "StageTemplate", "available_methods", "build_component",
           "component", "components", "config_sections", "import_plugins", "load_component", "load_plugins",
           "parse_spec", "plugin_modules",
           "pipelines", "register_component", "register_pipeline", "register_section", "register_stage",
           "resolve_spec_template",
           "stage_templates", "write_component_meta"]
