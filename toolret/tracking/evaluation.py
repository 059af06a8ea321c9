"""One MLflow run per evaluation result (dataset, method, document variant).

A result is the JSON ``toolret evaluate-index`` writes (``data/runs/<ds>/<method>/<docs>.json``)::

    {"dataset", "method", "docs", "n_queries", "metrics": {"recall@5": .., "mrr": ..},
     "ci95": {"recall@5": [lo, hi], ..}, "latency_ms": {"p50", "p95"},
     "provenance": {"git_sha", "params", "dataset_checksums", "artifact_versions"}}

with ``<docs>.per_query.jsonl`` beside it (``{"query_id", "recall@5": .., "ranked": [..], "gold": [..]}``).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from toolret.tracking.provenance import dvc_md5, git_state, read_dvc_lock
from toolret.tracking.store import flatten, get_client, get_or_create_experiment, safe_key

_AT_K = re.compile(r"^(?P<family>.+)@(?P<k>\d+)$")


def load_result(path: str | Path) -> dict[str, Any]:
    """Read a result JSON and check it has the fields the trackers use."""
    obj = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(obj, dict) or not isinstance(obj.get("metrics"), dict):
        raise ValueError(f"{path}: not an evaluation result (no 'metrics' object)")
    return obj


def per_query_path_for(result_json: str | Path) -> Path:
    """``<dir>/<docs>.json`` -> ``<dir>/<docs>.per_query.jsonl``."""
    p = Path(result_json)
    return p.with_name(p.stem + ".per_query.jsonl")


def load_per_query(path: str | Path) -> list[dict[str, Any]]:
    """The per-query records of a result (one JSON object per line)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def metrics_by_k(metrics: dict[str, float]) -> dict[str, dict[int, float]]:
    """``{"recall@5": .3, "recall@1": .1, "mrr": .4}`` -> ``{"recall": {1: .1, 5: .3}}``."""
    out: dict[str, dict[int, float]] = {}
    for name, value in metrics.items():
        m = _AT_K.match(name)
        if m and isinstance(value, (int, float)):
            out.setdefault(m.group("family"), {})[int(m.group("k"))] = float(value)
    return {fam: dict(sorted(v.items())) for fam, v in sorted(out.items())}


