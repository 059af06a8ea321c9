"""The stage templates a method declares (data): the index / evaluate pair of a saved pipeline, an ablation grid,
the DVC dep paths of trained artifacts.

A method's registration lists :class:`~toolret.registry.StageTemplate` values built here; the platform's
:mod:`toolret.stages` turns them into ``dvc.yaml`` (items, code deps read from the import graph). Nothing here
runs DVC or imports the platform: a method declares its stages without importing the generator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolret.paths import data_dir, model_dir
from toolret.registry import StageTemplate


def model_dep(training: str, component: str) -> str:
    """``component``'s artifact trained on ``training`` (:func:`toolret.paths.model_dir`) as a DVC dep path."""

    return (Path("data") / model_dir(training, component).relative_to(data_dir())).as_posix()


def dense_ft_deps(params: Any, catalog: str) -> tuple[str, ...]:
    """The dense-ft a catalog's learning components read (its ``trained_on`` entry, else its own), as DVC
    deps: ``data/models/<training>/dense-ft``, plus ``data/curated/<training>`` where that is another
    catalog (loading the artifact checks its key against that catalog's train split)."""
    training = (param_value(params, "trained_on") or {}).get(catalog, catalog)
    model = model_dep(training, "dense-ft")
    return (model,) if training == catalog else (model, f"data/curated/{training}")


def index_and_evaluate(method: str, *, names: tuple[str, str], orders: tuple[int, int], index_desc: str,
                       evaluate_desc: str, foreach: str | None = None, matrix: dict[str, Any] | None = None,
                       components_param: str | None = None, options: str = "", deps: tuple[str, ...] = (),
                       params: tuple[str, ...] = (), dataset: str = "${item}", keep: Any = None,
                       params_deps: Any = None) -> tuple[StageTemplate, StageTemplate]:
    """The two stages that save a method's pipeline on each dataset of ``foreach`` (or each cell of
    ``matrix``) and evaluate it on the test split: ``toolret index --method <method><options>`` into
    ``data/indexes/<ds>/<method>`` (``deps``: the trained artifacts it reads; ``params``: the sections it
    reads), then ``toolret evaluate-index`` into ``data/runs/<ds>/<method>``. ``names`` / ``orders``: the
    (index, evaluate) stage names and orders; ``dataset`` / ``method``: the evaluated dataset's and the
    method's variables (``${key}`` when ``foreach`` is a mapping whose values name something else, e.g. the
    training catalog of ``trained_on``; ``${item.method}`` in a matrix, whose components are then the
    params list ``components_param``). ``keep``: the ``foreach`` items evaluated (:class:`StageTemplate`);
    ``params_deps``: the index's deps read from params. The templates name this module as the one that wrote
    them (a code dep of the stages), not the method listing them."""
    index = f"data/indexes/{dataset}/{method}"
    components = () if components_param else (method,)
    loop = {"foreach": foreach, "matrix": matrix, "components_param": components_param, "keep": keep}
    return (StageTemplate(
        name=names[0], order=orders[0], desc=index_desc, params_deps=params_deps, **loop,
        cmd=f"toolret index --catalog data/curated/{dataset} --method {method}{options} --out {index}",
        entry="toolret.cli:cmd_index", components=components,
        deps=(f"data/curated/{dataset}", *deps), params=params, outs=(index,), module=__name__,
    ), StageTemplate(
        name=names[1], order=orders[1], desc=evaluate_desc, **loop,
        cmd=f"toolret evaluate-index --catalog data/curated/{dataset} --index {index} "
            f"--out data/runs/{dataset}/{method}",
        entry="toolret.cli:cmd_evaluate_index", components=components,
        deps=(f"data/curated/{dataset}", index), params=("evaluation",), outs=(f"data/runs/{dataset}/{method}",),
        module=__name__,
    ))


def ablation_grid(method: str, *, grid: str, order: int, desc: str, components: tuple[str, ...],
                  deps: tuple[str, ...] = (), params: tuple[str, ...] = (), outs: tuple[str, ...] = (),
                  costly: bool = False, params_deps: Any = None) -> StageTemplate:
    """The stage evaluating every row of a method's params grid (``toolret evaluate-grid --grid <grid>``) on
    each dataset of ``<method>_datasets`` into ``data/runs/<ds>/<method>-ablations`` (``deps``: what it reads
    beside the curated catalog; ``outs``: anything it writes beside the runs, e.g. the rows' models)."""
    return StageTemplate(
        name=f"{method}_ablations", order=order, costly=costly, foreach=f"${{{method}_datasets}}", desc=desc,
        cmd=f"toolret evaluate-grid --catalog data/curated/${{item}} --grid {grid} "
            f"--out data/runs/${{item}}/{method}-ablations",
        entry="toolret.cli:cmd_evaluate_grid", components=components, deps=("data/curated/${item}", *deps),
        params=params, outs=(f"data/runs/${{item}}/{method}-ablations", *outs), module=__name__,
        params_deps=params_deps,
    )


def param_value(params: Any, dotted: str) -> Any:
    """``params`` (validated model or dict) at a dotted key, ``None`` where absent."""
    value: Any = params
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value
