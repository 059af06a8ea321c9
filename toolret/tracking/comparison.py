"""Per-dataset comparison report: every system (method x docs) against the strongest baseline.

The statistics are :func:`toolret.evaluate_api.compare`'s (this module loads the result files, orders
the systems, renders and logs): for each metric the reference is the baseline system (by default
``bm25`` / ``dense`` on any document variant) with the highest mean; every other system is compared with
it by a paired test over the queries both evaluated (paired by ``query_id``). The tests of one metric are
one family: their p-values are Holm-adjusted (:func:`toolret.evaluate_api.holm_adjust`) and a system is
marked significantly better/worse when its adjusted p-value is below :data:`ALPHA`; raw and adjusted
p-values are both reported. Metrics are ordered by family, then by cutoff (``recall@1, @3, @5, @10``;
:func:`order_metrics`).

Systems with identical per-query results (the same queries, the same value of every per-query metric
and the same ranking, e.g. ``dense[baseline]`` = ``dense`` in an ablation grid) are one system: the first
in report order stands for the others (:attr:`System.same_as`), so each distinct comparison is tested
once and Holm counts distinct comparisons only (:func:`toolret.evaluate_api.collapse_identical`).

The report is a table (markdown, CSV, a self-contained UTF-8 HTML page, each with a legend of the
marks) of means with 95% bootstrap CIs and significance marks, a chart (one panel per headline
metric), and the tests as JSON. The MLflow run (:func:`log_comparison_report`) lives in its own
experiment (:data:`COMPARISON_EXPERIMENT`), carries the headline table as its description and at most
:data:`MAX_RUN_METRICS` metrics.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toolret.evaluate_api import EvalResult, collapse_identical, compare
from toolret.metrics.names import metric_name_for_mlflow
from toolret.provenance import git_state, sha256_file
from toolret.tracking.runs import LOG_FORMAT, load_per_query, load_result, per_query_path_for
from toolret.tracking.store import (INPUTS_TAG, digest, find_run, get_client, get_or_create_experiment, logged_metric,
                                    make_current, safe_key)

DEFAULT_BASELINES = ("bm25", "dense")
COMPARISON_EXPERIMENT = "toolret-comparisons"  # comparison runs: one row per dataset, apart from the evaluations
MAX_RUN_METRICS = 60  # metrics of one comparison run (every number is in its report artifacts)
DESCRIPTION_LIMIT = 8000  # MLflow's limit on a tag value; the run description is the tag mlflow.note.content
COMPARISON_FORMAT = "3"  # bump when what a comparison run holds changes (3: best/reference metrics, rounded)
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


@dataclass
class System:
    """One evaluated system: a method on a document variant."""

    method: str
    docs: str
    result: dict[str, Any]
    per_query: dict[str, dict[str, Any]] = field(default_factory=dict)
    same_as: list[str] = field(default_factory=list)  # labels of systems with identical per-query results

    @property
    def label(self) -> str:
        return f"{self.method}/{self.docs}"

    def eval_result(self) -> EvalResult:
        """The system as the evaluation API sees it: its per-query records, means and CIs."""
        return EvalResult.from_rows([{**row, "query_id": qid} for qid, row in self.per_query.items()],
                                    means=self.result["metrics"], ci=self.result.get("ci95") or {})


@dataclass
class Comparison:
    """What :func:`compare_results` found (also what the report renders)."""

    dataset: str
    systems: list[System]  # distinct systems (identical ones collapsed, see System.same_as)
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
                                   "n_queries": s.result.get("n_queries"), "same_as": " ".join(s.same_as)}
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
            "Systems with identical per-query results are one row (tested once, counted once by Holm); "
            "the others it stands for are listed under the table.",
        ]

    def identical(self) -> list[str]:
        """``"a/x = b/x = c/x"`` per system that stands for others."""
        return [" = ".join([s.label, *s.same_as]) for s in self.systems if s.same_as]

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

    def markdown_table(self, metrics: Sequence[str] | None = None, ci: bool = True,
                       max_rows: int | None = None) -> list[str]:
        """The table as markdown lines (``metrics`` columns; cells without CIs when not ``ci``; the first
        ``max_rows`` systems, then a line saying how many are left out)."""
        table = self.table()
        cols = list(metrics) if metrics is not None else list(table.columns)
        lines = ["| " + " | ".join(["system", *cols]) + " |", "|" + "---|" * (len(cols) + 1)]
        rows = list(table.iterrows())
        for label, row in rows[:max_rows]:
            cells = [_escape_brackets(str(row[c]) if ci else _without_ci(str(row[c]))) for c in cols]
            lines.append("| " + " | ".join([str(label), *cells]) + " |")
        if max_rows is not None and len(rows) > max_rows:
            lines.append(f"| … {len(rows) - max_rows} more systems in report/comparison.md |" + " |" * len(cols))
        return lines

    def description(self, metrics: Sequence[str] | None = None, limit: int = DESCRIPTION_LIMIT) -> str:
        """The run description (markdown, at most ``limit`` characters): the headline table with its
        marks, the identical systems, the legend; CIs or rows are dropped when it would not fit."""
        metrics = list(metrics or headline_metrics(self.metrics))
        tail = [""]
        if self.identical():
            tail += ["Identical per-query results (one row each):", *[f"- {line}" for line in self.identical()], ""]
        tail += [*[f"- {line}" for line in self.legend()], "",
                 "Every metric, the tests with raw and Holm-adjusted p-values: `report/comparison.md`."]
        head = [f"**{self.dataset}**: {len(self.systems)} distinct systems, mean [95% bootstrap CI]", ""]
        text = ""
        for ci, max_rows in [(True, None), (False, None), *((False, n) for n in range(len(self.systems), 0, -1))]:
            text = "\n".join([*head, *self.markdown_table(metrics, ci=ci, max_rows=max_rows), *tail])
            if len(text) <= limit:
                return text
        return text[:limit]

    def markdown(self) -> str:
        lines = [f"# {self.dataset}: methods x metrics (mean [95% bootstrap CI])", "", *self.markdown_table()]
        if self.identical():
            lines += ["", "Identical per-query results (one row each, tested once):",
                      *[f"- {line}" for line in self.identical()]]
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


def _escape_brackets(cell: str) -> str:
    """``[lo, hi] (ref)`` with its brackets escaped: lenient markdown renderers (MLflow's run description) read
    ``[text] (x)`` as a link and drop the ``(ref)`` marker; every renderer shows ``\\[`` as ``[``."""
    return cell.replace("[", "\\[").replace("]", "\\]")


def _without_ci(cell: str) -> str:
    """``"0.315 [0.290, 0.341] ▲"`` -> ``"0.315 ▲"``."""
    head, _, rest = cell.partition(" [")
    return head + (rest.partition("]")[2] if rest else "")


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
    systems = [_load_system(Path(p)) for p in result_paths]
    # baselines first, then plain names before grid rows (`dense` stands for `dense[baseline]`)
    systems.sort(key=lambda s: (s.method not in baselines, "[" in s.method, s.method, s.docs))
    keys = _unique_keys(systems)
    by_key = dict(zip(keys, systems))
    results = {k: s.eval_result() for k, s in by_key.items()}
    if metrics is None:  # what every distinct system reports (an identical one reports the same)
        distinct = [by_key[k] for k in collapse_identical(results)]
        common = set.intersection(*(set(k for k, v in s.result["metrics"].items() if isinstance(v, (int, float)))
                                    for s in distinct)) if distinct else set()
        metrics = list(common)
    metrics = order_metrics(metrics)
    found = compare(results, baseline=[k for k, s in by_key.items() if s.method in baselines] or None,
                    metric=metrics, test=test, n_samples=n_samples, seed=seed, alpha=ALPHA)
    for key, others in found.identical.items():
        by_key[key].same_as = [by_key[o].label for o in others]
    label = {k: s.label for k, s in by_key.items()}
    tests = [{**asdict(t), "system": label[t.system], "reference": label[t.reference]} for t in found.tests]
    return Comparison(dataset, [by_key[k] for k in found.systems], list(metrics),
                      {m: label[k] for m, k in found.reference.items()}, tests)


def _unique_keys(systems: Sequence[System]) -> list[str]:
    """The systems' labels, made unique (``label#2`` ...) where two results share a method and docs."""
    keys: list[str] = []
    for s in systems:
        key, n = s.label, 1
        while key in keys:
            n += 1
            key = f"{s.label}#{n}"
        keys.append(key)
    return keys


def headline_metrics(metrics: Sequence[str], k: int = 5) -> list[str]:
    """The metrics at cutoff ``k`` plus ``mrr`` (all metrics when none is at ``k``)."""
    picked = [m for m in metrics if m.endswith(f"@{k}") or m == "mrr"]
    return picked or list(metrics)


STATUS_COLORS = {"reference": "#4d4d4d", "better": "#1a9850", "worse": "#d73027", "n.s.": "#7fa7d1"}


def _status(comparison: Comparison, system: System, metric: str) -> str:
    if comparison.reference.get(metric) == system.label:
        return "reference"
    test = next((t for t in comparison.tests if t["system"] == system.label and t["metric"] == metric), None)
    if test and test["significant"]:
        return "better" if test["mean_diff"] > 0 else "worse"
    return "n.s."


def comparison_figure(comparison: Comparison, metrics: Sequence[str] | None = None) -> Any:
    """One panel per metric: a horizontal bar per system (every system named on the shared y axis), 95% CI
    whiskers, the colour saying reference / significantly better / worse / not significant; the legend
    below the panels, outside every axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    metrics = list(metrics or headline_metrics(comparison.metrics))
    systems = comparison.systems
    n = max(len(systems), 1)
    longest = max((len(s.label) for s in systems), default=10)
    fig, axes = plt.subplots(1, len(metrics), sharey=True, squeeze=False,
                             figsize=(0.08 * longest + 2.6 * len(metrics), 1.6 + 0.32 * n))
    axes = axes[0]
    y = np.arange(n)
    for ax, m in zip(axes, metrics):
        values = np.array([float(s.result["metrics"].get(m) or 0.0) for s in systems])
        ci = [(s.result.get("ci95") or {}).get(m) or [v, v] for s, v in zip(systems, values)]
        err = np.clip(np.array([[v - c[0] for v, c in zip(values, ci)], [c[1] - v for v, c in zip(values, ci)]]),
                      0, None)
        colors = [STATUS_COLORS[_status(comparison, s, m)] for s in systems]
        ax.barh(y, values, xerr=err, color=colors, capsize=2, height=0.7)
        ax.set_title(m)
        ax.set_xlim(0, 1.0)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels([s.label for s in systems])
    axes[0].invert_yaxis()  # report order, top to bottom
    fig.suptitle(f"{comparison.dataset}: mean and 95% bootstrap CI (tests: paired, Holm-adjusted, vs the reference)")
    names = {"reference": "reference (strongest baseline)", "better": "significantly better",
             "worse": "significantly worse", "n.s.": "not significantly different"}
    handles = [Patch(color=c, label=names[k]) for k, c in STATUS_COLORS.items()]
    fig.tight_layout(rect=(0, 0.7 / (1.6 + 0.32 * n), 1, 0.97))
    fig.legend(handles=handles, loc="lower center", ncols=len(handles), frameon=False, bbox_to_anchor=(0.5, 0.0))
    return fig


def plot_comparison(comparison: Comparison, path: str | Path, metrics: Sequence[str] | None = None) -> Path:
    """:func:`comparison_figure` saved as a PNG."""
    import matplotlib.pyplot as plt

    fig = comparison_figure(comparison, metrics)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def _mean(system: System, metric: str) -> float | None:
    value = system.result["metrics"].get(metric)
    return float(value) if isinstance(value, (int, float)) else None


def best_and_reference(comparison: Comparison, metric: str) -> tuple[System | None, System | None]:
    """The system with the highest mean of ``metric`` (the first in report order on a tie) and the reference."""
    scored = [s for s in comparison.systems if _mean(s, metric) is not None]
    best = max(scored, key=lambda s: _mean(s, metric) or 0.0) if scored else None
    ref = next((s for s in scored if s.label == comparison.reference.get(metric)), None)
    return best, ref


def run_metrics(comparison: Comparison, limit: int = MAX_RUN_METRICS) -> dict[str, float]:
    """The few numbers a comparison run logs as MLflow metrics (at most ``limit``), rounded for the runs
    table (:func:`toolret.tracking.store.logged_metric`; the report artifacts hold them in full).

    ``n_results`` / ``n_systems`` (distinct) / ``n_tests``; per headline metric the reference's mean
    ``reference/<m>``, the best system's ``best/<m>``, ``n_better/<m>`` and ``n_worse/<m>`` (significant
    after Holm); then each system's value ``<method>.<docs>/<m>``, headline metric by headline metric, as
    long as a metric's whole set of systems fits. Every other number (other metrics, CIs, p-values) is in
    the report artifacts.
    """

    headline = headline_metrics(comparison.metrics)
    out: dict[str, float] = {
        "n_results": float(sum(1 + len(s.same_as) for s in comparison.systems)),
        "n_systems": float(len(comparison.systems)),
        "n_tests": float(len(comparison.tests)),
    }
    for m in headline:
        key = metric_name_for_mlflow(m)
        best, ref = best_and_reference(comparison, m)
        if ref is not None:
            out[f"reference/{key}"] = _mean(ref, m) or 0.0
        if best is not None:
            out[f"best/{key}"] = _mean(best, m) or 0.0
        family = [t for t in comparison.tests if t["metric"] == m]
        out[f"n_better/{key}"] = float(sum(t["significant"] and t["mean_diff"] > 0 for t in family))
        out[f"n_worse/{key}"] = float(sum(t["significant"] and t["mean_diff"] < 0 for t in family))
    for m in headline:
        values = {safe_key(f"{s.method}.{s.docs}/{metric_name_for_mlflow(m)}"): float(s.result["metrics"][m])
                  for s in comparison.systems if isinstance(s.result["metrics"].get(m), (int, float))}
        if len(out) + len(values) > limit:
            break
        out.update(values)
    return {k: logged_metric(v) for k, v in list(out.items())[:limit]}


def run_params(comparison: Comparison) -> dict[str, str]:
    """The systems behind ``reference/<m>`` and ``best/<m>`` (params of the same names)."""

    out = {}
    for m in headline_metrics(comparison.metrics):
        best, ref = best_and_reference(comparison, m)
        key = metric_name_for_mlflow(m)
        if ref is not None:
            out[f"reference/{key}"] = ref.label
        if best is not None:
            out[f"best/{key}"] = best.label
    return out


def log_comparison_report(
    dataset: str,
    result_paths: Sequence[str | Path],
    tags: dict[str, str] | None = None,
    experiment: str = COMPARISON_EXPERIMENT,
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

    The run (named ``<dataset>/comparison``, in experiment ``experiment``, by default
    :data:`COMPARISON_EXPERIMENT`) has the headline table as its description
    (:meth:`Comparison.description`), at most :data:`MAX_RUN_METRICS` metrics (:func:`run_metrics`, rounded
    to three decimals) with the systems behind ``reference/<m>`` and ``best/<m>`` as params,
    the table as ``report/comparison.{md,csv,html}`` (UTF-8 without a byte order mark, legend
    included), the numbers as ``report/comparison_numeric.csv``, the tests with raw and Holm-adjusted
    p-values as ``report/significance.{json,csv}`` and the chart as ``plots/comparison.png``.
    """
    from mlflow.entities import Metric, Param, RunTag

    paths = sorted(Path(p) for p in result_paths)
    client = get_client(tracking_uri, project_dir)
    exp_id = get_or_create_experiment(client, experiment)
    identity = {"toolret.kind": "comparison", "toolret.dataset": dataset}
    inputs = digest({"format": LOG_FORMAT, "comparison_format": COMPARISON_FORMAT, "baselines": list(baselines),
                     "metrics": list(metrics or []), "test": test, "n_samples": n_samples, "alpha": ALPHA,
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
            md = Path(client.download_artifacts(run_id, "report/comparison.md", tmp)).read_text(encoding="utf-8")
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
            Param("alpha", str(ALPHA)), Param("multiple_comparisons", "holm (per metric, distinct systems)"),
            *(Param(k, v) for k, v in run_params(comparison).items())])
        now = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in run_metrics(comparison).items()],
                         tags=[RunTag("mlflow.note.content", comparison.description())])
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp)
            (tmp_path / "comparison.md").write_text(markdown, encoding="utf-8")
            (tmp_path / "comparison.html").write_text(comparison.html(), encoding="utf-8")
            comparison.table().to_csv(tmp_path / "comparison.csv", encoding="utf-8")
            comparison.numeric_table().to_csv(tmp_path / "comparison_numeric.csv", index=False)
            comparison.tests_table().to_csv(tmp_path / "significance.csv", index=False)
            (tmp_path / "significance.json").write_text(
                json.dumps({"reference": comparison.reference, "alpha": ALPHA,
                            "multiple_comparisons": "holm, one family per metric (distinct systems only)",
                            "identical": {s.label: s.same_as for s in comparison.systems if s.same_as},
                            "legend": comparison.legend(),
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


__all__ = ["ALPHA", "COMPARISON_EXPERIMENT", "MAX_RUN_METRICS", "Comparison", "System", "compare_results",
           "best_and_reference", "comparison_figure", "headline_metrics", "log_comparison_report", "order_metrics",
           "plot_comparison", "run_metrics", "run_params"]
