"""One MLflow run per evaluation result (dataset, method, document variant), logged idempotently.

A result is the JSON ``toolret evaluate-index`` writes (``data/runs/<ds>/<method>/<docs>.json``)::

    {"dataset", "method", "docs", "split", "n_queries", "metrics": {"recall@5": .., "mrr": ..},
     "ci95": {"recall@5": [lo, hi], ..},
     "provenance": {"dataset_checksums", "dataset_source", "artifact_versions"}}

with ``<docs>.per_query.jsonl`` beside it (``{"query_id", "query", "recall@5": .., "ranked", "gold",
"gold_names", "top5_names"}``). Results that DVC tracks are deterministic; what changes from one run to
the next (latency, git sha, the params dump) is in the untracked run-info sidecar
(:func:`toolret.evaluation.load_run_info`), merged here when present. A result written by ``toolret
evaluate --output x.json`` carries those fields itself.

Any other JSON in a results folder (e.g. Re-Invoke's ``reinvoke-ablations/summary.json``) is not a
result: :func:`find_result_files` skips it.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from toolret.config import load_params
from toolret.evaluation import load_run_info
from toolret.metrics.names import metric_name_for_mlflow
from toolret.provenance import dvc_md5, git_state, read_dvc_lock, sha256_file
from toolret.registry import components, parse_spec
from toolret.tracking.lineage import producing_stage, stage_md5s, stage_params, upstream_stages, version_tags
from toolret.tracking.model_registry import models_used_by, register_model
from toolret.tracking.store import (INPUTS_TAG, digest, find_run, flatten, get_client, get_or_create_experiment,
                                    logged_metric, make_current, safe_key)

_AT_K = re.compile(r"^(?P<family>.+)@(?P<k>\d+)$")

# Bump when what a run holds changes: runs logged by an older format then count as other inputs.
# 3: metrics logged rounded to 3 decimals (store.logged_metric; the result artifact keeps full precision).
LOG_FORMAT = "3"
# Dataset preparation (catalog, clean): shared by every evaluation of a dataset, versioned by the
# dvc.md5 tags; their params are not logged as the evaluation's params.
DATASET_PREP_ROOTS = ("data/catalogs", "data/curated")
PER_QUERY_COLUMNS = ("query_id", "query", "gold_names", "top5_names")  # first columns of the per-query table


def load_result(path: str | Path) -> dict[str, Any]:
    """Read a result JSON and check it has the fields the trackers use."""
    obj = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(obj, dict) or not isinstance(obj.get("metrics"), dict):
        raise ValueError(f"{path}: not an evaluation result (no 'metrics' object)")
    return obj


def is_evaluation_result(path: str | Path) -> bool:
    """Whether ``path`` is a result JSON (an object with a ``metrics`` object); unreadable files are not."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(obj, dict) and isinstance(obj.get("metrics"), dict)