def plot_metrics_vs_k(result: dict[str, Any], path: str | Path) -> Path | None:
    """Line plot of every ``<metric>@k`` family against k (95% CI bars where given); ``None`` if none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = metrics_by_k(result["metrics"])
    if not families:
        return None
    ci = result.get("ci95") or {}
    fig, ax = plt.subplots(figsize=(6, 4))
    for fam, values in families.items():
        ks = list(values)
        ys = [values[k] for k in ks]
        lo = [ys[i] - (ci.get(f"{fam}@{k}") or [ys[i], ys[i]])[0] for i, k in enumerate(ks)]
        hi = [(ci.get(f"{fam}@{k}") or [ys[i], ys[i]])[1] - ys[i] for i, k in enumerate(ks)]
        ax.errorbar(ks, ys, yerr=[lo, hi], marker="o", capsize=3, label=fam)
    ax.set_xlabel("k")
    ax.set_ylabel("score")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{result.get('dataset')} / {result.get('method')} / {result.get('docs')}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def _per_query_frame(rows: list[dict[str, Any]]) -> Any:
    import pandas as pd

    flat = []
    for r in rows:
        rec = {}
        for k, v in r.items():
            rec[k] = " ".join(map(str, v)) if isinstance(v, list) else v
        flat.append(rec)
    return pd.DataFrame(flat)


def _input_versions(result_json: Path, project_dir: Path | None) -> dict[str, str]:
    """``{path: md5}`` for the stage that produced ``result_json`` (its deps and outs in dvc.lock)."""
    if project_dir is None:
        return {}
    lock = read_dvc_lock(project_dir)
    try:
        rel = result_json.resolve().relative_to(project_dir.resolve()).as_posix()
    except ValueError:
        return {}
    versions: dict[str, str] = {}
    for stage in (lock.get("stages") or {}).values():
        outs = [o for o in stage.get("outs") or [] if isinstance(o, dict)]
        if any(rel == o["path"] or rel.startswith(str(o["path"]).rstrip("/") + "/") for o in outs):
            for entry in [*(stage.get("deps") or []), *outs]:
                if isinstance(entry, dict) and entry.get("md5"):
                    versions[str(entry["path"])] = str(entry["md5"])
    if not versions:
        md5 = dvc_md5(rel, project_dir, lock)
        if md5:
            versions[rel] = md5
    return versions


def log_evaluation_run(
    result_json_path: str | Path,
    per_query_path: str | Path | None = None,
    tags: dict[str, str] | None = None,
    experiment: str = "toolret",
    tracking_uri: str | None = None,
    project_dir: str | Path | None = None,
) -> str:
    """Log one evaluation result as an MLflow run and return its run id.

    The run holds: params (dataset, method, docs, ks, n_queries and the flattened provenance
    params), metrics (``recall@5`` logged as ``recall_at_5``, CI bounds as ``recall_at_5_ci95_lo``/
    ``_hi``, every ``<metric>@k`` family also as ``<metric>_by_k`` with step k, latency), tags (git
    sha, DVC md5 of the stage's inputs and outputs from ``dvc.lock``, plus ``tags``, e.g. the Dagster
    run id) and artifacts (the result JSON, the per-query table as CSV and MLflow table, a
    metric-vs-k plot).

    Args:
        result_json_path: the result JSON.
        per_query_path: its per-query JSONL (default: ``<docs>.per_query.jsonl`` beside it; skipped
            when absent).
        tags: extra run tags.
        experiment: MLflow experiment name (created when missing).
        tracking_uri: MLflow store (default ``$MLFLOW_TRACKING_URI`` or the project's sqlite store).
        project_dir: the DVC project (for ``dvc.lock`` and git); default: the result's ancestors'
            first folder holding ``dvc.yaml``.
    """
    from mlflow.entities import Metric, Param, RunTag

    from toolret.metrics.names import metric_name_for_mlflow

    result_json = Path(result_json_path)
    result = load_result(result_json)
    if project_dir is None:
        project_dir = next((p for p in result_json.resolve().parents if (p / "dvc.yaml").is_file()), None)
    project = Path(project_dir) if project_dir else None
    pq_path = Path(per_query_path) if per_query_path else per_query_path_for(result_json)

    client = get_client(tracking_uri, project)
    exp_id = get_or_create_experiment(client, experiment)
    dataset, method, docs = (str(result.get(k, "?")) for k in ("dataset", "method", "docs"))
    prov = result.get("provenance") or {}
    git_sha = prov.get("git_sha") or (git_state(project).label if project else "unknown")

    run_tags = {
        "toolret.kind": "evaluation",
        "toolret.dataset": dataset,
        "toolret.method": method,
        "toolret.docs": docs,
        "git_sha": str(git_sha),
        "mlflow.source.git.commit": str(git_sha).removesuffix("-dirty"),
    }
    for path, md5 in _input_versions(result_json, project).items():
        run_tags[safe_key(f"dvc.md5.{path}")] = md5
    for path, version in (prov.get("artifact_versions") or {}).items():
        run_tags[safe_key(f"artifact.{path}")] = str(version)[:5000]
    run_tags.update({safe_key(k): str(v) for k, v in (tags or {}).items()})

    run = client.create_run(exp_id, run_name=f"{dataset}/{method}/{docs}", tags=run_tags)
    run_id = run.info.run_id
    try:
        families = metrics_by_k(result["metrics"])
        ks = sorted({k for v in families.values() for k in v})
        params = {"dataset": dataset, "method": method, "docs": docs, "ks": json.dumps(ks),
                  "n_queries": str(result.get("n_queries", ""))}
        for k, v in flatten(prov.get("params") or {}).items():
            params.setdefault(safe_key(k), v)
        param_list = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(param_list), 100):
            client.log_batch(run_id, params=param_list[i:i + 100])

        now = int(time.time() * 1000)
        metrics: list[Metric] = []
        for name, value in result["metrics"].items():
            if isinstance(value, (int, float)):
                metrics.append(Metric(metric_name_for_mlflow(name), float(value), now, 0))
        for name, bounds in (result.get("ci95") or {}).items():
            if isinstance(bounds, (list, tuple)) and len(bounds) == 2:
                key = metric_name_for_mlflow(name)
                metrics.append(Metric(f"{key}_ci95_lo", float(bounds[0]), now, 0))
                metrics.append(Metric(f"{key}_ci95_hi", float(bounds[1]), now, 0))
        for fam, values in families.items():
            for k, value in values.items():
                metrics.append(Metric(f"{metric_name_for_mlflow(fam)}_by_k", value, now, k))
        for stat, value in (result.get("latency_ms") or {}).items():
            if isinstance(value, (int, float)):
                metrics.append(Metric(f"latency_{safe_key(stat)}_ms", float(value), now, 0))
        if isinstance(result.get("n_queries"), (int, float)):
            metrics.append(Metric("n_queries", float(result["n_queries"]), now, 0))
        for i in range(0, len(metrics), 1000):
            client.log_batch(run_id, metrics=metrics[i:i + 1000])

        client.log_artifact(run_id, str(result_json), artifact_path="result")
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp)
            if pq_path.is_file():
                frame = _per_query_frame(load_per_query(pq_path))
                csv = tmp_path / "per_query.csv"
                frame.to_csv(csv, index=False)
                client.log_artifact(run_id, str(csv), artifact_path="per_query")
                client.log_table(run_id, frame, "per_query/per_query_table.json")
            plot = plot_metrics_vs_k(result, tmp_path / "metrics_vs_k.png")
            if plot is not None:
                client.log_artifact(run_id, str(plot), artifact_path="plots")
            (tmp_path / "provenance.json").write_text(json.dumps(prov, indent=2, default=str), encoding="utf-8")
            client.log_artifact(run_id, str(tmp_path / "provenance.json"), artifact_path="result")
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


__all__ = ["load_result", "load_per_query", "log_evaluation_run", "metrics_by_k", "per_query_path_for",
           "plot_metrics_vs_k"]
