"""Per-dataset comparison report: every system (method x docs) against the strongest baseline.

For each metric the reference is the baseline system (by default ``bm25`` / ``dense`` on any document
variant) with the highest mean; every other system is compared with it by a paired test over the
queries both evaluated (paired by ``query_id``). The report is a table (markdown, CSV, HTML) of
means with 95% bootstrap CIs and significance marks, a bar chart, and the test results as JSON.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toolret.tracking.evaluation import load_per_query, load_result, per_query_path_for
from toolret.tracking.provenance import git_state
from toolret.tracking.store import get_client, get_or_create_experiment, safe_key

DEFAULT_BASELINES = ("bm25", "dense")
ALPHA = 0.05


@dataclass
class System:
    """One evaluated system: a method on a document variant."""

    method: str
    docs: str
    result: dict[str, Any]
    per_query: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.method}/{self.docs}"


@dataclass
class Comparison:
    """What :func:`compare_results` found (also what the report renders)."""

    dataset: str
    systems: list[System]
    metrics: list[str]
    reference: dict[str, str]  # metric -> label of the strongest baseline
    tests: list[dict[str, Any]]  # {"metric", "system", "reference", "p_value", "mean_diff", "n", "significant"}

    def table(self) -> Any:
        """A DataFrame: rows = systems, columns = metrics, cells ``"0.315 [0.290, 0.341]*"``."""
        import pandas as pd

        marks = {(t["system"], t["metric"]): t for t in self.tests}
        rows = []
        for s in self.systems:
            row: dict[str, Any] = {"system": s.label}
            for m in self.metrics:
                value = s.result["metrics"].get(m)
                if not isinstance(value, (int, float)):
                    row[m] = ""
                    continue
                cell = f"{value:.3f}"
                ci = (s.result.get("ci95") or {}).get(m)
                if isinstance(ci, (list, tuple)) and len(ci) == 2:
                    cell += f" [{ci[0]:.3f}, {ci[1]:.3f}]"
                t = marks.get((s.label, m))
                if self.reference.get(m) == s.label:
                    cell += " (ref)"
                elif t and t["significant"]:
                    cell += " ▲" if t["mean_diff"] > 0 else " ▼"
                row[m] = cell
            rows.append(row)
        return pd.DataFrame(rows).set_index("system")

    def numeric_table(self) -> Any:
        import pandas as pd

        rows = []
        for s in self.systems:
            row: dict[str, Any] = {"system": s.label, "method": s.method, "docs": s.docs,
                                   "n_queries": s.result.get("n_queries")}
            for m in self.metrics:
                row[m] = s.result["metrics"].get(m)
                ci = (s.result.get("ci95") or {}).get(m) or [None, None]
                row[f"{m}_ci95_lo"], row[f"{m}_ci95_hi"] = ci[0], ci[1]
            rows.append(row)
        return pd.DataFrame(rows)

    def markdown(self) -> str:
        table = self.table()
        cols = ["system", *table.columns]
        lines = [f"# {self.dataset}: methods x metrics (mean [95% bootstrap CI])", "",
                 "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for label, row in table.iterrows():
            lines.append("| " + " | ".join([str(label), *[str(row[c]) for c in table.columns]]) + " |")
        lines += ["", f"(ref) = strongest baseline for that metric; ▲/▼ = significantly better/worse than it "
                      f"(paired randomization test, p < {ALPHA}, queries paired by id).", ""]
        return "\n".join(lines)


def _load_system(path: Path) -> System:
    result = load_result(path)
    pq_path = per_query_path_for(path)
    per_query = {}
    if pq_path.is_file():
        per_query = {str(r["query_id"]): r for r in load_per_query(pq_path) if "query_id" in r}
    return System(str(result.get("method", path.parent.name)), str(result.get("docs", path.stem)), result, per_query)


def compare_results(
    dataset: str,
    result_paths: Sequence[str | Path],
    baselines: Sequence[str] = DEFAULT_BASELINES,
    metrics: Sequence[str] | None = None,
    test: str = "randomization",
    n_samples: int = 10000,
    seed: int = 0,
) -> Comparison:
    """Compare every system with the strongest baseline per metric (no MLflow involved).

    Args:
        dataset: the dataset name (for titles).
        result_paths: result JSONs (their ``*.per_query.jsonl`` siblings are used for the tests).
        baselines: methods that count as baselines; when none is present, the best system is the
            reference.
        metrics: metrics to report (default: every metric the results share, sorted).
        test: :func:`toolret.metrics.paired_test` method.
    """
    from toolret.metrics import paired_test

    systems = [_load_system(Path(p)) for p in result_paths]
    systems.sort(key=lambda s: (s.method not in baselines, s.method, s.docs))
    if metrics is None:
        common = set.intersection(*(set(k for k, v in s.result["metrics"].items() if isinstance(v, (int, float)))
                                    for s in systems)) if systems else set()
        metrics = sorted(common)
    reference: dict[str, str] = {}
    tests: list[dict[str, Any]] = []
    for m in metrics:
        pool = [s for s in systems if s.method in baselines] or systems
        scored = [s for s in pool if isinstance(s.result["metrics"].get(m), (int, float))]
        if not scored:
            continue
        ref = max(scored, key=lambda s: s.result["metrics"][m])
        reference[m] = ref.label
        for s in systems:
            if s is ref:
                continue
            qids = sorted(q for q in set(s.per_query) & set(ref.per_query)
                          if isinstance(s.per_query[q].get(m), (int, float))
                          and isinstance(ref.per_query[q].get(m), (int, float)))
            if not qids:
                continue
            a = np.array([s.per_query[q][m] for q in qids], dtype=float)
            b = np.array([ref.per_query[q][m] for q in qids], dtype=float)
            res = paired_test(a, b, method=test, n_samples=n_samples, seed=seed)
            tests.append({"metric": m, "system": s.label, "reference": ref.label, "test": res["method"],
                          "p_value": res["p_value"], "mean_diff": res["mean_diff"], "n": res["n"],
                          "significant": bool(res["p_value"] < ALPHA)})
    return Comparison(dataset, systems, list(metrics), reference, tests)


def headline_metrics(metrics: Sequence[str], k: int = 5) -> list[str]:
    """The metrics at cutoff ``k`` plus ``mrr`` (all metrics when none is at ``k``)."""
    picked = [m for m in metrics if m.endswith(f"@{k}") or m == "mrr"]
    return picked or list(metrics)


def plot_comparison(comparison: Comparison, path: str | Path, metrics: Sequence[str] | None = None) -> Path:
    """Grouped bar chart: metrics on the x axis, one bar per system, 95% CI error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = list(metrics or comparison.metrics)
    n = max(len(comparison.systems), 1)
    width = 0.8 / n
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(metrics) * max(1, n / 3)), 4))
    x = np.arange(len(metrics))
    for i, s in enumerate(comparison.systems):
        ys = np.array([float(s.result["metrics"].get(m) or 0.0) for m in metrics])
        ci = s.result.get("ci95") or {}
        lo = np.array([ys[j] - (ci.get(m) or [ys[j], ys[j]])[0] for j, m in enumerate(metrics)])
        hi = np.array([(ci.get(m) or [ys[j], ys[j]])[1] - ys[j] for j, m in enumerate(metrics)])
        ax.bar(x + (i - (n - 1) / 2) * width, ys, width, yerr=[np.clip(lo, 0, None), np.clip(hi, 0, None)],
               capsize=2, label=s.label)
    ax.set_xticks(x)
    ax.set_xticklabels(metrics, rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score")
    ax.set_title(f"{comparison.dataset}: methods compared (95% CI)")
    ax.legend(fontsize=8, ncols=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def log_comparison_report(
    dataset: str,
    result_paths: Sequence[str | Path],
    tags: dict[str, str] | None = None,
    experiment: str = "toolret",
    tracking_uri: str | None = None,
    project_dir: str | Path | None = None,
    baselines: Sequence[str] = DEFAULT_BASELINES,
    metrics: Sequence[str] | None = None,
    test: str = "randomization",
    n_samples: int = 10000,
) -> dict[str, Any]:
    """Log a comparison run for one dataset and return ``{"run_id", "markdown", "tests", "reference"}``.

    The run (named ``<dataset>/comparison``, tag ``toolret.kind=comparison``) holds a metric per
    system and metric (``bm25.original/recall_at_5``), the table as ``report/comparison.{md,csv,html}``,
    the numbers as ``report/comparison_numeric.csv``, the tests as ``report/significance.json`` and
    the bar chart as ``plots/comparison.png``.
    """
    from mlflow.entities import Metric, Param

    from toolret.metrics.names import metric_name_for_mlflow

    comparison = compare_results(dataset, result_paths, baselines=baselines, metrics=metrics, test=test,
                                 n_samples=n_samples)
    client = get_client(tracking_uri, project_dir)
    exp_id = get_or_create_experiment(client, experiment)
    run_tags = {"toolret.kind": "comparison", "toolret.dataset": dataset}
    if project_dir:
        sha = git_state(project_dir).label
        run_tags["git_sha"] = sha
    run_tags.update({safe_key(k): str(v) for k, v in (tags or {}).items()})
    run = client.create_run(exp_id, run_name=f"{dataset}/comparison", tags=run_tags)
    run_id = run.info.run_id
    try:
        client.log_batch(run_id, params=[
            Param("dataset", dataset), Param("systems", json.dumps([s.label for s in comparison.systems])[:6000]),
            Param("baselines", json.dumps(list(baselines))), Param("test", test), Param("n_samples", str(n_samples)),
            Param("alpha", str(ALPHA))])
        now = int(time.time() * 1000)
        metrics_out = []
        for s in comparison.systems:
            for m in comparison.metrics:
                value = s.result["metrics"].get(m)
                if isinstance(value, (int, float)):
                    metrics_out.append(Metric(safe_key(f"{s.method}.{s.docs}/{metric_name_for_mlflow(m)}"),
                                              float(value), now, 0))
        for t in comparison.tests:
            metrics_out.append(Metric(safe_key(f"{t['system'].replace('/', '.')}/{metric_name_for_mlflow(t['metric'])}_p_value"),
                                      float(t["p_value"]), now, 0))
        for i in range(0, len(metrics_out), 1000):
            client.log_batch(run_id, metrics=metrics_out[i:i + 1000])
        markdown = comparison.markdown()
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp)
            (tmp_path / "comparison.md").write_text(markdown, encoding="utf-8")
            comparison.table().to_csv(tmp_path / "comparison.csv")
            comparison.table().to_html(tmp_path / "comparison.html")
            comparison.numeric_table().to_csv(tmp_path / "comparison_numeric.csv", index=False)
            (tmp_path / "significance.json").write_text(
                json.dumps({"reference": comparison.reference, "tests": comparison.tests}, indent=2), encoding="utf-8")
            for name in ("comparison.md", "comparison.csv", "comparison.html", "comparison_numeric.csv",
                         "significance.json"):
                client.log_artifact(run_id, str(tmp_path / name), artifact_path="report")
            if comparison.systems and comparison.metrics:
                plot = plot_comparison(comparison, tmp_path / "comparison.png", headline_metrics(comparison.metrics))
                client.log_artifact(run_id, str(plot), artifact_path="plots")
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return {"run_id": run_id, "markdown": markdown, "tests": comparison.tests, "reference": comparison.reference}


__all__ = ["Comparison", "System", "compare_results", "headline_metrics", "log_comparison_report", "plot_comparison"]
