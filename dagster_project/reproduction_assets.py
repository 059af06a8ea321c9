"""The reproduction matrix as an asset: its cells checked against the committed records and logged to MLflow.

``report/reproduction_matrix`` reads ``results/matrix/*.yaml`` and the records they name (all in git:
no stage runs before it), logs one MLflow run per cell (:mod:`toolret.tracking.reproduction`) and fails
when a cell is off its expected score, naming the cells.
"""

# no `from __future__ import annotations`: Dagster reads the asset's annotations at runtime

from pathlib import Path

import dagster as dg

from dagster_project.reports import REPORT_GROUP
from dagster_project.resources import MlflowResource

KEY = dg.AssetKey(["report", "reproduction_matrix"])


def build_reproduction_asset() -> dg.AssetsDefinition:
    @dg.asset(key=KEY, group_name=REPORT_GROUP, kinds={"mlflow"},
              description="Every cell of the reproduction matrix (results/matrix) read from its committed record, "
                          "OK / FAIL against its expected score, one MLflow run per cell (experiment "
                          "toolret-reproduction). Same as `toolret reproduce --check --from-records --mlflow`.")
    def reproduction_matrix(context: dg.AssetExecutionContext, mlflow: MlflowResource) -> dg.MaterializeResult:
        from toolret.reproduce import check, check_lines, load_matrix
        from toolret.tracking.reproduction import log_reproduction_matrix

        root = Path(mlflow.project_dir)
        results = check(load_matrix(root / "results" / "matrix"), root)
        failed = [line for line in check_lines(results) if not line.startswith("OK")]
        logged = log_reproduction_matrix(results, tracking_uri=mlflow.uri(), project_dir=root)
        if failed:
            raise dg.Failure(description=f"{len(failed)} of {len(results)} cells off their expected score",
                             metadata={"failed": "\n".join(failed)})
        return dg.MaterializeResult(metadata={
            "cells": len(results), "ok": len(results) - len(failed),
            "mlflow/experiment": dg.MetadataValue.url(mlflow.ui_url.rstrip("/") + f"/#/experiments/{logged['experiment_id']}"),
        })

    return reproduction_matrix
