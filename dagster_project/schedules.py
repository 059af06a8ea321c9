"""Retraining schedule: weekly, STOPPED by default (turn it on in the UI or with
``dagster schedule start -m dagster_project weekly_retrain``).

It re-materializes the training, indexing, evaluation and report assets; catalogs are rebuilt by the
raw-data sensor instead. Up-to-date DVC stages are skipped by ``dvc repro`` itself, so a week with no
changes costs little.
"""

from __future__ import annotations

import dagster as dg

RETRAIN_PREFIXES = ("finetune", "index", "evaluate", "report")  # stage-name prefixes


def retrain_groups(present_stages: set[str], translator=None) -> list[str]:
    """The asset groups (``DvcTranslator.group_name``) of the stages whose name starts with a retraining
    prefix (``index_ft``, ``evaluate_reinvoke``, ``evaluate_toolrerank`` -> ``eval_toolrerank``)."""
    from dagster_project.dvc_assets import DvcTranslator

    translator = translator or DvcTranslator()
    return sorted({translator.group_name(s) for s in present_stages if s.startswith(RETRAIN_PREFIXES)})


def build_schedules(present_stages: set[str], translator=None) -> list[dg.ScheduleDefinition]:
    groups = retrain_groups(present_stages, translator)
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


__all__ = ["RETRAIN_PREFIXES", "build_schedules", "retrain_groups"]
