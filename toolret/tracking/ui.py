"""Where the MLflow UI opens: the runs table of the ``toolret`` experiment, headline metrics as columns.

What MLflow 3 (3.17) does, read from its UI bundle (``mlflow/server/js/build/static/js``):

* An experiment page shows the GenAI views or the classic runs table by the *workflow type*: the URL
  parameter ``workflowType`` (``genai`` | ``machine_learning``), else the browser's stored choice
  (localStorage ``mlflow.workflowType``), else ``genai``. With the feature flag the 3.17 bundle ships
  switched on, the experiment kind comes from the workflow type alone; the experiment tag
  ``mlflow.experimentKind`` (:data:`toolret.tracking.store.EXPERIMENT_KIND`, still set on our experiments
  for UIs that read it) is not consulted. So a link to the runs table must carry
  ``?workflowType=machine_learning``.
* The runs table's columns, filter and order are UI state. A shared view is an experiment tag
  ``mlflow.sharedViewState.<key>`` holding ``{"name", "createdAt", "updatedAt", "state"}`` (``state`` is
  the JSON of the view: search facets such as ``searchFilter`` and UI state such as ``selectedColumns``,
  whose entries are ``metrics.`<key>``` / ``params.`<key>```); the URL parameter
  ``viewStateShareKey=<key>`` applies it, and the experiment's *Views* menu lists it. That is the one
  way MLflow offers to open a runs table with chosen columns; :func:`ensure_runs_view` writes ours.

``python -m toolret.tracking.ui`` (run by ``make ui``) creates the experiments when missing, writes the
view and prints the URLs.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from toolret.tracking.store import CURRENT_TAG, get_client, get_or_create_experiment

SHARED_VIEW_PREFIX = "mlflow.sharedViewState."  # MLflow UI: experiment tag prefix of a shared runs-table view
VIEW_KEY = "toolret-headline"
VIEW_NAME = "toolret: headline metrics (current runs)"
WORKFLOW = "machine_learning"  # the MLflow UI's workflowType of the classic runs table
DEFAULT_HEADLINE = ("recall_at_5", "ndcg_at_5", "comp_at_5", "mrr")
IDENTITY_PARAMS = ("dataset", "method", "docs")  # shown beside the (often truncated) run name


def headline_metric_keys(client: Any, experiment_id: str, max_runs: int = 200) -> list[str]:
    """The headline metrics (``*_at_5`` and ``mrr``, in :data:`DEFAULT_HEADLINE` order first) the
    experiment's runs logged; :data:`DEFAULT_HEADLINE` when it has none yet."""
    keys: set[str] = set()
    for run in client.search_runs([experiment_id], max_results=max_runs):
        keys.update(k for k in run.data.metrics if k.endswith("_at_5") or k == "mrr")
    if not keys:
        return list(DEFAULT_HEADLINE)
    return [k for k in DEFAULT_HEADLINE if k in keys] + sorted(keys - set(DEFAULT_HEADLINE))


def view_state(metrics: Sequence[str]) -> dict[str, Any]:
    """The runs-table view: identity params and headline metrics as columns, current runs only."""
    return {
        "searchFilter": f"tags.`{CURRENT_TAG}` = 'true'",
        "selectedColumns": [*(f"params.`{p}`" for p in IDENTITY_PARAMS), *(f"metrics.`{m}`" for m in metrics)],
        "runsHiddenMode": "SHOW_ALL",
    }


def ensure_runs_view(client: Any, experiment_id: str, metrics: Sequence[str] | None = None,
                     key: str = VIEW_KEY) -> str:
    """Write (or keep) the shared view ``key`` of the experiment's runs table; return its key.

    Idempotent: an unchanged view keeps its tag (and its ``createdAt``).
    """
    state = json.dumps(view_state(metrics if metrics is not None else headline_metric_keys(client, experiment_id)),
                       sort_keys=True)
    tag = SHARED_VIEW_PREFIX + key
    old = (client.get_experiment(experiment_id).tags or {}).get(tag)
    created = int(time.time() * 1000)
    if old:
        try:
            envelope = json.loads(old)
            if envelope.get("state") == state and envelope.get("name") == VIEW_NAME:
                return key
            created = int(envelope.get("createdAt", created))
        except (ValueError, AttributeError, TypeError):
            pass
    envelope = {"name": VIEW_NAME, "createdAt": created, "updatedAt": int(time.time() * 1000), "state": state}
    client.set_experiment_tag(experiment_id, tag, json.dumps(envelope))
    return key


def runs_table_url(ui_url: str, experiment_id: str, view_key: str | None = None) -> str:
    """The experiment's runs table in the classic (machine-learning) workflow, with view ``view_key``."""
    url = f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType={WORKFLOW}"
    return url + (f"&viewStateShareKey={view_key}" if view_key else "")


def prepare(ui_url: str, experiment: str = "toolret", comparison_experiment: str | None = None,
            tracking_uri: str | None = None, project_dir: Any = None) -> dict[str, str]:
    """Create the experiments when missing, write the runs view, return ``{"runs": url, "comparisons": url}``."""
    from toolret.tracking.comparison import COMPARISON_EXPERIMENT

    client = get_client(tracking_uri, project_dir)
    exp_id = get_or_create_experiment(client, experiment)
    key = ensure_runs_view(client, exp_id)
    cmp_id = get_or_create_experiment(client, comparison_experiment or COMPARISON_EXPERIMENT)
    return {"runs": runs_table_url(ui_url, exp_id, key), "comparisons": runs_table_url(ui_url, cmp_id)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the MLflow UI URLs of the toolret runs tables.")
    parser.add_argument("--ui-url", default="http://127.0.0.1:5000")
    parser.add_argument("--experiment", default="toolret")
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args(argv)
    urls = prepare(args.ui_url, args.experiment, tracking_uri=args.tracking_uri)
    print(f"MLflow UI, evaluation runs (headline metrics, current runs): {urls['runs']}")
    print(f"MLflow UI, comparison runs (one per dataset):               {urls['comparisons']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["SHARED_VIEW_PREFIX", "VIEW_KEY", "ensure_runs_view", "headline_metric_keys", "main", "prepare",
           "runs_table_url", "view_state"]
