"""MLflow tracking of evaluation runs and comparison reports, plus provenance helpers.

No Dagster import anywhere in this package; MLflow and matplotlib are imported inside functions.

Typical use::

    from toolret.tracking import log_evaluation_run, log_comparison_report
    run_id = log_evaluation_run("data/runs/toollens/bm25/original.json", None, tags={"dagster.run_id": rid})
    report = log_comparison_report("toollens", ["data/runs/toollens/bm25/original.json", ...])
"""

from __future__ import annotations

from toolret.tracking.comparison import compare_results, log_comparison_report
from toolret.tracking.evaluation import load_per_query, load_result, log_evaluation_run, per_query_path_for
from toolret.tracking.provenance import dvc_md5, git_state, read_dvc_lock, sha256_file, stage_versions
from toolret.tracking.store import default_tracking_uri, get_client, get_or_create_experiment

__all__ = [
    "compare_results",
    "default_tracking_uri",
    "dvc_md5",
    "get_client",
    "get_or_create_experiment",
    "git_state",
    "load_per_query",
    "load_result",
    "log_comparison_report",
    "log_evaluation_run",
    "per_query_path_for",
    "read_dvc_lock",
    "sha256_file",
    "stage_versions",
]
