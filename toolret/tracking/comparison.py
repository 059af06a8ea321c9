"""Per-dataset comparison report: every system (method x docs) against the strongest baseline.

For each metric the reference is the baseline system (by default ``bm25`` / ``dense`` on any document
variant) with the highest mean; every other system is compared with it by a paired test over the
queries both evaluated (paired by ``query_id``). The tests of one metric are one family: their
p-values are Holm-adjusted (:func:`holm_adjust`) and a system is marked significantly better/worse
when its adjusted p-value is below :data:`ALPHA`; raw and adjusted p-values are both reported.
Metrics are ordered by family, then by cutoff (``recall@1, @3, @5, @10``; :func:`order_metrics`).

The report is a table (markdown, CSV, a self-contained UTF-8 HTML page, each with a legend of the
marks) of means with 95% bootstrap CIs and significance marks, a bar chart, and the tests as JSON.
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

from toolret.tracking.evaluation import LOG_FORMAT, load_per_query, load_result, per_query_path_for
from toolret.tracking.provenance import git_state, sha256_file
from toolret.tracking.store import (INPUTS_TAG, digest, find_run, get_client, get_or_create_experiment, make_current,
                                    safe_key)

DEFAULT_BASELINES = ("bm25", "dense")
ALPHA = 0.05
FAMILY_ORDER = ("recall", "ndcg", "comp", "precision", "mrr")  # metric families first, in this order
UP, DOWN, REF = "▲", "▼", "(ref)"


def order_metrics(metrics: Sequence[str]) -> list[str]:
    """Metrics by family (:data:`FAMILY_ORDER` first, then alphabetical), then by numeric cutoff.

    Example:
        >>> order_metrics(["recall@10", "mrr", "recall@3", "ndcg@5", "recall@1"])
        ['recall@1', 'recall@3', 'recall@10', 'ndcg@5', 'mrr']
    """
    def key(name: str) -> tuple[int, str, int, str]:
        family, _, k = name.partition("@")
        rank = FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER)
        return (rank, family, int(k) if k.isdigit() else -1, name)

    return sorted(dict.fromkeys(metrics), key=key)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down; Holm 1979), in the input order.

    With the m p-values sorted ascending, ``p_adj(i) = max_{j <= i} min(1, (m - j + 1) * p(j))``
    (1-based ranks). Rejecting ``p_adj < alpha`` controls the family-wise error rate at ``alpha``.
    """
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="mergesort")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted.tolist()


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
    # {"metric", "system", "reference", "test", "p_value", "p_holm", "mean_diff", "n", "significant"}
    tests: list[dict[str, Any]]

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
                    cell += f" {REF}"
                elif t and t["significant"]:
                    cell += f" {UP}" if t["mean_diff"] > 0 else f" {DOWN}"
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

    def legend(self) -> list[str]:
        """What the marks and numbers of the table mean (one sentence each)."""
        test = self.tests[0]["test"] if self.tests else "randomization"
        return [
            "Cells: mean over the test queries [95% bootstrap confidence interval].",
            f"{REF}: the strongest baseline for that metric, the reference every other system is tested against.",
            f"{UP} / {DOWN}: significantly better / worse than the reference: paired {test} test over the "
            f"queries both systems answered (paired by query id), Holm-adjusted p < {ALPHA} "
            "(the tests of one metric form one family).",
            "No mark: not significantly different from the reference after the Holm correction.",
        ]

    def tests_table(self) -> Any:
        """One row per test: metric, system, reference, mean difference, raw and Holm-adjusted p-value."""
        import pandas as pd

        rank = {m: i for i, m in enumerate(self.metrics)}
        rows = sorted(self.tests, key=lambda t: (rank.get(t["metric"], len(rank)), t["system"]))
        return pd.DataFrame([{"metric": t["metric"], "system": t["system"], "reference": t["reference"],
                              "mean_diff": t["mean_diff"], "n": t["n"], "p_value": t["p_value"],
                              "p_holm": t["p_holm"], "significant": t["significant"]} for t in rows],
                            columns=["metric", "system", "reference", "mean_diff", "n", "p_value", "p_holm",
                                     "significant"])

    def markdown(self) -> str:
        table = self.table()
        cols = ["system", *table.columns]
        lines = [f"# {self.dataset}: methods x metrics (mean [95% bootstrap CI])", "",
                 "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for label, row in table.iterrows():
            lines.append("| " + " | ".join([str(label), *[str(row[c]) for c in table.columns]]) + " |")
        lines += ["", "Legend:", *[f"- {line}" for line in self.legend()], ""]
        if self.tests:
            lines += ["## Paired tests vs the reference (raw and Holm-adjusted p-values)", "",
                      "| metric | system | reference | mean diff | n | p | p (Holm) |", "|---|---|---|---|---|---|---|"]
            for _, t in self.tests_table().iterrows():
                mark = (f" {UP}" if t["mean_diff"] > 0 else f" {DOWN}") if t["significant"] else ""
                lines.append(f"| {t['metric']} | {t['system']} | {t['reference']} | {t['mean_diff']:+.4f} | "
                             f"{t['n']} | {t['p_value']:.4g} | {t['p_holm']:.4g}{mark} |")
            lines.append("")
        return "\n".join(lines)

    def html(self) -> str:
        """A self-contained HTML page (``<meta charset="utf-8">``): the table, its legend, the tests."""
        import html as _html

        table = self.table().to_html(border=0, classes="table")
        tests = self.tests_table().to_html(index=False, border=0, classes="table",
                                           float_format=lambda v: f"{v:.4g}") if self.tests else ""
        legend = "".join(f"<li>{_html.escape(line)}</li>" for line in self.legend())
        title = _html.escape(f"{self.dataset}: methods x metrics (mean [95% bootstrap CI])")
        return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                f"<title>{title}</title>\n<style>body{{font-family:sans-serif}} table{{border-collapse:collapse}} "
                "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}</style>\n</head>\n<body>\n"
                f"<h1>{title}</h1>\n{table}\n<h2>Legend</h2>\n<ul>{legend}</ul>\n"
                + (f"<h2>Paired tests vs the reference (raw and Holm-adjusted p-values)</h2>\n{tests}\n"
                   if tests else "")
                + "</body>\n</html>\n")


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
        metrics: metrics to report (default: every metric the results share); ordered by
            :func:`order_metrics` either way.
        test: :func:`toolret.metrics.paired_test` method.
    """
    from toolret.metrics import paired_test

    systems = [_load_system(Path(p)) for p in result_paths]
    systems.sort(key=lambda s: (s.method not in baselines, s.method, s.docs))
    if metrics is None:
        common = set.intersection(*(set(k for k, v in s.result["metrics"].items() if isinstance(v, (int, float)))
                                    for s in systems)) if systems else set()
        metrics = list(common)
    metrics = order_metrics(metrics)
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
                          "p_value": float(res["p_value"]), "mean_diff": res["mean_diff"], "n": res["n"]})
    for m in metrics:  # one family per metric
        family = [t for t in tests if t["metric"] == m]
        for t, adjusted in zip(family, holm_adjust([t["p_value"] for t in family])):
            t["p_holm"] = float(adjusted)
            t["significant"] = bool(adjusted < ALPHA)
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
    """Log (or reuse) the comparison run of one dataset.

    Returns ``{"run_id", "experiment_id", "created", "markdown", "tests", "reference"}``.

    Idempotent like :func:`toolret.tracking.log_evaluation_run`: the identity is the dataset (tags
    ``toolret.kind=comparison``, ``toolret.dataset``), the inputs the sha256 of every result JSON and
    per-query file plus the settings; the same inputs reuse the run (``tags`` updated), other inputs
    log a new run and mark the previous one superseded.

    The run (named ``<dataset>/comparison``) holds a metric per system and metric
    (``bm25.original/recall_at_5``) with the raw and Holm-adjusted p-values (``..._p_value``,
    ``..._p_holm``), the table as ``report/comparison.{md,csv,html}`` (UTF-8, legend included), the
    numbers as ``report/comparison_numeric.csv``, the tests as ``report/significance.{json,csv}`` and
    the bar chart as ``plots/comparison.png``.
    """
    from mlflow.entities import Metric, Param

    from toolret.metrics.names import metric_name_for_mlflow

    paths = sorted(Path(p) for p in result_paths)
    client = get_client(tracking_uri, project_dir)
    exp_id = get_or_create_experiment(client, experiment)
    identity = {"toolret.kind": "comparison", "toolret.dataset": dataset}
    inputs = digest({"format": LOG_FORMAT, "baselines": list(baselines), "metrics": list(metrics or []),
                     "test": test, "n_samples": n_samples, "alpha": ALPHA,
                     "results": sorted((sha256_file(p), sha256_file(per_query_path_for(p))
                                        if per_query_path_for(p).is_file() else "") for p in paths)})
    extra_tags = {safe_key(k): str(v) for k, v in (tags or {}).items()}
    existing = find_run(client, exp_id, identity, inputs)
    if existing is not None:  # the same inputs: reuse the run and what it logged (no tests rerun)
        run_id = existing.info.run_id
        for k, v in extra_tags.items():
            if existing.data.tags.get(k) != v:
                client.set_tag(run_id, k, v)
        make_current(client, exp_id, identity, run_id)
        with tempfile.TemporaryDirectory() as tmp:
            md = Path(client.download_artifacts(run_id, "report/comparison.md", tmp)).read_text(encoding="utf-8-sig")
            sig = json.loads(Path(client.download_artifacts(run_id, "report/significance.json", tmp))
                             .read_text(encoding="utf-8"))
        return {"run_id": run_id, "experiment_id": exp_id, "created": False, "markdown": md,
                "tests": sig["tests"], "reference": sig["reference"]}

    comparison = compare_results(dataset, paths, baselines=baselines, metrics=metrics, test=test,
                                 n_samples=n_samples)
    markdown = comparison.markdown()
    run_tags = {**identity, INPUTS_TAG: inputs}
    if project_dir:
        run_tags["git_sha"] = git_state(project_dir).label
    run_tags.update(extra_tags)
    run = client.create_run(exp_id, run_name=f"{dataset}/comparison", tags=run_tags)
    run_id = run.info.run_id
    try:
        client.log_batch(run_id, params=[
            Param("dataset", dataset), Param("systems", json.dumps([s.label for s in comparison.systems])[:6000]),
            Param("baselines", json.dumps(list(baselines))), Param("test", test), Param("n_samples", str(n_samples)),
            Param("alpha", str(ALPHA)), Param("multiple_comparisons", "holm (per metric)")])
        now = int(time.time() * 1000)
        metrics_out = []
        for s in comparison.systems:
            for m in comparison.metrics:
                value = s.result["metrics"].get(m)
                if isinstance(value, (int, float)):
                    metrics_out.append(Metric(safe_key(f"{s.method}.{s.docs}/{metric_name_for_mlflow(m)}"),
                                              float(value), now, 0))
        for t in comparison.tests:
            key = safe_key(f"{t['system'].replace('/', '.')}/{metric_name_for_mlflow(t['metric'])}")
            metrics_out.append(Metric(f"{key}_p_value", float(t["p_value"]), now, 0))
            metrics_out.append(Metric(f"{key}_p_holm", float(t["p_holm"]), now, 0))
        for i in range(0, len(metrics_out), 1000):
            client.log_batch(run_id, metrics=metrics_out[i:i + 1000])
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp)
            # the BOM declares UTF-8 to browsers/editors/Excel opening the downloaded file
            (tmp_path / "comparison.md").write_text(markdown, encoding="utf-8-sig")
            (tmp_path / "comparison.html").write_text(comparison.html(), encoding="utf-8")
            comparison.table().to_csv(tmp_path / "comparison.csv", encoding="utf-8-sig")
            comparison.numeric_table().to_csv(tmp_path / "comparison_numeric.csv", index=False)
            comparison.tests_table().to_csv(tmp_path / "significance.csv", index=False)
            (tmp_path / "significance.json").write_text(
                json.dumps({"reference": comparison.reference, "alpha": ALPHA,
                            "multiple_comparisons": "holm, one family per metric", "legend": comparison.legend(),
                            "tests": comparison.tests}, indent=2, ensure_ascii=False), encoding="utf-8")
            for name in ("comparison.md", "comparison.csv", "comparison.html", "comparison_numeric.csv",
                         "significance.json", "significance.csv"):
                client.log_artifact(run_id, str(tmp_path / name), artifact_path="report")
            if comparison.systems and comparison.metrics:
                plot = plot_comparison(comparison, tmp_path / "comparison.png", headline_metrics(comparison.metrics))
                client.log_artifact(run_id, str(plot), artifact_path="plots")
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    make_current(client, exp_id, identity, run_id)
    return {"run_id": run_id, "experiment_id": exp_id, "created": True, "markdown": markdown,
            "tests": comparison.tests, "reference": comparison.reference}


__all__ = ["ALPHA", "Comparison", "System", "compare_results", "headline_metrics", "holm_adjust",
           "log_comparison_report", "order_metrics", "plot_comparison"]
