"""The one toolkit a method's grid report is written with (``toolret report-ablations --method <m>``).

A method's report reads the ``summary.json`` that ``toolret evaluate-grid`` wrote for its grid (one row per
variant: metrics, 95% CIs, the paired test against the row's baseline) and, where it needs them, the rows'
per-query tables; it formats cells and p-values the same way, puts the paper's numbers beside ours and
writes the file through :func:`toolret.report_file.write_report_file` (tables, a JSON block of every number
shown, the hand-written tail kept). The paper's numbers live in the method's reproduction matrix file,
``results/matrix/<method>.yaml: papers: <column>: {"<row>.<metric>": value, ...}`` (read by reports only,
so no DVC stage depends on them); which column a dataset is compared with is the method's own setting
(e.g. ``reinvoke.paper_columns``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolret.errors import ConfigError
from toolret.jsonl_artifacts import read_jsonl
from toolret.metrics import paired_test
from toolret.paths import project_dir
from toolret.report_file import write_report_file

SUMMARY = "summary.json"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table's lines: the header, its separator and one line per row (cells as ``str``)."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)]


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file's object, ``None`` when the file is absent."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_variants(run_dir: Path) -> dict[str, dict[str, Any]] | None:
    """The grid rows (``variants``) of ``<run_dir>/summary.json``, ``None`` when the grid has not run."""
    summary = read_json(run_dir / SUMMARY)
    return None if summary is None else summary["variants"]


def per_query(run_dir: Path, row: str) -> dict[str, dict[str, Any]]:
    """``query id -> per-query record`` of a grid row (``<row>.per_query.jsonl``; ``{}`` when absent)."""
    path = run_dir / f"{row}.per_query.jsonl"
    if not path.is_file():
        return {}

    return {r["query_id"]: r for r in read_jsonl(path) if r}


def ci_cell(metrics: Mapping[str, Any], ci: Mapping[str, Any], metric: str) -> str:
    """``0.512 [0.480, 0.545]`` (mean and 95% CI), ``-`` when the row has no such metric."""
    value = metrics.get(metric)
    if value is None:
        return "-"
    lo, hi = ci.get(metric, [float("nan")] * 2)
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"


def p_value(row: Mapping[str, Any], metric: str) -> float | None:
    """The p-value of a grid row's paired test against its baseline on ``metric`` (``None``: not tested)."""
    return (row.get("vs_baseline") or {}).get(metric, {}).get("p_value")


def format_p(p: float | None) -> str:
    """``<0.001``, ``0.012``, or ``-`` for no test."""
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def paired(a: Mapping[str, Mapping[str, float]], b: Mapping[str, Mapping[str, float]],
           metric: str) -> dict[str, float] | None:
    """Paired randomization test of two rows' per-query values (queries both have), ``None`` if none."""
    import numpy as np

    qids = [q for q in a if q in b]
    if not qids:
        return None
    return paired_test(np.array([a[q][metric] for q in qids]), np.array([b[q][metric] for q in qids]),
                       method="randomization", seed=13)


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float | None, float | None]:
    """Mean and t-interval over runs, e.g. folds (``None`` bounds for fewer than 2)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None, None
    from scipy import stats

    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


PAPERS_KEY = "papers"


def paper_numbers(method: str, root: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """``column -> {"<row>.<metric>": value, ...}``: the paper's numbers of ``method``, the ``papers`` table of
    ``<root>/results/matrix/<method>.yaml`` (``root``: the project folder); none (``{}``) without the file or
    table. A table that is not column -> mapping is an error naming the file and column."""
    import yaml

    path = Path(root if root is not None else project_dir()) / "results" / "matrix" / f"{method}.yaml"
    if not path.is_file():
        return {}
    table = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get(PAPERS_KEY) or {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `{PAPERS_KEY}` must map paper columns to {{\"<row>.<metric>\": value}}")
    for col, numbers in table.items():
        if not isinstance(numbers, dict):
            raise ConfigError(f"{path}: {PAPERS_KEY}.{col} must map \"<row>.<metric>\" to a value")
    return {str(col): dict(v) for col, v in table.items()}


__all__ = ["PAPERS_KEY", "SUMMARY", "ci_cell", "format_p", "mean_ci", "paired", "paper_numbers", "p_value",
           "per_query", "read_json", "read_variants", "write_report_file"]
