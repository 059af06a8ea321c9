"""Where runs go: the project's local MLflow store (sqlite + artifact folder) unless told otherwise."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

_KEY_BAD = re.compile(r"[^A-Za-z0-9_\-. /:]")
_FILTER_SAFE = re.compile(r"^[A-Za-z0-9_\-. /@\[\]]*$")

# MLflow 3's UI opens an experiment on the view of its kind: untagged experiments are guessed and may
# open on the (empty) GenAI traces view. These are the tag and value the UI reads for "Machine learning"
# (runs table); see the `mlflow.experimentKind` tag in the MLflow 3 docs / UI sources.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"

# Run bookkeeping tags (see :func:`find_run` / :func:`make_current`).
INPUTS_TAG = "toolret.inputs"  # digest of everything the run was logged from
CURRENT_TAG = "toolret.current"  # "true" on the newest run of an identity, "false" on the older ones
SUPERSEDED_TAG = "toolret.superseded_by"  # on older runs: the run id that replaced them

# MLflow's runs table shows a metric as logged (it has no number format): the evaluation and comparison
# runs log their numbers rounded (:func:`logged_metric`); the full precision is in their result artifacts.
METRIC_DECIMALS = 3


def default_tracking_uri(project_dir: str | Path | None = None, create: bool = True) -> str:
    """``$MLFLOW_TRACKING_URI`` or ``sqlite:///<project>/data/mlflow/mlflow.db`` (folder created unless
    ``create`` is false: a lookup never makes a store)."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    root = Path(project_dir) if project_dir else Path(__file__).resolve().parents[2]
    folder = root.resolve() / "data" / "mlflow"
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


def missing_local_store(tracking_uri: str) -> Path | None:
    """The database file of a local sqlite ``tracking_uri`` when it does not exist (MLflow would create it
    and run its migrations, ~10 s), else ``None`` (it exists, or the store is a server)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    db = Path(tracking_uri[len("sqlite:///"):])
    db = db if db.is_absolute() else Path.cwd() / db
    return None if db.is_file() else db


def local_artifact_root(tracking_uri: str) -> str | None:
    """``<db folder>/artifacts`` as a file URI for a local sqlite store, else ``None`` (server decides)."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///"):])
        if not db.is_absolute():
            db = Path.cwd() / db
        folder = db.parent / "artifacts"
        folder.mkdir(parents=True, exist_ok=True)
        return folder.resolve().as_uri()
    return None


def get_client(tracking_uri: str | None = None, project_dir: str | Path | None = None) -> Any:
    """An :class:`mlflow.MlflowClient` for ``tracking_uri`` (default: :func:`default_tracking_uri`)."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri or default_tracking_uri(project_dir))


def get_or_create_experiment(client: Any, name: str) -> str:
    """The id of experiment ``name``, created (with the project's artifact folder) when missing.

    The experiment is tagged as a model-development experiment (:data:`EXPERIMENT_KIND`) so the MLflow UI
    opens it on the runs table; an existing experiment without the tag gets it (a kind chosen by
    someone else is left alone).
    """
    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            return client.create_experiment(name, artifact_location=local_artifact_root(client.tracking_uri),
                                            tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
        except Exception:  # created concurrently
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if not (exp.tags or {}).get(EXPERIMENT_KIND_TAG):
        client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return exp.experiment_id


def logged_metric(value: float) -> float:
    """``value`` as an evaluation or comparison run logs it: rounded to :data:`METRIC_DECIMALS` decimals.

    Example:
        >>> logged_metric(0.22950819672131148)
        0.23
    """
    return round(float(value), METRIC_DECIMALS)


def digest(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (the identity of a run's inputs)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def runs_of(client: Any, experiment_id: str, identity: dict[str, str]) -> list[Any]:
    """The active runs whose tags carry every ``identity`` tag with that exact value, newest first."""
    safe = {k: v for k, v in identity.items() if _FILTER_SAFE.match(v) and _FILTER_SAFE.match(k)}
    filter_string = " and ".join(f"tags.`{k}` = '{v}'" for k, v in safe.items())
    runs = client.search_runs([experiment_id], filter_string, max_results=50000,
                              order_by=["attributes.start_time DESC"])
    return [r for r in runs if all(r.data.tags.get(k) == v for k, v in identity.items())]


def find_run(client: Any, experiment_id: str, identity: dict[str, str], inputs: str) -> Any | None:
    """The newest FINISHED run of ``identity`` logged from the same ``inputs`` digest (``None`` if none)."""
    return finished_run_among(runs_of(client, experiment_id, identity), inputs)


def finished_run_among(runs: list[Any], inputs: str) -> Any | None:
    """:func:`find_run` over ``runs`` already fetched (newest first)."""
    for run in runs:
        if run.data.tags.get(INPUTS_TAG) == inputs and run.info.status == "FINISHED":
            return run
    return None


def make_current(client: Any, experiment_id: str, identity: dict[str, str], run_id: str) -> None:
    """Mark ``run_id`` the current run of ``identity``; every other run of it points to it as superseded.

    Older runs are kept (their numbers stay comparable in the UI); filter the runs table with
    ``tags.toolret.current = 'true'`` to see only the current ones.
    """
    make_current_among(client, runs_of(client, experiment_id, identity), run_id)


def make_current_among(client: Any, runs: list[Any], run_id: str) -> None:
    """:func:`make_current` over the runs of an identity already fetched (``run_id`` among them or not)."""
    for run in runs:
        tags = run.data.tags
        if run.info.run_id == run_id:
            if tags.get(CURRENT_TAG) != "true":
                client.set_tag(run_id, CURRENT_TAG, "true")
            if SUPERSEDED_TAG in tags:
                client.delete_tag(run_id, SUPERSEDED_TAG)
        elif tags.get(CURRENT_TAG) != "false":  # runs superseded earlier keep their link
            client.set_tag(run.info.run_id, CURRENT_TAG, "false")
            client.set_tag(run.info.run_id, SUPERSEDED_TAG, run_id)


WORKFLOW = "machine_learning"  # the MLflow UI's workflowType of the classic runs table (toolret.tracking.ui)


def run_url(ui_url: str, experiment_id: str, run_id: str) -> str:
    """The MLflow UI page of a run (``<ui>/#/experiments/<exp>/runs/<run>``), opened in the classic
    (machine-learning) view: without the parameter the UI may open it in GenAI mode."""
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?workflowType={WORKFLOW}"


def model_version_url(ui_url: str, name: str, version: str | int) -> str:
    """The MLflow UI page of a registered model version, in the classic (machine-learning) view as
    :func:`run_url` (the UI reads the parameter on every page; without it the sidebar may open in GenAI mode)."""
    from urllib.parse import quote

    return f"{ui_url.rstrip('/')}/#/models/{quote(name, safe='')}/versions/{version}?workflowType={WORKFLOW}"


def safe_key(key: str) -> str:
    """A param/tag key MLflow accepts (``@`` -> ``_at_``, other odd characters -> ``_``)."""
    return _KEY_BAD.sub("_", key.replace("@", "_at_"))[:250]


def flatten(obj: Any, prefix: str = "") -> dict[str, str]:
    """Nested dicts -> ``{"a.b": "value"}`` with string values (lists JSON-encoded, 500 chars max)."""
    import json

    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    else:
        text = obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True, default=str)
        out[prefix or "value"] = text[:500]
    return out
