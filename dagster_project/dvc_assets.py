"""Dagster assets built from ``dvc.yaml`` — one asset per DVC stage item, executed by DVC.

As dagster-dbt builds assets from a dbt manifest, this module asks DVC itself for the pipeline's
stages (``Repo(project).index.stages``: ``foreach``/``matrix`` expansion and ``${...}`` interpolation
are DVC's), derives each stage's upstream stages from its deps and the other stages' outs, and wraps
each stage item in an asset that runs ``dvc repro --single-item <stage>``. DVC records every output
version in ``dvc.lock``; Dagster adds checks, schedules, sensors, run history and reports.

Asset keys are ``[<stage>, <label>]``, and the label (the last key part, the only one the asset graph
shows on a node) names what the item is about: ``<dataset>.<method>`` where both are known
(``index@mtrb-restbench-bm25`` -> ``["index", "mtrb-restbench.bm25"]``, ``finetune@toollens`` ->
``["finetune", "toollens.dense-ft"]``), else the item (``catalog@toollens`` -> ``["catalog", "toollens"]``),
the matrix values joined by ``.`` for other matrices. The method is the data layout's
(``data/<kind>/<dataset>/<method>``), else the command's ``--method`` / ``--component``. The group is the stage name,
shortened when the asset graph would cut it. Each of these choices (facets, key, group, description, tags,
metadata, checks) is a method of one :class:`DvcTranslator`, overridable part by part (as dagster-dbt's
``DagsterDbtTranslator``); :func:`load_stage_items`, :func:`build_dvc_assets` and the code location
(``build_definitions(project_dir, translator)``) take one.
"""

# no `from __future__ import annotations`: Dagster reads the op signatures' annotations at runtime

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_project.resources import DvcResource, costly_stale_failure, describe_changes

RESULTS_ROOT = "data/runs"  # where evaluate stages write <dataset>/<method>/<docs>.json
# The asset graph cuts a group name longer than this (Dagster 1.13's collapsed group node: 320 px wide,
# name at 30 px when zoomed out: floor((320 - 36) / (30 * 0.53)) = 17 characters).
GROUP_NAME_MAX = 17


@dataclass(frozen=True)
class StageItem:
    """One executable DVC stage (a plain stage or one ``foreach``/``matrix`` item).

    Attributes:
        name: DVC's stage name, as ``dvc repro`` takes it (``"index@toollens-bm25"``).
        stage: the stage definition's name (``"index"``); the asset group.
        key_path: the asset key path.
        facets: what the item is about, e.g. ``{"dataset": "toollens", "method": "bm25"}``.
        cmd: the stage command (for the description).
        deps: path deps relative to the project dir (params excluded).
        params: the params the stage reads (``["bm25", "dense"]``).
        outs: output paths relative to the project dir.
        upstream: names of the stage items whose outs this item depends on.
        desc: the stage's ``desc:`` in ``dvc.yaml`` (one sentence on what the asset is; ``""`` if none).
    """

    name: str
    stage: str
    key_path: tuple[str, ...]
    facets: Mapping[str, str]
    cmd: str
    deps: tuple[str, ...]
    params: tuple[str, ...]
    outs: tuple[str, ...]
    upstream: tuple[str, ...] = field(default=())
    costly: bool = False  # dvc.yaml `meta: {costly: true}`: hours of training / generation
    desc: str = ""
    trains: bool = False  # dvc.yaml `meta: {trains: true}`: trains a model (`toolret_all` retrains it)

    @property
    def asset_key(self) -> dg.AssetKey:
        return dg.AssetKey(list(self.key_path))

    @property
    def op_name(self) -> str:
        return op_name_for(self.name)

    @property
    def dataset(self) -> str | None:
        return self.facets.get("dataset")

    @property
    def method(self) -> str | None:
        return self.facets.get("method")

    @property
    def result_dirs(self) -> tuple[str, ...]:
        """Outs that hold evaluation result JSONs (``data/runs/<dataset>/<method>``)."""
        return tuple(o for o in self.outs if o == RESULTS_ROOT or o.startswith(RESULTS_ROOT + "/"))


