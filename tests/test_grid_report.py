"""One grid-report toolkit (toolret.grid_report) for every method's report; the papers' numbers in the methods'
reproduction matrix files (results/matrix/<method>.yaml: papers)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from toolret.config import load_params, validate_params
from toolret.grid_report import (ci_cell, format_p, mean_ci, p_value, paper_numbers, per_query, read_json,
                                 read_variants)

ROOT = Path(__file__).resolve().parents[1]
REPORTS = sorted((ROOT / "toolret" / "methods").glob("*/report.py"))


def _grid(run_dir: Path, variants: dict) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps({"variants": variants}), encoding="utf-8")
    return run_dir


def _row(value: float, baseline: str | None = None, p: float | None = None) -> dict:
    metrics = {m: value for m in ("recall@3", "recall@5", "ndcg@3", "ndcg@5", "comp@3", "comp@5")}
    row = {"metrics": metrics, "ci95": {m: [value - 0.05, value + 0.05] for m in metrics}}
    if baseline:
        row["baseline"] = baseline
        row["vs_baseline"] = {m: {"p_value": p} for m in metrics}
    return row


def test_cells_and_p_values() -> None:
    row = _row(0.5, "dense", 0.0004)
    assert ci_cell(row["metrics"], row["ci95"], "ndcg@5") == "0.500 [0.450, 0.550]"
    assert ci_cell(row["metrics"], row["ci95"], "mrr") == "-"
    assert p_value(row, "comp@3") == 0.0004 and format_p(p_value(row, "comp@3")) == "<0.001"
    assert format_p(0.0123) == "0.012" and format_p(p_value(_row(0.1), "comp@3")) == "-"
    assert mean_ci([0.4]) == (0.4, None, None)


def test_reading_a_grid(tmp_path: Path) -> None:
    assert read_variants(tmp_path / "none") is None and read_json(tmp_path / "x.json") is None
    run = _grid(tmp_path / "g", {"dense": _row(0.3)})
    (run / "dense.per_query.jsonl").write_text('{"query_id": "q1", "recall@5": 1.0}\n', encoding="utf-8")
    assert set(read_variants(run)) == {"dense"}
    assert per_query(run, "dense") == {"q1": {"query_id": "q1", "recall@5": 1.0}} and per_query(run, "x") == {}


def test_paper_numbers_live_in_the_matrix_files() -> None:
    """Every paper number a report shows comes from its method's matrix file (`papers`), none from method code
    or params.yaml (which has no `paper` section any more: an unknown key there is an error)."""
    import pytest

    params = load_params(ROOT / "params.yaml")
    reinvoke = paper_numbers("reinvoke", ROOT)
    assert reinvoke["multi-tool"]["qgen_intent.ndcg@5"] == 0.7231 and reinvoke["I1"]["label"] == "ToolBench I1"
    assert paper_numbers("toolrerank", ROOT)["I1-Cat"]["hier_multi.recall@5"] == 76.6
    assert paper_numbers("qta", ROOT)["mtrb-restbench"]["dense.comp@5"] == 0.1556
    assert set(params.reinvoke.paper_columns.values()) <= set(reinvoke)
    assert set(params.toolrerank.paper_columns.values()) <= set(paper_numbers("toolrerank", ROOT))
    assert paper_numbers("nobody", ROOT) == {}
    with pytest.raises(Exception, match="paper"):
        validate_params({"paper": {"qta": {}}})


def test_a_malformed_papers_table_names_the_file_and_column(tmp_path: Path) -> None:
    import pytest

    from toolret.errors import ConfigError

    (tmp_path / "results" / "matrix").mkdir(parents=True)
    (tmp_path / "results" / "matrix" / "colt.yaml").write_text("papers:\n  toollens: 0.9\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"colt\.yaml: papers\.toollens"):
        paper_numbers("colt", tmp_path)
    for path in REPORTS:  # no hard-coded paper tables, no private copies of the toolkit
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        assert not {n for n in names if n.startswith("PAPER")}, path
        funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert not funcs & {"_read", "_cell", "_p", "_pval", "_paired", "_per_query", "mean_ci"}, path
        assert "toolret.grid_report" in path.read_text(encoding="utf-8"), path


def test_colt_report_through_the_helper(tmp_path: Path, monkeypatch) -> None:
    from toolret.methods.colt.report import write_report
    from toolret.registry import load_plugins, report_hook

    load_plugins()
    assert report_hook("colt") is write_report
    _grid(tmp_path / "runs" / "toollens" / "colt-ablations",
          {"dense_ft": _row(0.4), "colt": _row(0.5, "dense_ft", 0.0002), "tool_view": _row(0.45, "colt", 0.03)})
    (tmp_path / "results" / "matrix").mkdir(parents=True)
    (tmp_path / "results" / "matrix" / "colt.yaml").write_text(
        'papers:\n  toollens: {colt.recall@3: 0.6, colt.comp@3: 0.3}\n', encoding="utf-8")
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    params = validate_params({})
    out = write_report(tmp_path / "runs", ["toollens", "absent"], tmp_path / "colt.md", params=params)
    text = out.read_text(encoding="utf-8")
    assert "### toollens" in text and "absent" not in text.split("## All numbers")[0]
    colt = next(line for line in text.splitlines() if line.startswith("| colt |"))
    assert "0.500 [0.450, 0.550]" in colt and "+0.100" in colt and "<0.001" in colt and "0.600 / 0.300" in colt
    tool_view = next(line for line in text.splitlines() if line.startswith("| tool_view |"))
    assert "-0.050" in tool_view and "0.030" in tool_view and tool_view.endswith("- / - |")
