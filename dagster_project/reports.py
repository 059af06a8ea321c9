"""Report assets: log every evaluation result of a dataset, its comparison run and its models to MLflow.

One report asset per stage item that writes evaluation results, ``report/<dataset>.<method>`` (the
evaluation's own label: ``report/toollens.bm25`` after ``evaluate@toollens-bm25``,
``report/toollens.dense-ft`` after ``evaluate_ft@toollens``), each depending on that stage only. The report assets of one dataset are one subsettable multi-asset (op
``report__<dataset>``): a run materializes the ones selected, in one step, and then

* logs one MLflow run per evaluation result of the selected stages (only files with a ``metrics``
  object: per-query tables, run-info sidecars and summaries such as Re-Invoke's
  ``reinvoke-ablations/summary.json`` are skipped);
* logs the dataset's comparison run over every result of the dataset present on disk;
* registers the dataset's trained models (DVC outputs under ``data/models/``) in the model registry.

All MLflow logging is idempotent (:mod:`toolret.tracking`): materializing again with the same inputs
reuses the runs and model versions. Why one asset per evaluation stage rather than one per dataset:
a dataset-level asset would depend on every evaluation stage, and Dagster (the UI's *Materialize*
included) then asks about every upstream asset never materialized, e.g. Re-Invoke's after a quick
bm25/dense run. With per-stage assets, a run's report assets depend exactly on the evaluations it
selected, lineage stays exact, and a new Re-Invoke result marks only its own report stale.
"""

# no `from __future__ import annotations`: Dagster reads the op signatures' annotations at runtime

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_project.dvc_assets import DvcTranslator, StageItem
from dagster_project.resources import MlflowResource

REPORT_GROUP = "report"


def result_files(project_dir: str | Path, items: Sequence[StageItem]) -> list[Path]:
    """The evaluation results (JSONs with a ``metrics`` object) under the result dirs of ``items``."""
    from toolret.tracking.runs import find_result_files

    return [f for item in items for rd in item.result_dirs for f in find_result_files(Path(project_dir) / rd)]


def report_keys(dataset: str, items: Sequence[StageItem]) -> dict[str, dg.AssetKey]:
    """``{stage item name: report asset key}``: ``report/<the item's label>`` (the last part of its key,
    ``<dataset>.<method>``: ``evaluate_ft@ds`` -> ``report/ds.dense-ft``); ``report/<stage>/<label>``
    where two items of the dataset share a label, so the visible label still names dataset and method."""
    def label(item: StageItem) -> str:
        last = item.key_path[-1] if len(item.key_path) > 1 else item.stage
        return last if dataset in last else f"{dataset}.{item.method or last}"

    labels = {i.name: label(i) for i in items}
    counts: dict[str, int] = {}
    for value in labels.values():
        counts[value] = counts.get(value, 0) + 1
    return {i.name: dg.AssetKey([REPORT_GROUP, labels[i.name]] if counts[labels[i.name]] == 1
                                else [REPORT_GROUP, i.stage, labels[i.name]])
            for i in items}


def _lineage(item: StageItem, by_name: Mapping[str, StageItem]) -> set[str]:
    seen: set[str] = set()
    todo = list(item.upstream)
    while todo:
        name = todo.pop()
        if name not in seen and name in by_name:
            seen.add(name)
            todo.extend(by_name[name].upstream)
    return seen


def _label(path: Path) -> str:
    """``method/docs`` of a result (its file name where the JSON does not say)."""
    from toolret.tracking.runs import load_result

    r = load_result(path)
    return f"{r.get('method') or path.parent.name}/{r.get('docs') or path.stem}"