def op_name_for(stage_name: str) -> str:
    """A valid Dagster op name for a DVC stage name (``index@a-b`` -> ``dvc__index__a_b``)."""
    return "dvc__" + re.sub(r"[^A-Za-z0-9_]", "_", stage_name.replace("@", "__"))


def default_project_dir() -> Path:
    """``$TOOLRET_PROJECT_DIR`` or the repository root (the parent of ``dagster_project/``)."""
    env = os.environ.get("TOOLRET_PROJECT_DIR")
    return Path(env).resolve() if env else Path(__file__).resolve().parent.parent


def _unwrap(v: Any) -> Any:
    """DVC wraps resolved values in ``dvc.parsing.context.Value`` nodes; return plain Python."""
    if isinstance(v, Mapping):
        return {k: _unwrap(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_unwrap(x) for x in v]
    return getattr(v, "value", v)


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool))


def _rel(path: str, root: Path) -> str:
    p = Path(path)
    try:
        return p.resolve().relative_to(root).as_posix() if p.is_absolute() else p.as_posix()
    except ValueError:  # outside the project (an external dep)
        return p.as_posix()


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


@dataclass(frozen=True)
class DvcStage:
    """What DVC says of one stage item, before translation: its name, definition, ``foreach`` key or
    ``matrix`` values, command and outs, and the names in the project's ``*datasets`` params lists."""

    name: str
    stage: str
    item: str | None
    matrix: Mapping[str, Any] | None
    cmd: str
    outs: tuple[str, ...]
    datasets: frozenset[str] = frozenset()


