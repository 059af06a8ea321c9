"""Report assets: per dataset, log every evaluation result and a comparison run to MLflow.

``report/<dataset>`` depends on all stage assets that write results for that dataset
(``evaluate@<ds>-<method>``, ``evaluate_ft@<ds>``); it reads their result JSONs, logs one MLflow run
per (method, docs) and one comparison run with a significance-marked table and a bar chart.
"""

# no `from __future__ import annotations`: Dagster reads the op signatures' annotations at runtime

from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from dagster_project.dvc_assets import StageItem
from dagster_project.resources import MlflowResource

REPORT_GROUP = "report"


def result_files(project_dir: str | Path, items: Sequence[StageItem]) -> list[Path]:
    """The result JSONs (not the per-query files) under the result dirs of ``items``."""
    files: list[Path] = []
    for item in items:
        for rd in item.result_dirs:
            folder = Path(project_dir) / rd
            files.extend(sorted(p for p in folder.glob("*.json") if not p.name.endswith(".per_query.json")))
    return files


def _report_asset(dataset: str, upstream: Sequence[StageItem]) -> dg.AssetsDefinition:
    @dg.asset(
        key=dg.AssetKey([REPORT_GROUP, dataset]),
        deps=[i.asset_key for i in upstream],
        group_name=REPORT_GROUP,
        kinds={"mlflow"},
        description=f"MLflow runs for every evaluation of `{dataset}` and a comparison report "
                    "(table with bootstrap CIs, paired tests vs the strongest baseline, bar chart).",
    )
    def _report(context: dg.AssetExecutionContext, mlflow: MlflowResource) -> dg.MaterializeResult:
        from toolret.tracking.evaluation import per_query_path_for

        files = result_files(mlflow.project_dir, upstream)
        if not files:
            raise dg.Failure(f"no result JSONs for {dataset} under "
                             f"{[rd for i in upstream for rd in i.result_dirs]}")
        tags = {"dagster.run_id": context.run.run_id, "dagster.asset_key": context.asset_key.to_user_string()}
        run_ids = {}
        for f in files:
            pq = per_query_path_for(f)
            run_ids[str(f.relative_to(mlflow.project_dir))] = mlflow.log_evaluation_run(
                f, pq if pq.is_file() else None, tags=tags)
        report = mlflow.log_comparison_report(dataset, files, tags=tags)
        context.log.info(report["markdown"])
        n_sig = sum(1 for t in report["tests"] if t["significant"])
        return dg.MaterializeResult(metadata={
            "mlflow/tracking_uri": mlflow.uri(),
            "mlflow/experiment": mlflow.experiment,
            "mlflow/comparison_run_id": report["run_id"],
            "mlflow/evaluation_run_ids": dg.MetadataValue.json(run_ids),
            "n_results": len(files),
            "n_significant_tests": n_sig,
            "comparison": dg.MetadataValue.md(report["markdown"]),
        })

    return _report


def build_report_assets(items: Sequence[StageItem]) -> list[dg.AssetsDefinition]:
    """One report asset per dataset that has evaluation stages."""
    by_dataset: dict[str, list[StageItem]] = {}
    for item in items:
        if item.result_dirs and item.dataset:
            by_dataset.setdefault(item.dataset, []).append(item)
    return [_report_asset(ds, ups) for ds, ups in by_dataset.items()]


__all__ = ["REPORT_GROUP", "build_report_assets", "result_files"]
