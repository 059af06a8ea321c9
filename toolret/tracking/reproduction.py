"""The reproduction matrix in MLflow: one run per cell, rendered from the committed records only.

Experiment :data:`REPRODUCTION_EXPERIMENT`; a run per cell named ``<method> | <dataset> | <condition>``
with the cell's metric (its MLflow-safe key, e.g. ``recall_at_5``) and ``value`` (the record's number),
``expected``, ``paper`` where the matrix has one, ``ci95_lo`` / ``ci95_hi``; tags: the cell's fields, its
``status`` (OK / FAIL) and ``headline``. Idempotent like every toolret run: the same record value and cell
reuse the run, a changed one logs a new run and marks the older one superseded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolret.reproduce import CellResult
from toolret.tracking.store import (CURRENT_TAG, INPUTS_TAG, digest, finished_run_among, get_client,
                                    get_or_create_experiment, make_current_among, runs_of, safe_key)

REPRODUCTION_EXPERIMENT = "toolret-reproduction"


def cell_metrics(result: CellResult) -> dict[str, float]:
    cell = result.cell
    metrics = {"expected": cell.expected}
    if result.value is not None:
        metrics["value"] = result.value
        metrics[safe_key(cell.metric)] = result.value
    if cell.paper is not None:
        metrics["paper"] = cell.paper
    if result.ci95:
        metrics["ci95_lo"], metrics["ci95_hi"] = result.ci95
    return metrics


def log_reproduction_matrix(results: list[CellResult], tracking_uri: str | None = None,
                            project_dir: str | Path | None = None,
                            experiment: str = REPRODUCTION_EXPERIMENT) -> dict[str, Any]:
    """Log (or reuse) one run per cell; returns ``{"experiment_id", "runs": {cell name: run id}, "created"}``."""
    from mlflow.entities import Metric, RunTag

    client = get_client(tracking_uri, project_dir)
    exp_id = get_or_create_experiment(client, experiment)
    # every reproduction run of the experiment in one search (a search per cell took ~15 s for 98 cells)
    prior: dict[str, list[Any]] = {}
    for run in runs_of(client, exp_id, {"toolret.kind": "reproduction"}):  # newest first
        prior.setdefault(run.data.tags.get("toolret.cell", ""), []).append(run)
    runs: dict[str, str] = {}
    created = 0
    for r in results:
        cell = r.cell
        identity = {"toolret.kind": "reproduction", "toolret.cell": cell.name}
        metrics = cell_metrics(r)
        tags = {"method": cell.method, "dataset": cell.dataset, "condition": cell.label or cell.condition,
                "metric": cell.metric, "record": cell.record, "command": cell.command,
                "status": "OK" if r.ok else "FAIL", "headline": str(cell.headline).lower()}
        inputs = digest({"metrics": metrics, "tags": tags})
        existing = finished_run_among(prior.get(cell.name, []), inputs)
        if existing is None:
            run = client.create_run(exp_id, run_name=f"{cell.method} | {cell.dataset} | {cell.label or cell.condition}",
                                    tags={**identity, INPUTS_TAG: inputs, **tags, CURRENT_TAG: "true"})
            run_id = run.info.run_id
            client.log_batch(run_id, metrics=[Metric(k, float(v), 0, 0) for k, v in metrics.items()],
                             tags=[RunTag("mlflow.note.content", f"`{cell.command}`\n\nrecord: `{cell.record}` at "
                                                                 f"`{cell.at}`")])
            client.set_terminated(run_id)
            created += 1
        else:
            run_id = existing.info.run_id
        make_current_among(client, prior.get(cell.name, []), run_id)
        runs[cell.name] = run_id
    return {"experiment_id": exp_id, "runs": runs, "created": created}


__all__ = ["REPRODUCTION_EXPERIMENT", "cell_metrics", "log_reproduction_matrix"]