class DvcTranslator:
    """How a DVC stage item becomes a Dagster asset: facets, key, group, description, tags, metadata and
    checks, one method each. Subclass and override a part; pass the instance to
    ``build_definitions(project_dir, translator)`` (or :func:`load_stage_items` / :func:`build_dvc_assets`)."""

    #: the project's data layout, naming dataset and method (``data/<kind>/<dataset>/<method>``)
    layout = re.compile(r"^data/(?:catalogs|curated|models|indexes|runs)/(?P<dataset>[^/]+)(?:/(?P<method>[^/]+))?")
    #: a command's ``--method`` (a pipeline: ``toolret evaluate --method bm25``) or ``--component`` (``toolret fit
    #: --component reinvoke-qgen``, outs elsewhere)
    cmd_method = re.compile(r"--(?:method|component)[= ](?P<method>[A-Za-z0-9_.+\-\[\]]+)")
    #: words shortened in a group name over :data:`GROUP_NAME_MAX`
    group_words: Mapping[str, str] = {"evaluate": "eval", "ablations": "ablate"}
    #: a method ``<base><suffix>`` gets a quality gate against ``<base>`` on the same dataset
    gated_suffix = "-ft"

    # -- what an item is about, and its key -------------------------------------------------------
    def facets(self, stage: DvcStage) -> dict[str, str]:
        """``{"dataset": ..., "method": ...}`` (a matrix's scalar values, or ``item``): the foreach key
        (a dataset when it is one), then the data layout of the outs, then the command's ``--method`` / ``--component``."""
        facets: dict[str, str] = {}
        if stage.matrix is not None:
            facets.update({k: str(v) for k, v in stage.matrix.items() if _scalar(v)})
        elif stage.item is not None:
            facets["item"] = stage.item
            if stage.item in stage.datasets:
                facets["dataset"] = stage.item
        for o in stage.outs:
            m = self.layout.match(o)
            if m:
                facets.setdefault("dataset", m.group("dataset"))
                if m.group("method"):
                    facets.setdefault("method", m.group("method"))
        m = self.cmd_method.search(stage.cmd)
        if m and "method" not in facets:
            facets["method"] = m.group("method")
        return facets

    def label(self, facets: Mapping[str, str], values: Sequence[str] = ()) -> str | None:
        """The last asset-key part: a matrix item's values joined by ``.`` (``toollens.bm25`` for a
        ``{dataset, method}`` matrix); else ``<item or dataset>.<method>`` when the method is known, else
        the item or dataset alone; ``None`` if nothing is known (a plain stage keeps the key ``[<stage>]``)."""
        if values:
            return ".".join(values)
        head, method = facets.get("item") or facets.get("dataset"), facets.get("method")
        if head and method and method != head:
            return f"{head}.{method}"
        return head

    def key_path(self, stage: DvcStage, facets: Mapping[str, str]) -> tuple[str, ...]:
        """``(<stage>, <label>)``, or ``(<stage>,)`` for a plain stage."""
        values = ([str(v) if _scalar(v) else f"{k}{i}" for i, (k, v) in enumerate(stage.matrix.items())]
                  if stage.matrix is not None else [])
        label = self.label(facets, values)
        return (stage.stage, label) if label else (stage.stage,)

    # -- the asset spec ---------------------------------------------------------------------------
    def group_name(self, stage: str) -> str:
        """The asset group of a stage: its name, or when longer than :data:`GROUP_NAME_MAX` its words
        shortened (``evaluate_toolrerank`` -> ``eval_toolrerank``, ``reinvoke_ablations`` -> ``reinvoke_ablate``)."""
        if len(stage) <= GROUP_NAME_MAX:
            return stage
        short = "_".join(self.group_words.get(w, w) for w in stage.split("_"))
        return short if len(short) <= GROUP_NAME_MAX else short[:GROUP_NAME_MAX]

    def description(self, item: "StageItem", fallback: str | None = None) -> str:
        """``[<dataset>]`` (the graph shows only a key's last part, e.g. ``bm25``), then the stage's
        ``desc:`` from ``dvc.yaml`` (or ``fallback``, default the stage name and command)."""
        text = item.desc or fallback or f"DVC stage `{item.name}`: `{item.cmd}`"
        if item.dataset:
            text = f"[{item.dataset}] {text}"
        return f"{text}\n\nDVC stage `{item.name}`; command: `{item.cmd}`" if item.desc else text

    def tags(self, item: "StageItem") -> dict[str, str]:
        """Asset tags naming what the item is about (``toolret/dataset``, ``toolret/method`` ...)."""
        return {f"toolret/{k}": v for k, v in item.facets.items() if re.fullmatch(r"[A-Za-z0-9_.\-]{1,63}", v)}

    def metadata(self, item: "StageItem") -> dict[str, Any]:
        return {"dvc/stage": item.name, "dvc/cmd": dg.MetadataValue.text(item.cmd),
                "dvc/outs": ", ".join(item.outs), "dvc/params": ", ".join(item.params),
                **{k: v for k, v in item.facets.items() if k != "item"}}

    def asset_spec(self, item: "StageItem", by_name: Mapping[str, "StageItem"]) -> dg.AssetSpec:
        return dg.AssetSpec(key=item.asset_key, deps=[by_name[u].asset_key for u in item.upstream],
                            description=self.description(item), group_name=self.group_name(item.stage),
                            kinds={"dvc"}, tags=self.tags(item), metadata=self.metadata(item))

    # -- checks -----------------------------------------------------------------------------------
    def gated_pairs(self, items: Sequence["StageItem"]) -> list[tuple["StageItem", "StageItem"]]:
        """``(gated, baseline)`` evaluations: method ``<base>`` + :attr:`gated_suffix` vs ``<base>``, same dataset."""
        evaluations = [i for i in items if i.result_dirs and i.dataset and i.method]
        return [(ft, base) for ft in evaluations if ft.method.endswith(self.gated_suffix)
                for base in evaluations
                if base.dataset == ft.dataset and base.method == ft.method[: -len(self.gated_suffix)]]

    def checks(self, items: Sequence["StageItem"]) -> list[dg.AssetChecksDefinition]:
        """Blocking catalog validation on ``catalog`` / ``clean`` assets, a WARN quality gate per
        :meth:`gated_pairs` pair (:mod:`dagster_project.checks`)."""
        from dagster_project.checks import CATALOG_STAGES, catalog_check, quality_gate

        return [*(catalog_check(i) for i in items if i.stage in CATALOG_STAGES and i.outs),
                *(quality_gate(ft, base) for ft, base in self.gated_pairs(items))]