def _report_asset(dataset: str, upstream: Sequence[StageItem], by_name: Mapping[str, StageItem],
                  translator: DvcTranslator) -> dg.AssetsDefinition:
    keys = report_keys(dataset, upstream)
    lineage = {i.name: _lineage(i, by_name) for i in upstream}
    specs = [
        dg.AssetSpec(
            key=keys[i.name],
            deps=[i.asset_key],
            group_name=REPORT_GROUP,
            kinds={"mlflow"},
            skippable=True,
            tags=translator.tags(i),
            description=(
                f"[{dataset}] MLflow runs of the evaluation results of DVC stage `{i.name}` "
                f"({', '.join(f'`{rd}`' for rd in i.result_dirs)})" + (f": {i.desc}" if i.desc else "") + ". Then "
                f"the comparison run of `{dataset}` (every result of the dataset: table with bootstrap CIs, "
                "Holm-corrected paired tests vs the strongest baseline, bar chart) and its trained models in "
                "the MLflow model registry."),
            metadata={"dataset": dataset, "dvc/stage": i.name, "results": ", ".join(i.result_dirs)},
        )
        for i in upstream
    ]

    @dg.multi_asset(specs=specs, name="report__" + re.sub(r"[^A-Za-z0-9_]", "_", dataset), can_subset=True)
    def _report(context: dg.AssetExecutionContext, mlflow: MlflowResource):
        project = mlflow.project_dir
        selected = [i for i in upstream if keys[i.name] in context.selected_asset_keys]
        everything = result_files(project, upstream)
        if not everything:
            raise dg.Failure(f"no evaluation results for {dataset} under "
                             f"{[rd for i in upstream for rd in i.result_dirs]}")
        run_tags = {"dagster.run_id": context.run.run_id, "dagster.op": context.op_def.name}
        exp_id = mlflow.experiment_id()
        logged: dict[str, dict[str, Any]] = {}
        for item in selected:
            files = result_files(project, [item])
            if not files:
                context.log.warning(f"{item.name} has no evaluation results on disk: "
                                    f"{keys[item.name].to_user_string()} is not materialized")
                continue
            md: dict[str, Any] = {}
            for f in files:  # each run registers the models its lineage holds, new versions linked to it
                run_id = mlflow.log_evaluation_run(f, None, tags={
                    **run_tags, "dagster.asset_key": keys[item.name].to_user_string()})
                md[f"mlflow/run/{_label(f)}"] = dg.MetadataValue.url(mlflow.run_url(run_id, exp_id))
            md["n_results"] = len(files)
            logged[item.name] = md
        if not logged:
            raise dg.Failure(f"none of the selected report assets of {dataset} has evaluation results on disk")
        # every model of the dataset (idempotent; alias `current`), after the runs: a version an evaluation run
        # used was registered by that run and links to it
        models = mlflow.register_models(dataset)
        for name, md in logged.items():
            for mv in models:
                if mv["stage"] in lineage[name]:
                    md[f"mlflow/model/{mv['name']}"] = dg.MetadataValue.url(
                        mlflow.model_version_url(mv["name"], mv["version"]))
                    md[f"mlflow/model/{mv['name']}/dvc_md5"] = mv["md5"]
        report = mlflow.log_comparison_report(dataset, everything, tags=run_tags)
        context.log.info(report["markdown"])
        common = {
            "dataset": dataset,
            "mlflow/tracking_uri": mlflow.uri(),
            "mlflow/experiment": mlflow.experiment,
            "mlflow/comparison_experiment": mlflow.comparison_experiment,
            "mlflow/comparison_run": dg.MetadataValue.url(mlflow.run_url(report["run_id"], report["experiment_id"])),
            "mlflow/comparison_run_id": report["run_id"],
            "n_results_compared": len(everything),
            "n_significant_tests": sum(1 for t in report["tests"] if t["significant"]),
            "comparison": dg.MetadataValue.md(report["markdown"]),
        }
        for item in selected:
            if item.name in logged:
                yield dg.MaterializeResult(asset_key=keys[item.name], metadata={**common, **logged[item.name]})

    return _report


def _report_items(items: Sequence[StageItem]) -> dict[str, list[StageItem]]:
    by_dataset: dict[str, list[StageItem]] = {}
    for item in items:
        if item.result_dirs and item.dataset:
            by_dataset.setdefault(item.dataset, []).append(item)
    return by_dataset


def all_report_keys(items: Sequence[StageItem]) -> dict[str, dg.AssetKey]:
    """``{evaluation stage item name: its report asset key}`` over every dataset."""
    return {name: key for ds, ups in _report_items(items).items() for name, key in report_keys(ds, ups).items()}


def build_report_assets(items: Sequence[StageItem], translator: DvcTranslator | None = None
                        ) -> list[dg.AssetsDefinition]:
    """One report multi-asset per dataset that has evaluation stages (one asset per such stage), tagged
    like its evaluation (``translator.tags``)."""
    by_name = {i.name: i for i in items}
    translator = translator or DvcTranslator()
    return [_report_asset(ds, ups, by_name, translator) for ds, ups in _report_items(items).items()]


__all__ = ["REPORT_GROUP", "all_report_keys", "build_report_assets", "report_keys", "result_files"]
