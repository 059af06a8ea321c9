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

The comparisons experiment (one run per dataset, :mod:`toolret.tracking.comparison`) gets a view of its own
(:data:`COMPARISON_VIEW_KEY`): per headline metric the strongest baseline's mean ``reference/<m>``, the best
system's ``best/<m>`` and how many systems beat the reference ``n_better/<m>``, with the dataset and the
systems behind the first metric's numbers as params (:func:`comparison_columns`).

``python -m toolret.tracking.ui`` (run by ``make ui``) creates the experiments when missing, writes the
views and prints the URLs.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from toolret.tracking.comparison import COMPARISON_EXPERIMENT
from toolret.tracking.store import CURRENT_TAG, WORKFLOW, get_client, get_or_create_experiment

SHARED_VIEW_PREFIX = "mlflow.sharedViewState."  # MLflow UI: experiment tag prefix of a shared runs-table view
VIEW_KEY = "toolret-headline"
VIEW_NAME = "toolret: headline metrics (current runs)"
DEFAULT_HEADLINE = ("recall_at_5", "ndcg_at_5", "comp_at_5", "mrr")
IDENTITY_PARAMS = ("dataset", "method", "docs")  # shown beside the (often truncated) run name
COMPARISON_VIEW_KEY = "toolret-comparisons"
COMPARISON_VIEW_NAME = "toolret: comparison per dataset (current runs)"
COMPARISON_COLUMNS = ("reference", "best", "n_better")  # per headline metric m: the metrics <prefix>/<m>


def headline_metric_keys(client: Any, experiment_id: str, max_runs: int = 200) -> list[str]:
    """The headline metrics (``*_at_5`` and ``mrr``, in :data:`DEFAULT_HEADLINE` order first) the
    experiment's runs logged; :data:`DEFAULT_HEADLINE` when it has none yet."""
    keys: set[str] = set()
    for run in client.search_runs([experiment_id], max_results=max_runs):
        keys.update(k for k in run.data.metrics if k.endswith("_at_5") or k == "mrr")
    return _headline_first(keys) if keys else list(DEFAULT_HEADLINE)


def _headline_first(names: set[str]) -> list[str]:
    return [k for k in DEFAULT_HEADLINE if k in names] + sorted(names - set(DEFAULT_HEADLINE))


def comparison_columns(client: Any, experiment_id: str, max_runs: int = 200) -> tuple[list[str], list[str]]:
    """``(params, metrics)`` of the comparisons view: ``dataset`` and the systems behind the first headline
    metric's ``reference`` / ``best`` (params ``reference/<m>``, ``best/<m>``); ``n_systems`` and, per headline
    metric ``m`` the experiment's runs logged (:data:`DEFAULT_HEADLINE` when none yet), the metrics
    ``<prefix>/<m>`` of :data:`COMPARISON_COLUMNS`."""
    headline: set[str] = set()
    for run in client.search_runs([experiment_id], max_results=max_runs):
        for key in run.data.metrics:
            prefix, _, m = key.partition("/")
            if prefix in COMPARISON_COLUMNS and (m.endswith("_at_5") or m == "mrr"):
                headline.add(m)
    ordered = _headline_first(headline) if headline else list(DEFAULT_HEADLINE)
    params = ["dataset", f"reference/{ordered[0]}", f"best/{ordered[0]}"]
    return params, ["n_systems", *(f"{prefix}/{m}" for m in ordered for prefix in COMPARISON_COLUMNS)]


def view_state(metrics: Sequence[str], params: Sequence[str] = IDENTITY_PARAMS) -> dict[str, Any]:
    """The runs-table view: ``params`` (identity) and headline ``metrics`` as columns, current runs only."""
    return {
        "searchFilter": f"tags.`{CURRENT_TAG}` = 'true'",
        "selectedColumns": [*(f"params.`{p}`" for p in params), *(f"metrics.`{m}`" for m in metrics)],
        "runsHiddenMode": "SHOW_ALL",
    }


def ensure_runs_view(client: Any, experiment_id: str, metrics: Sequence[str] | None = None,
                     key: str = VIEW_KEY, name: str = VIEW_NAME, params: Sequence[str] = IDENTITY_PARAMS) -> str:
    """Write (or keep) the shared view ``key`` (titled ``name``) of the experiment's runs table: ``params`` and
    ``metrics`` (default: :func:`headline_metric_keys`) as columns; return its key.

    Idempotent: an unchanged view keeps its tag (and its ``createdAt``).
    """
    state = json.dumps(view_state(metrics if metrics is not None else headline_metric_keys(client, experiment_id),
                                  params), sort_keys=True)
    tag = SHARED_VIEW_PREFIX + key
    old = (client.get_experiment(experiment_id).tags or {}).get(tag)
    created = int(time.time() * 1000)
    if old:
        try:
            envelope = json.loads(old)
            if envelope.get("state") == state and envelope.get("name") == name:
                return key
            created = int(envelope.get("createdAt", created))
        except (ValueError, AttributeError, TypeError):
            pass
    envelope = {"name": name, "createdAt": created, "updatedAt": int(time.time() * 1000), "state": state}
    client.set_experiment_tag(experiment_id, tag, json.dumps(envelope))
    return key


def ensure_comparison_view(client: Any, experiment_id: str) -> str:
    """Write (or keep) the comparisons experiment's shared view (:func:`comparison_columns`); return its key."""
    params, metrics = comparison_columns(client, experiment_id)
    return ensure_runs_view(client, experiment_id, metrics, key=COMPARISON_VIEW_KEY, name=COMPARISON_VIEW_NAME,
                            params=params)


def runs_table_url(ui_url: str, experiment_id: str, view_key: str | None = None) -> str:
    """The experiment's runs table in the classic (machine-learning) workflow, with view ``view_key``."""
    url = f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType={WORKFLOW}"
    return url + (f"&viewStateShareKey={view_key}" if view_key else "")


def prepare(ui_url: str, experiment: str = "toolret", comparison_experiment: str | None = None,
            tracking_uri: str | None = None, project_dir: Any = None) -> dict[str, str]:
    """Create the experiments when missing, write their views, return ``{"runs": url, "comparisons": url}``."""

    client = get_client(tracking_uri, project_dir)
    exp_id = get_or_create_experiment(client, experiment)
    key = ensure_runs_view(client, exp_id)
    cmp_id = get_or_create_experiment(client, comparison_experiment or COMPARISON_EXPERIMENT)
    cmp_key = ensure_comparison_view(client, cmp_id)
    return {"runs": runs_table_url(ui_url, exp_id, key), "comparisons": runs_table_url(ui_url, cmp_id, cmp_key)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the MLflow UI URLs of the toolret runs tables.")
    parser.add_argument("--ui-url", default="http://127.0.0.1:5000")
    parser.add_argument("--experiment", default="toolret")
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args(argv)
    urls = prepare(args.ui_url, args.experiment, tracking_uri=args.tracking_uri)
    print(f"MLflow UI, evaluation runs (headline metrics, current runs): {urls['runs']}")
    print(f"MLflow UI, comparison runs (one per dataset, current runs): {urls['comparisons']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["COMPARISON_VIEW_KEY", "SHARED_VIEW_PREFIX", "VIEW_KEY", "comparison_columns", "ensure_comparison_view",
           "ensure_runs_view", "headline_metric_keys", "main", "prepare", "runs_table_url", "view_state"]