def load_stage_items(project_dir: str | Path | None = None, translator: "DvcTranslator | None" = None
                     ) -> list[StageItem]:
    """Read the project's pipeline through DVC and return its stage items in ``dvc.yaml`` order, their
    facets and asset keys given by ``translator`` (default :class:`DvcTranslator`).

    Works in a project that has not been ``dvc init``-ed yet (DVC's ``uninitialized`` mode), so the
    code location loads in a fresh checkout.

    Raises:
        FileNotFoundError: when the project has no ``dvc.yaml``.
    """
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    translator = translator or DvcTranslator()
    from dvc.dvcfile import load_file
    from dvc.repo import Repo

    root = Path(project_dir or default_project_dir()).resolve()
    from dagster_project.resources import restore_interrupted_commit

    restored = restore_interrupted_commit(root)  # before DVC reads a lock a killed commit may have truncated
    if restored:
        print(f"warning: the last run's `dvc commit` was interrupted; {restored}", file=sys.stderr)
    if not (root / "dvc.yaml").is_file():
        raise FileNotFoundError(f"{root / 'dvc.yaml'}: missing (set TOOLRET_PROJECT_DIR to a DVC project)")
    params = load_params(root)
    # names in any `*datasets` list of params.yaml: a foreach item with such a name is a dataset
    dataset_names = {str(d) for k, v in params.items() if k.endswith("datasets") and isinstance(v, list)
                     for d in v if _scalar(d)}
    with Repo(str(root), uninitialized=not (root / ".dvc").is_dir()) as repo:
        # only the project's dvc.yaml: `repo.index` would walk the whole tree (.venv included)
        dvcfile = load_file(repo, str(root / "dvc.yaml"))
        # the graph needs dvc.yaml alone: DVC would parse dvc.lock (~2 MB, a pure-Python YAML parse of ~8 s) to
        # fill in hashes no item reads (the asset metadata reads the lock itself, toolret.provenance)
        dvcfile.lockfile_contents = {}
        stages = [s for s in dvcfile.stages.values() if getattr(s, "name", None)]
        # foreach/matrix item values, as DVC resolved them (generated name -> values)
        generated: dict[str, dict[str, Any]] = {}
        kinds: dict[str, str] = {}
        if stages:
            for def_name, definition in dvcfile.resolver.definitions.items():
                kinds[def_name] = type(definition).__name__
                iterable = getattr(definition, "normalized_iterable", None)
                if iterable is not None:
                    for key, value in iterable.items():
                        generated[f"{def_name}@{key}"] = {"key": key, "value": value}
        raw = []
        for s in stages:
            base, _, key = s.name.partition("@")
            deps = tuple(_rel(d.def_path, root) for d in s.deps if type(d).__name__ != "ParamsDependency")
            params: list[str] = []
            for d in s.deps:
                if type(d).__name__ == "ParamsDependency":
                    params.extend(str(p) for p in (d.params or []))
            outs = tuple(_rel(o.def_path, root) for o in s.outs)
            item_key: str | None = None
            matrix: dict[str, Any] | None = None
            if key:
                gen = generated.get(s.name, {"key": key, "value": key})
                value = _unwrap(gen["value"])
                if kinds.get(base) == "MatrixDefinition" and isinstance(value, Mapping):
                    matrix = dict(value)
                else:
                    item_key = str(gen["key"])
            cmd_text = s.cmd if isinstance(s.cmd, str) else " && ".join(s.cmd)
            dvc_stage = DvcStage(s.name, base, item_key, matrix, cmd_text, outs, frozenset(dataset_names))
            facets = translator.facets(dvc_stage)
            key_path = translator.key_path(dvc_stage, facets)
            raw.append((s.name, base, key_path, facets, cmd_text,
                        deps, tuple(params), outs, getattr(s, "meta", None) or {},
                        str(_unwrap(getattr(s, "desc", None)) or "").strip()))
    items: list[StageItem] = []
    for name, base, key_path, facets, cmd, deps, params, outs, meta, desc in raw:
        upstream = tuple(
            other[0] for other in raw
            if other[0] != name and any(_overlaps(d, o) for d in deps for o in other[7])
        )
        items.append(StageItem(name, base, key_path, facets, cmd, deps, params, outs, upstream, bool(meta.get("costly")),
                               desc, bool(meta.get("trains"))))
    names = [i.op_name for i in items]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"DVC stage names collide as Dagster op names: {sorted(dupes)}")
    keys = [i.key_path for i in items]
    dupes = {"/".join(k) for k in keys if keys.count(k) > 1}
    if dupes:
        raise ValueError(f"DVC stage items collide as Dagster asset keys: {sorted(dupes)}")
    return items


