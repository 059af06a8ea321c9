"""The code location: everything is built from the project's ``dvc.yaml`` (see ``dvc_assets``)."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from dagster_project.adapt_assets import GROUP as ADAPT_GROUP
from dagster_project.adapt_assets import build_adapt_definitions
from dagster_project.checks import build_checks
from dagster_project.dvc_assets import DvcTranslator, build_dvc_assets, default_project_dir, load_stage_items
from dagster_project.reports import REPORT_GROUP, all_report_keys, build_report_assets
from dagster_project.reproduction_assets import build_reproduction_asset
from dagster_project.resources import DEFAULT_MLFLOW_UI, DvcResource, MlflowResource
from dagster_project.schedules import build_schedules
from dagster_project.sensors import build_sensors

ALL_JOB = "toolret_all"
RUN_JOB = "toolret_run"


def deferred_items(items, root: Path) -> list:
    """Stage items `toolret_run` leaves out: costly stages (fine-tuning, LLM generation) whose outputs
    are not on disk yet (e.g. not restored by ``dvc pull``), and everything downstream of them."""
    by_name = {i.name: i for i in items}
    skipped = {i.name for i in items if i.costly and not all((root / o).exists() for o in i.outs)}
    changed = True
    while changed:
        changed = False
        for i in items:
            if i.name not in skipped and any(u in skipped for u in i.upstream):
                skipped.add(i.name)
                changed = True
    return [by_name[n] for n in sorted(skipped)]


def deferred_notes(items, deferred) -> dict[dg.AssetKey, dict[str, str]]:
    """``{asset key: {"why", "command", "then"}}`` of every asset `toolret_run` leaves out: why (a costly stage
    whose outputs are absent, or the deferred costly stages it waits on) and the command that builds it (its
    DVC stage, `dvc repro` running its costly upstream first; a report asset: its evaluation's, then a
    materialization of the report)."""
    by_name = {i.name: i for i in items}
    names = {i.name for i in deferred}
    notes: dict[dg.AssetKey, dict[str, str]] = {}
    for i in deferred:
        if i.costly:
            why = ("a costly stage (`meta: costly` in dvc.yaml: fine-tuning, LLM generation, ablation grids) whose "
                   "outputs were absent when the code location loaded")
            then = "then `make run` includes it"
        else:
            roots, seen, todo = set(), set(), list(i.upstream)
            while todo:
                u = todo.pop()
                if u in names and u not in seen:
                    seen.add(u)
                    roots |= {u} if by_name[u].costly else set()
                    todo.extend(by_name[u].upstream)
            why = (f"downstream of the deferred costly stage{'s' if len(roots) > 1 else ''} "
                   + ", ".join(f"`{r}`" for r in sorted(roots)))
            then = "it runs what it waits on first"
        notes[i.asset_key] = {"why": why, "command": f"dvc repro {i.name}", "then": then}
    for name, key in all_report_keys(items).items():
        if name in names:
            notes[key] = {"why": f"it reports the deferred evaluation `{name}`", "command": f"dvc repro {name}",
                          "then": "then materialize this asset"}
    return notes


def with_deferred_notes(assets: list, notes: dict[dg.AssetKey, dict[str, str]]) -> list:
    """``assets``, the description of each deferred one led by why `make run` leaves it out and the command
    that builds it (its page would say only "Never materialized"), both also in its definition metadata
    (``toolret/deferred``, ``toolret/build_command``)."""
    def note(spec: dg.AssetSpec) -> dg.AssetSpec:
        n = notes.get(spec.key)
        if n is None:
            return spec
        text = (f"**Deferred**: `make run` (the `{RUN_JOB}` job) leaves it out: {n['why']}. Build it: "
                f"`{n['command']}` ({n['then']}), or `make paper` (the `{ALL_JOB}` job) for every deferred asset.")
        return spec.replace_attributes(
            description=f"{text}\n\n{spec.description}" if spec.description else text,
            metadata={**spec.metadata, "toolret/deferred": n["why"], "toolret/build_command": n["command"]})

    return list(dg.map_asset_specs(note, assets)) if notes else assets


def run_job_description(items, deferred) -> str:
    """The `toolret_run` description: what it leaves out, every deferred asset by key with the command that
    produces it (its DVC stage, `dvc repro` running its costly upstream first; a report asset after its
    evaluation), and `make paper` for all of them."""
    reports = all_report_keys(items)
    n_assets = len(items) + len(reports)
    names = {i.name for i in deferred}
    lines = []
    for i in deferred:
        why = "costly, outputs absent" if i.costly else "downstream of a deferred stage"
        lines.append(f"- `{i.asset_key.to_user_string()}` ({why}): `dvc repro {i.name}`")
    for name, key in sorted(reports.items(), key=lambda kv: kv[1].to_user_string()):
        if name in names:
            lines.append(f"- `{key.to_user_string()}`: materialize it once `dvc repro {name}` has run")
    head = ("`make run`: every stage except costly ones (fine-tuning, LLM generation, ablation grids) whose "
            "outputs are not there yet, and what depends on them.")
    if not lines:
        return head + f" Nothing was deferred when the code location loaded ({n_assets} assets)."
    return "\n".join([head, "", f"Deferred when the code location loaded: {len(lines)} of {n_assets} assets "
                      "(`make paper`, the `toolret_all` job, produces them all):", "", *lines])


def retrain_config(items) -> dict:
    """Run config forcing every training stage (``meta: {trains: true}``) to rerun: its committed artifact is
    up to date for DVC, and the paper protocol retrains it from the data."""
    return {"ops": {i.op_name: {"config": {"force": True}} for i in items if i.trains}}


def build_definitions(project_dir: str | Path | None = None, translator: DvcTranslator | None = None
                      ) -> dg.Definitions:
    """Definitions for the DVC project at ``project_dir`` (default ``$TOOLRET_PROJECT_DIR`` or the repo),
    each stage item made an asset by ``translator`` (default :class:`DvcTranslator`: key, group,
    description, tags, metadata, checks).

    Execution: one step at a time (the in-process executor), or ``$TOOLRET_WORKERS`` steps at once
    (``make run WORKERS=N``: :func:`run_executor`); the DVC commands of concurrent steps wait for each
    other (:meth:`DvcResource._dvc_lock`: DVC holds a repository lock while it works).
    """
    root = Path(project_dir).resolve() if project_dir else default_project_dir()
    translator = translator or DvcTranslator()
    items = load_stage_items(root, translator)
    reports = build_report_assets(items, translator)
    assets = [*build_dvc_assets(items, translator), *reports]
    stages = {i.stage for i in items} | ({REPORT_GROUP} if reports else set())
    deferred = deferred_items(items, root)
    assets = with_deferred_notes(assets, deferred_notes(items, deferred))
    if (root / "results" / "matrix").is_dir():  # the committed records, checked and logged to MLflow
        assets.append(build_reproduction_asset())
    adapt = build_adapt_definitions(root)
    assets += adapt["assets"]
    # `.downstream()`: the report assets of deferred evaluations are deferred too; `toolret adapt` of a user
    # catalog (hours of generation and training) is the adapt job's, its sensor's and its schedule's
    run_selection = (dg.AssetSelection.all() - dg.AssetSelection.assets(*[i.asset_key for i in deferred]).downstream()
                     - dg.AssetSelection.groups(ADAPT_GROUP))
    return dg.Definitions(
        assets=assets,
        asset_checks=[*build_checks(items, translator), *adapt["checks"]],
        jobs=[dg.define_asset_job(ALL_JOB, selection=dg.AssetSelection.all() - dg.AssetSelection.groups(ADAPT_GROUP),
                                  config=retrain_config(items),
                                  description="Every DVC stage, check and report of the project (the full "
                                              "paper protocol: LLM generation where absent, and every model "
                                              "retrained, committed ones included: `dvc repro --force`)."),
              dg.define_asset_job(RUN_JOB, selection=run_selection,
                                  description=run_job_description(items, deferred)), *adapt["jobs"]],
        schedules=[*build_schedules(stages, translator), *adapt["schedules"]],
        sensors=[*build_sensors(items, root), *adapt["sensors"]],
        resources={
            "dvc": DvcResource(project_dir=str(root), allow_costly=os.environ.get("TOOLRET_ALLOW_COSTLY") == "1"),
            "mlflow": MlflowResource(project_dir=str(root),
                                     ui_url=os.environ.get("TOOLRET_MLFLOW_UI_URL") or DEFAULT_MLFLOW_UI),
        },
        executor=run_executor(),
    )


def run_executor(workers: int | None = None) -> dg.ExecutorDefinition:
    """The executor of the project's jobs: in-process for one worker (the default), else a multiprocess
    executor running up to ``workers`` independent steps at once (default ``$TOOLRET_WORKERS``, which
    ``make run WORKERS=N`` sets). Its step processes fork from a server that imported this code location
    once (no per-step start of Python, Dagster and the definitions)."""
    if workers is None:
        raw = os.environ.get("TOOLRET_WORKERS", "").strip() or "1"
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"TOOLRET_WORKERS={raw!r}: a positive number of concurrent steps")
        workers = int(raw)
    if workers <= 1:
        return dg.in_process_executor
    return dg.multiprocess_executor.configured(
        {"max_concurrent": workers, "start_method": {"forkserver": {"preload_modules": ["dagster_project"]}}},
        name=f"multiprocess_{workers}")
