"""Retraining schedule: weekly, STOPPED by default (turn it on in the UI or with
``dagster schedule start -m dagster_project weekly_retrain``).

It re-materializes the training, indexing, evaluation and report assets; catalogs are rebuilt by the
raw-data sensor instead. Up-to-date DVC stages are skipped by ``dvc repro`` itself, so a week with no
changes costs little.
"""

from __future__ import annotations

import dagster as dg

RETRAIN_GROUPS = ("finetune", "index", "index_ft", "evaluate", "evaluate_ft", "report")


def build_schedules(present_groups: set[str]) -> list[dg.ScheduleDefinition]:
    groups = [g for g in RETRAIN_GROUPS if g in present_groups]
    if not groups:
        return []
    job = dg.define_asset_job(
        "retrain_job",
        selection=dg.AssetSelection.groups(*groups),
        description="Fine-tune, re-index, re-evaluate and report.",
    )
    return [
        dg.ScheduleDefinition(
            name="weekly_retrain",
            job=job,
            cron_schedule="0 3 * * 1",  # Mondays 03:00
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.STOPPED,
            description="Weekly retraining / re-evaluation (stopped by default).",
        )
    ]


__all__ = ["RETRAIN_GROUPS", "build_schedules"]