def load_params(project_dir: str | Path) -> dict[str, Any]:
    """The project's ``params.yaml`` as written (``{}`` when absent): the graph is DVC's, whatever the
    params hold; ``toolret`` commands validate them when they run."""
    from toolret.paths import read_params_file

    return read_params_file(Path(project_dir) / "params.yaml")[0]


# -- results ---------------------------------------------------------------------------------------
def read_results(project_dir: str | Path, result_dir: str) -> dict[str, dict[str, Any]]:
    """``{docs: result JSON}`` of one evaluate output directory (per-query files excluded)."""
    out: dict[str, dict[str, Any]] = {}
    folder = Path(project_dir) / result_dir
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("metrics"), dict):
            out[str(obj.get("docs") or path.stem)] = obj
    return out


def materialization_metadata(item: StageItem, project_dir: str | Path) -> tuple[dict[str, Any], str | None]:
    """Asset metadata after a stage ran (dvc.lock md5s, paths, headline metrics) and a data version."""
    from toolret.provenance import read_dvc_lock, stage_versions

    lock = read_dvc_lock(project_dir)
    versions = stage_versions(item.name, project_dir, lock)
    md: dict[str, Any] = {
        "dvc/stage": item.name,
        "dvc/cmd": dg.MetadataValue.text(item.cmd),
    }
    for out in item.outs:
        md[f"dvc/md5/{out}"] = versions["outs"].get(out, "")
        md[f"path/{out}"] = dg.MetadataValue.path(str(Path(project_dir) / out))
    for dep, md5 in versions["deps"].items():
        md[f"dvc/dep_md5/{dep}"] = md5
    from toolret.evaluation import load_run_info
    from toolret.tracking.runs import find_result_files, load_result

    for result_dir in item.result_dirs:
        # several result dirs (evaluate_reinvoke): prefix with the dir; several results of one docs
        # variant in a dir (Re-Invoke ablations): label by file name
        prefix = f"{Path(result_dir).name}/" if len(item.result_dirs) > 1 else ""
        files = find_result_files(Path(project_dir) / result_dir)
        results = [(f, load_result(f)) for f in files]
        docs_of = [str(r.get("docs") or f.stem) for f, r in results]
        for (f, result), docs in zip(results, docs_of):
            label = prefix + (docs if docs_of.count(docs) == 1 else f.stem)
            md[f"{label}/n_queries"] = int(result.get("n_queries") or 0)
            for metric, value in sorted(result["metrics"].items()):
                if isinstance(value, (int, float)):
                    md[f"{label}/{metric}"] = dg.MetadataValue.float(float(value))
            lat = result.get("latency_ms") or load_run_info(f).get("latency_ms") or {}
            if isinstance(lat.get("p50"), (int, float)):
                md[f"{label}/latency_p50_ms"] = dg.MetadataValue.float(float(lat["p50"]))
    outs_md5 = [versions["outs"].get(o, "") for o in item.outs]
    data_version = "+".join(outs_md5) if outs_md5 and all(outs_md5) else None
    return md, data_version