def find_result_files(folder: str | Path) -> list[Path]:
    """The evaluation results in ``folder`` (sorted): ``*.json`` with a metrics object.

    Skips the per-query tables (``*.per_query.jsonl``), run-info sidecars (``*.run_info.json``) and any
    other JSON (summaries, configs).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return [p for p in sorted(folder.glob("*.json"))
            if not p.name.endswith(".run_info.json") and is_evaluation_result(p)]


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
        lo = [max(0.0, ys[i] - (ci.get(f"{fam}@{k}") or [ys[i], ys[i]])[0]) for i, k in enumerate(ks)]
        hi = [max(0.0, (ci.get(f"{fam}@{k}") or [ys[i], ys[i]])[1] - ys[i]) for i, k in enumerate(ks)]
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
    """The per-query table: id, query text, gold and top-5 tool names first, then the metrics and ids.

    Lists become ``" | "``-joined text (tool names hold spaces).
    """
    import pandas as pd

    flat = []
    for r in rows:
        flat.append({k: " | ".join(map(str, v)) if isinstance(v, list) else v for k, v in r.items()})
    frame = pd.DataFrame(flat)
    first = [c for c in PER_QUERY_COLUMNS if c in frame.columns]
    return frame[first + [c for c in frame.columns if c not in first]]


def _relative(path: Path, project: Path | None) -> str | None:
    if project is None:
        return None
    try:
        return path.resolve().relative_to(project.resolve()).as_posix()
    except ValueError:
        return None


def _input_versions(result_json: Path, project_dir: Path | None, lock: dict[str, Any] | None = None) -> dict[str, str]:
    """``{path: md5}`` for the stage that produced ``result_json`` (its deps and outs in dvc.lock)."""
    if project_dir is None:
        return {}
    lock = read_dvc_lock(project_dir) if lock is None else lock
    rel = _relative(result_json, project_dir)
    if rel is None:
        return {}
    stage = producing_stage(rel, lock)
    versions = stage_md5s(stage, lock) if stage else {}
    if not versions:
        md5 = dvc_md5(rel, project_dir, lock)
        if md5:
            versions[rel] = md5
    return versions


def _is_dataset_prep(outs: list[str]) -> bool:
    return bool(outs) and all(any(o == r or o.startswith(r + "/") for r in DATASET_PREP_ROOTS) for o in outs)


def stage_lineage(result_json: str | Path, project_dir: str | Path | None, lock: dict[str, Any] | None = None
                  ) -> list[str]:
    """The DVC stage that wrote ``result_json`` and the method stages it read (nearest first).

    Dataset-preparation stages (outputs under :data:`DATASET_PREP_ROOTS`) are left out. ``[]`` when
    ``dvc.lock`` does not know the result (e.g. ``toolret evaluate --output x.json``).
    """
    if project_dir is None:
        return []
    project = Path(project_dir)
    lock = read_dvc_lock(project) if lock is None else lock
    rel = _relative(Path(result_json), project)
    stage = producing_stage(rel, lock) if rel else None
    if not stage:
        return []
    return [stage, *upstream_stages(stage, lock, stop=_is_dataset_prep)]


def method_sections(method: str) -> tuple[set[str], set[str]] | None:
    """``(sections the method's components read, sections any component reads)`` from the registry;
    ``None`` for a name it cannot parse (then nothing is filtered). A registered pipeline naming a component
    by a params key is resolved against the project's ``params.yaml``.

    ``bm25`` -> ``({"bm25"}, {"bm25", "dense", ...})``; a grid row ``dense[baseline]`` is read as ``dense``.
    """

    try:
        spec = parse_spec(re.sub(r"\[.*\]$", "", method), load_params())
        own = set(spec.sections())
    except Exception:  # an unregistered name (a user's own result): keep what the stages declared
        return None
    return own, {s for c in components() for s in c.sections}


def run_params(result: dict[str, Any], lineage: list[str], lock: dict[str, Any], run_info: dict[str, Any]
               ) -> dict[str, str]:
    """The params a run logs: the params its DVC stages declared, as ``dvc.lock`` recorded them, less the
    sections of components the method does not use.

    A bm25 evaluation logs ``evaluation.*`` (the evaluate stage) and ``bm25.*`` (its index stage), not
    the whole ``params.yaml``, and not ``dense.*`` although the index stage (one template for every
    method) declares it: the ``bm25`` component reads only ``bm25`` (:func:`method_sections`). Without
    DVC lineage the result's params dump (run info or result provenance) is narrowed to ``evaluation``
    and the method's own sections.
    """
    method = str(result.get("method", ""))
    sections = method_sections(method)
    declared: dict[str, Any] = {}
    for stage in lineage:
        for key, value in stage_params(stage, lock).items():
            declared.setdefault(key, value)
    if not lineage:
        dump = ((run_info.get("provenance") or {}).get("params")
                or (result.get("provenance") or {}).get("params") or {})
        base = re.split(r"[\[\-]", method)[0]
        declared = {k: v for k, v in dump.items()
                    if k in ("evaluation", method, base) or (sections is not None and k in sections[0])}
    if sections is not None:
        own, component_sections = sections
        declared = {k: v for k, v in declared.items()
                    if k.split(".")[0] not in component_sections or k.split(".")[0] in own}
    return {safe_key(k): v for k, v in flatten(declared).items()} if declared else {}


def log_evaluation_run(
    result_json_path: str | Path,
    per_query_path: str | Path | None = None,
    tags: dict[str, str] | None = None,
    experiment: str = "toolret",
    tracking_uri: str | None = None,
    project_dir: str | Path | None = None,
    register_models: bool = True,
) -> str:
    """Log one evaluation result as an MLflow run (or reuse the run of the same inputs) and return its id.

    Idempotent: the run's identity is ``(dataset, method, docs)`` (tags ``toolret.dataset/method/docs``)
    and its inputs the sha256 of the result JSON and per-query file, the ``dvc.lock`` md5s of the stage
    that wrote it and the params of its lineage (tag ``toolret.inputs``). A FINISHED run of the same
    identity and inputs is reused (only ``tags`` are updated); otherwise a new run is logged. Either
    way it becomes the identity's current run (``toolret.current=true``); the others get
    ``toolret.current=false`` and ``toolret.superseded_by=<run id>``.

    The run holds: params (dataset, method, docs, split, ks, n_queries, the DVC stage and the params
    its stages declared, see :func:`run_params`), metrics (rounded to three decimals for the runs table,
    :func:`toolret.tracking.store.logged_metric`; the result JSON artifact has them in full; ``recall@5``
    as ``recall_at_5``, CI bounds
    as ``ci95/recall_at_5/lo`` and ``.../hi``, every ``<metric>@k`` family also as ``<metric>_by_k``
    with step k, latency from the run info), tags (git sha, the DVC md5 of each data dep/out of the
    stage and one digest ``dvc.md5.code`` of its source-file deps, registered models it used, plus
    ``tags``) and artifacts (result JSON, run info, every dvc.lock md5 of the stage, per-query table as
    CSV and MLflow table, a metric-vs-k plot).

    Args:
        result_json_path: the result JSON.
        per_query_path: its per-query JSONL (default: ``<docs>.per_query.jsonl`` beside it; skipped
            when absent).
        tags: extra run tags (e.g. the Dagster run id); set on a reused run too.
        experiment: MLflow experiment name (created when missing).
        tracking_uri: MLflow store (default ``$MLFLOW_TRACKING_URI`` or the project's sqlite store).
        project_dir: the DVC project (for ``dvc.lock`` and git); default: the result's ancestors'
            first folder holding ``dvc.yaml``.
        register_models: register the models in the result's DVC lineage (idempotent, see
            :mod:`toolret.tracking.model_registry`) and tag the run with their versions.
    """
    from mlflow.entities import Metric, Param

    result_json = Path(result_json_path)
    result = load_result(result_json)
    run_info = load_run_info(result_json)
    if project_dir is None:
        project_dir = next((p for p in result_json.resolve().parents if (p / "dvc.yaml").is_file()), None)
    project = Path(project_dir) if project_dir else None
    pq_path = Path(per_query_path) if per_query_path else per_query_path_for(result_json)
    lock = read_dvc_lock(project) if project else {}

    client = get_client(tracking_uri, project)
    exp_id = get_or_create_experiment(client, experiment)
    dataset, method, docs = (str(result.get(k, "?")) for k in ("dataset", "method", "docs"))
    identity = {"toolret.kind": "evaluation", "toolret.dataset": dataset, "toolret.method": method,
                "toolret.docs": docs}
    lineage = stage_lineage(result_json, project, lock)
    params = run_params(result, lineage, lock, run_info)
    versions = _input_versions(result_json, project, lock)
    inputs = digest({"format": LOG_FORMAT, "result": sha256_file(result_json),
                     "per_query": sha256_file(pq_path) if pq_path.is_file() else None,
                     "dvc": versions, "params": params})
    extra_tags = {safe_key(k): str(v) for k, v in (tags or {}).items()}
    existing = find_run(client, exp_id, identity, inputs)
    if existing is not None:
        run_id = existing.info.run_id
        for k, v in extra_tags.items():
            if existing.data.tags.get(k) != v:
                client.set_tag(run_id, k, v)
    else:
        run_id = _log_new_run(client, exp_id, result_json, result, run_info, pq_path, project, identity, inputs,
                              lineage, params, versions, extra_tags, Metric, Param, metric_name_for_mlflow)
    make_current(client, exp_id, identity, run_id)
    if register_models and project is not None and lineage:  # after the run: a new version links to it
        for model in models_used_by(lineage[0], lock):
            if (project / model.path).exists():
                mv = register_model(client, model, project, run_id=run_id)
                tag, uri = safe_key(f"toolret.model.{mv['name']}"), f"models:/{mv['name']}/{mv['version']}"
                if existing is None or existing.data.tags.get(tag) != uri:
                    client.set_tag(run_id, tag, uri)
                client.set_model_version_tag(mv["name"], mv["version"],
                                             safe_key(f"evaluation.{dataset}.{method}.{docs}"), run_id)
    return run_id


def _log_new_run(client: Any, exp_id: str, result_json: Path, result: dict[str, Any], run_info: dict[str, Any],
                 pq_path: Path, project: Path | None, identity: dict[str, str], inputs: str, lineage: list[str],
                 params: dict[str, str], versions: dict[str, str], tags: dict[str, str], Metric: Any, Param: Any,
                 metric_name_for_mlflow: Any) -> str:
    dataset, method, docs = identity["toolret.dataset"], identity["toolret.method"], identity["toolret.docs"]
    prov = result.get("provenance") or {}
    info_prov = run_info.get("provenance") or {}
    if prov.get("git_sha"):
        git_sha, sha_source = str(prov["git_sha"]), "result"
    elif info_prov.get("git_sha"):
        git_sha, sha_source = str(info_prov["git_sha"]), "run_info"
    else:  # neither says which commit produced it: the project's commit now, labelled as such
        git_sha, sha_source = (git_state(project).label if project else "unknown"), "report_time"
    run_tags = {**identity, INPUTS_TAG: inputs, "git_sha": git_sha, "toolret.git_sha_source": sha_source,
                "mlflow.source.git.commit": git_sha.removesuffix("-dirty")}
    if lineage:
        run_tags["dvc.stage"] = lineage[0]
    run_tags.update(version_tags(versions))
    for path, version in (prov.get("artifact_versions") or {}).items():
        run_tags[safe_key(f"artifact.{path}")] = str(version)[:5000]
    run_tags.update(tags)

    start = int(time.time() * 1000)
    run = client.create_run(exp_id, run_name=run_label(dataset, method, docs), tags=run_tags, start_time=start)
    run_id = run.info.run_id
    seconds = evaluation_seconds(result, run_info)
    try:
        families = metrics_by_k(result["metrics"])
        ks = sorted({k for v in families.values() for k in v})
        all_params = {"dataset": dataset, "method": method, "docs": docs, "split": str(result.get("split", "")),
                      "ks": json.dumps(ks), "n_queries": str(result.get("n_queries", "")),
                      "dvc.stages": ", ".join(lineage)}
        for k, v in params.items():
            all_params.setdefault(k, v)
        param_list = [Param(k, v) for k, v in all_params.items()]
        for i in range(0, len(param_list), 100):
            client.log_batch(run_id, params=param_list[i:i + 100])

        now = int(time.time() * 1000)
        metrics: list[Any] = []
        for name, value in result["metrics"].items():
            if isinstance(value, (int, float)):
                metrics.append(Metric(metric_name_for_mlflow(name), logged_metric(value), now, 0))
        for name, bounds in (result.get("ci95") or {}).items():
            if isinstance(bounds, (list, tuple)) and len(bounds) == 2:
                key = metric_name_for_mlflow(name)
                metrics.append(Metric(f"ci95/{key}/lo", logged_metric(bounds[0]), now, 0))
                metrics.append(Metric(f"ci95/{key}/hi", logged_metric(bounds[1]), now, 0))
        for fam, values in families.items():
            for k, value in values.items():
                metrics.append(Metric(f"{metric_name_for_mlflow(fam)}_by_k", logged_metric(value), now, k))
        latency = result.get("latency_ms") or run_info.get("latency_ms") or {}
        for stat, value in latency.items():
            if isinstance(value, (int, float)) and stat != "n":
                metrics.append(Metric(f"latency_{safe_key(stat)}_ms", logged_metric(value), now, 0))
        for key in ("batch_search_s", "index_build_s"):
            value = result.get(key, run_info.get(key))
            if isinstance(value, (int, float)):
                metrics.append(Metric(key, logged_metric(value), now, 0))
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
                frame.to_csv(csv, index=False, encoding="utf-8-sig")
                client.log_artifact(run_id, str(csv), artifact_path="per_query")
                client.log_table(run_id, frame, "per_query/per_query_table.json")
            plot = plot_metrics_vs_k(result, tmp_path / "metrics_vs_k.png")
            if plot is not None:
                client.log_artifact(run_id, str(plot), artifact_path="plots")
            provenance = {**prov, **{k: v for k, v in info_prov.items() if k not in prov}}
            (tmp_path / "provenance.json").write_text(json.dumps(provenance, indent=2, default=str), encoding="utf-8")
            client.log_artifact(run_id, str(tmp_path / "provenance.json"), artifact_path="result")
            if versions:
                (tmp_path / "dvc_versions.json").write_text(json.dumps(versions, indent=2), encoding="utf-8")
                client.log_artifact(run_id, str(tmp_path / "dvc_versions.json"), artifact_path="result")
            if run_info:
                (tmp_path / "run_info.json").write_text(json.dumps(run_info, indent=2, default=str), encoding="utf-8")
                client.log_artifact(run_id, str(tmp_path / "run_info.json"), artifact_path="result")
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    # the run's Duration in the UI: the evaluation's own time (indexing and search), not the logging's
    client.set_terminated(run_id, status="FINISHED",
                          end_time=start + round(1000 * seconds) if seconds is not None else None)
    return run_id


def run_label(dataset: str, method: str, docs: str) -> str:
    """An evaluation run's name: the method first, so that the runs table's narrow name column still says
    which system a row is (the dataset has its own column)."""
    return f"{method} ({docs}) @ {dataset}"


def evaluation_seconds(result: dict[str, Any], run_info: dict[str, Any]) -> float | None:
    """The evaluation's own time: building the index and searching every query (the result's timings, else
    its run-info sidecar's); ``None`` where neither was measured."""
    parts = [result.get(k, run_info.get(k)) for k in ("index_build_s", "batch_search_s")]
    parts = [float(v) for v in parts if isinstance(v, (int, float))]
    return sum(parts) if parts else None


__all__ = ["DATASET_PREP_ROOTS", "LOG_FORMAT", "evaluation_seconds", "find_result_files", "is_evaluation_result",
           "load_per_query", "load_result", "log_evaluation_run", "method_sections", "metrics_by_k",
           "per_query_path_for", "plot_metrics_vs_k", "run_label", "run_params", "stage_lineage"]