# -- the asset factory ----------------------------------------------------------------------------
class DvcStageConfig(dg.Config):
    """Run-time options of a DVC stage asset."""

    force: bool = False  # `dvc repro --force`: rerun even when DVC thinks the stage is up to date


BATCH_TAG = "toolret/dvc-lock"  # a run tagged with it ``= "batch"`` writes dvc.lock once, at its end


def run_stage(item: StageItem, config: DvcStageConfig, dvc: DvcResource, run_id: str, log: Any = None,
              batch: bool = False, graph: Mapping[str, StageItem] | None = None,
              in_run: Sequence[str] | None = None) -> bool:
    """Bring one stage up to date; ``True`` if it ran.

    ``batch`` (a run launched by ``make run``, :data:`BATCH_TAG`): a stale stage runs its command directly
    and is recorded in ``dvc.lock`` with every other stage of the run by one ``dvc commit`` when the run
    ends (:func:`commit_run`), instead of a ``dvc repro`` (7-20 s of bookkeeping) per stage.

    The up-to-date check is the run's (one ``dvc status`` of the whole graph, :class:`RunState`): a stage
    current at the run's start whose upstream stages did not re-run is skipped in well under a second, and so
    is one current by ``dvc.lock`` (``graph``: every stage item, ``in_run``: the run's stage names;
    :mod:`dagster_project.current_by_lock`): its only changes are files this clone lacks (outputs kept in the
    DVC cache, not in git) and nothing the run does reads them. A costly stage (``meta: costly``) that is
    stale while its outputs exist stops the step before it runs, naming what changed and the command that
    rebuilds it, unless ``force`` or ``dvc.allow_costly``.
    """
    root = Path(dvc.project_dir)
    outs_present = all((root / o).exists() for o in item.outs)
    state = dvc.run_state(run_id, log, None if graph is None else
                          {n: (i.upstream, i.outs) for n, i in graph.items()}, in_run, pull=batch)
    reason = state.reason(item.name, item.upstream)
    if not config.force and reason is None and item.name in state.deferred:
        if log is not None:
            log.info(f"`{item.name}` is current by dvc.lock: {describe_changes(state.stale[item.name])} -- files "
                     f"this clone lacks, which nothing in this run reads (`dvc repro {item.name}` builds them)")
        return False
    if not config.force and reason is None and outs_present:
        if log is not None:
            log.info(f"`{item.name}` is up to date (dvc status, once for this run): no `dvc repro`")
        return False
    if item.costly and outs_present and not (config.force or dvc.allow_costly):
        # the run's first status stands unless an upstream stage re-ran since (in a fresh clone every input
        # built by a cheap stage is missing at the start): then ask DVC about this stage alone, now
        upstream_ran = any(u in state.ran for u in item.upstream)
        if item.name in state.stale and not upstream_ran:
            changes = state.stale[item.name]
        elif batch:  # dvc.lock is not written before the run ends: one index loaded in this process answers
            from dagster_project.dvc_status import stage_status

            changes = stage_status(dvc.project_dir, item.name)
        else:
            changes = dvc.status([item.name]).get(item.name)
        if changes:
            raise costly_stale_failure(item.name, changes)
        if log is not None:
            log.info(f"`{item.name}` (costly) is up to date after its upstream re-ran: no `dvc repro`")
        return False
    if log is not None and reason:
        log.info(f"`{item.name}`: {reason}")
    if batch:  # the command alone; the run commits every stage it ran to dvc.lock at its end (launch.py)
        dvc.run_command(item.name, item.cmd, item.outs, log=log)
        state.mark_ran(item.name, committed=False)
    else:
        dvc.repro(item.name, force=config.force, log=log)
        state.mark_ran(item.name)
    return True


def commit_run(dvc: DvcResource, run_id: str, log: Any = None) -> list[str]:
    """Record in ``dvc.lock`` (one ``dvc commit``) every stage a batch run ran; returns them."""
    from dagster_project.resources import RunState

    state = RunState.read(Path(dvc.project_dir), run_id)
    if state is None or not state.uncommitted:
        return []
    stages = list(state.uncommitted)
    dvc.commit(stages, log=log)
    state.committed()
    return stages


def close_run(dvc: DvcResource, run_id: str, succeeded: bool, log: Any = None) -> list[str]:
    """The end of a batch run: the stages it ran recorded in ``dvc.lock`` (:func:`commit_run`) and pushed to
    the DVC remote, and the graph's status kept for the next run (:mod:`dagster_project.graph_snapshot`):
    the run's own first status where nothing ran, DVC's where something did; none after a failed run.
    Returns the committed stages."""
    from dagster_project import graph_snapshot
    from dagster_project.resources import RunState

    project = Path(dvc.project_dir)
    state = RunState.read(project, run_id)
    if state is None:  # no DVC stage step ran in this run
        return []
    stages = commit_run(dvc, run_id, log)
    if stages:
        dvc.push(stages, log=log)
    if not succeeded:
        graph_snapshot.forget(project)
        return stages
    try:
        stale = dvc.status() if (stages or state.ran or state.build) else state.stale
    except dg.Failure:  # the next run asks DVC itself
        graph_snapshot.forget(project)
        return stages
    graph_snapshot.store_status(project, stale, run_id)
    return stages


def _dvc_asset(item: StageItem, by_name: Mapping[str, StageItem], translator: DvcTranslator) -> dg.AssetsDefinition:
    spec = translator.asset_spec(item, by_name)

    @dg.multi_asset(specs=[spec], name=item.op_name, pool="dvc", op_tags={"dvc/stage": item.name})
    def _run_stage(context: dg.AssetExecutionContext, config: DvcStageConfig, dvc: DvcResource) -> dg.MaterializeResult:
        selected = context.run.asset_selection or context.job_def.asset_layer.selected_asset_keys
        in_run = [n for n, i in by_name.items() if i.asset_key in selected]
        run_stage(item, config, dvc, context.run.run_id, context.log,
                  batch=context.run.tags.get(BATCH_TAG) == "batch", graph=by_name, in_run=in_run)
        metadata, data_version = materialization_metadata(item, dvc.project_dir)
        return dg.MaterializeResult(
            asset_key=item.asset_key,
            metadata=metadata,
            data_version=dg.DataVersion(data_version) if data_version else None,
        )

    return _run_stage


def build_dvc_assets(items: Sequence[StageItem], translator: DvcTranslator | None = None
                     ) -> list[dg.AssetsDefinition]:
    """One asset per stage item, its deps the asset keys of its upstream stage items, its spec the
    ``translator``'s (default :class:`DvcTranslator`)."""
    by_name = {i.name: i for i in items}
    translator = translator or DvcTranslator()
    return [_dvc_asset(i, by_name, translator) for i in items]


__all__ = [
    "DvcStage",
    "DvcStageConfig",
    "DvcTranslator",
    "GROUP_NAME_MAX",
    "StageItem",
    "RESULTS_ROOT",
    "build_dvc_assets",
    "default_project_dir",
    "load_params",
    "load_stage_items",
    "materialization_metadata",
    "op_name_for",
    "read_results",
    "run_stage",
    "BATCH_TAG",
    "close_run",
    "commit_run",
]
