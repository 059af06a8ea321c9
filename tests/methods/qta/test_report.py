"""The QTA report's pooled test: one pair per (run, test query), the selection run left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolret.methods.qta.report import pooled_rows


def _grid(run_dir: Path, rows: dict[str, dict[str, float]], baselines: dict[str, str]) -> None:
    """A grid run folder as ``evaluate-grid`` writes it: summary.json + <row>.per_query.jsonl."""
    run_dir.mkdir(parents=True)
    variants = {name: {"metrics": {}, "ci95": {}, "baseline": baselines.get(name)} for name in rows}
    (run_dir / "summary.json").write_text(json.dumps({"variants": variants}))
    for name, per_q in rows.items():
        lines = [json.dumps({"query_id": q, "comp@5": v}) for q, v in per_q.items()]
        (run_dir / f"{name}.per_query.jsonl").write_text("\n".join(lines) + "\n")


def test_pooled_pairs_count_a_query_once_per_run(tmp_path):
    # the same query ids are test queries of both folds (as in k-fold QTA): pooling must keep 4 pairs, not 2
    _grid(tmp_path / "f1" / "qta", {"dense": {"q1": 0.0, "q2": 1.0}, "qta": {"q1": 1.0, "q2": 1.0}},
          {"qta": "dense"})
    _grid(tmp_path / "f2" / "qta", {"dense": {"q1": 0.0, "q2": 0.0}, "qta": {"q1": 1.0, "q2": 1.0}},
          {"qta": "dense"})
    (row,) = pooled_rows(tmp_path, ["f1", "f2"])
    assert (row["row"], row["baseline"], row["n"]) == ("qta", "dense", 4)
    assert row["mean"] == pytest.approx(1.0)
    assert row["baseline_mean"] == pytest.approx(0.25)
    # three positive differences of 1 and one 0: exact sign-flip test, 2 of 8 distinct flips as extreme
    assert row["p_value"] == pytest.approx(0.25)


def test_a_run_left_out_contributes_no_pairs(tmp_path):
    _grid(tmp_path / "f0" / "qta", {"dense": {"q1": 0.0}, "qta": {"q1": 1.0}}, {"qta": "dense"})
    _grid(tmp_path / "f1" / "qta", {"dense": {"q1": 1.0}, "qta": {"q1": 0.0}}, {"qta": "dense"})
    (row,) = pooled_rows(tmp_path, ["f1"])
    assert row["n"] == 1 and row["mean"] == 0.0 and row["baseline_mean"] == 1.0


def test_copy_counts_come_from_the_rows_rewriter_stats():
    from toolret.methods.qta.report import _copies

    assert _copies({"qta-rewriter": {"llm_outputs": 0, "copies_query": 3, "rewritten_queries": 80}}) == "3 / 80"
    assert _copies({"qta-base": {"llm_outputs": 80}}) == "-"  # a summary from before the count
    assert _copies({}) == "-"  # dense: no rewriter


def test_the_synthetic_section_reports_each_benchmarks_grid_with_its_training_catalogs_artifacts(tmp_path,
                                                                                                  monkeypatch):
    from toolret.config import validate_params
    from toolret.methods.qta.report import synthetic_sections

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    params = validate_params({"qta": {"synthetic": {"runs": {"bench": {"catalog": "bench-syn"},
                                                             "other": {"catalog": "other-syn"}},
                                                    "set": {"m": 1}}}})
    assert synthetic_sections(tmp_path / "runs", params.qta) == ([], {})  # nothing evaluated yet: no section
    grid = tmp_path / "runs" / "bench" / "qta-synthetic"
    grid.mkdir(parents=True)
    rows = {"dense": {"metrics": {"comp@5": 0.2, "comp@10": 0.4, "ndcg@5": 0.5}, "ci95": {}},
            "qta_synthetic": {"metrics": {"comp@5": 0.3, "comp@10": 0.5, "ndcg@5": 0.6}, "ci95": {}, "baseline": "dense",
                              "vs_baseline": {"comp@5": {"p_value": 0.0123}},
                              "components": {"qta-syn": {"copies_query": 4, "rewritten_queries": 90}}}}
    (grid / "summary.json").write_text(json.dumps({"variants": rows}))
    prefs = tmp_path / "data" / "qta" / "bench-syn"
    prefs.mkdir(parents=True)
    (prefs / "preferences.meta.json").write_text(json.dumps({"counts": {"records": 433, "pairs": 120, "ties": 313}}))
    rewrites = [{"query_id": "q10", "text": "Songs of Queen | live", "rewrite": "list songs", "fallback": False},
                {"query_id": "q2", "text": "Movies of 1999", "rewrite": "search movies of 1999", "fallback": False}]
    (prefs / "bench.test-rewrites.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rewrites))
    lines, data = synthetic_sections(tmp_path / "runs", params.qta)
    text = "\n".join(lines)
    assert "0 of 2 copy the request" in text and "kept 1 of 2, dropped 1" in text
    # sorted by query id as numbers sort (q2 before q10); a pipe in a request does not break the table
    assert text.index("| Movies of 1999 | search movies of 1999 | 1999 | - |") < text.index(
        "| Songs of Queen \\| live | list songs | - | Queen |")
    assert "### bench (trained on bench-syn)" in text and "other" not in text  # only what was evaluated
    assert "| qta_synthetic |" in text and "+0.100 | 0.012 |" in text and "4 / 90" in text
    assert "433 rounds, 120 pairs" in text and "m = 1 round(s) per request" in text
    assert data["synthetic"]["bench"]["variants"]["qta_synthetic"]["p_comp@5"] == 0.0123


def test_the_finetune_section_pools_its_grid_over_the_runs_not_used_for_selection(tmp_path, monkeypatch):
    from toolret.config import validate_params
    from toolret.methods.qta.report import finetune_sections

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    params = validate_params({"qta": {
        "runs": {"b-fold0of9": {"dataset": "b", "fold": 0, "selection": True}, "b-fold1of9": {"dataset": "b", "fold": 1},
                 "b-fold2of9": {"dataset": "b", "fold": 2}},
        "synthetic": {"runs": {"b": {"catalog": "b-syn"}}, "finetune": {"set": {"epochs": 3}}}}})
    runs = tmp_path / "runs"
    # the selection fold would flip the sign; fold 2 has no fine-tune grid (not evaluated yet): left out
    _grid(runs / "b-fold0of9" / "qta-syn-ft", {"dense": {"q1": 1.0, "q2": 1.0}, "ft": {"q1": 0.0, "q2": 0.0}},
          {"ft": "dense"})
    _grid(runs / "b-fold1of9" / "qta-syn-ft", {"dense": {"q1": 0.0, "q2": 0.0, "q3": 1.0},
                                               "ft": {"q1": 1.0, "q2": 0.0, "q3": 1.0}}, {"ft": "dense"})
    _grid(runs / "b-fold2of9" / "qta", {"dense": {"q1": 0.0}}, {})
    lines, data = finetune_sections(runs, params.qta, ["b-fold0of9", "b-fold1of9", "b-fold2of9"])
    pooled = data["synthetic_finetune"]["pooled"]
    assert pooled["runs"] == ["b-fold1of9"]
    (row,) = pooled["rows"]
    assert (row["row"], row["n"], row["mean"], row["baseline_mean"]) == ("ft", 3, pytest.approx(2 / 3),
                                                                         pytest.approx(1 / 3))
    assert set(data["synthetic_finetune"]["runs"]) == {"b-fold0of9", "b-fold1of9"}
    text = "\n".join(lines)
    assert "3 epochs" in text and "left out: b-fold0of9" in text
    assert "| ft | dense | 3 | 0.667 | 0.333 | +0.333 |" in text
    assert finetune_sections(runs, params.qta, ["b-fold2of9"]) == ([], {})  # nothing evaluated: no section


def test_the_larger_section_reads_the_larger_rewriters_own_preference_data_and_test_rewrites(tmp_path, monkeypatch):
    from toolret.config import validate_params
    from toolret.methods.qta.report import LARGER_GRID, larger_sections

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    params = validate_params({"qta": {"synthetic": {
        "runs": {"bench": {"catalog": "bench-syn"}, "other": {"catalog": "bench-syn"}}, "set": {"m": 1},
        "larger": {"set": {"llm_model": "qwen2.5-coder-1.5b-instruct"}}}}})
    assert larger_sections(tmp_path / "runs", params.qta) == ([], {})  # nothing evaluated yet: no section
    rows = {"dense": {"metrics": {"comp@5": 0.2, "comp@10": 0.4, "ndcg@5": 0.5}, "ci95": {}},
            "large": {"metrics": {"comp@5": 0.25, "comp@10": 0.5, "ndcg@5": 0.6}, "ci95": {}, "baseline": "dense",
                      "vs_baseline": {"comp@5": {"p_value": 0.04}},
                      "components": {"qta-syn-large": {"copies_query": 1, "rewritten_queries": 2}}}}
    _grid(tmp_path / "runs" / "bench" / LARGER_GRID, {"dense": {"q1": 0.0}, "large": {"q1": 1.0}}, {})
    (tmp_path / "runs" / "bench" / LARGER_GRID / "summary.json").write_text(json.dumps({"variants": rows}))
    # the 0.5B's preference data and rewrites sit one folder up: the section must not read them
    small = tmp_path / "data" / "qta" / "bench-syn"
    own = small / "qwen2.5-coder-1.5b-instruct"
    own.mkdir(parents=True)
    (small / "preferences.meta.json").write_text(json.dumps({"counts": {"records": 9, "pairs": 9, "ties": 0}}))
    (own / "preferences.meta.json").write_text(json.dumps({"counts": {"records": 433, "pairs": 150, "ties": 283}}))
    (small / "bench.test-rewrites.jsonl").write_text(json.dumps(
        {"query_id": "q1", "text": "Movies of 1999", "rewrite": "movies", "fallback": False}) + "\n")
    (own / "bench.test-rewrites.jsonl").write_text(json.dumps(
        {"query_id": "q1", "text": "Movies of 1999", "rewrite": "search movies of 1999", "fallback": False}) + "\n")
    lines, data = larger_sections(tmp_path / "runs", params.qta)
    text = "\n".join(lines)
    assert "### bench (trained on bench-syn, qwen2.5-coder-1.5b-instruct)" in text and "### other" not in text
    assert "433 rounds, 150 pairs" in text and "9 rounds" not in text
    assert "| Movies of 1999 | search movies of 1999 | 1999 | - |" in text and "kept 1 of 1, dropped 0" in text
    assert "| large |" in text and "+0.050 | 0.040 |" in text and "1 / 2" in text
    assert data["synthetic_larger"]["bench"]["changes"]["counts"]["kept"] == 1


def test_the_synthetic_section_shows_the_dev_grid_of_each_training_catalog_once(tmp_path, monkeypatch):
    """The dev table (``<runs>/<training catalog>/qta-synthetic-dev``) where the search settings were chosen: one
    per training catalog however many benchmarks use it, without repeating its preference data."""
    from toolret.config import validate_params
    from toolret.methods.qta.report import synthetic_sections

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    params = validate_params({"qta": {"synthetic": {"runs": {"bench": {"catalog": "bench-syn"},
                                                             "other": {"catalog": "bench-syn"}},
                                                    "set": {"m": 1}}}})
    grid = tmp_path / "runs" / "bench-syn" / "qta-synthetic-dev"
    grid.mkdir(parents=True)
    rows = {"dense": {"metrics": {"comp@5": 0.567, "comp@10": 0.7, "ndcg@5": 0.64}, "ci95": {}},
            "r8_w75": {"metrics": {"comp@5": 0.567, "comp@10": 0.72, "ndcg@5": 0.63}, "ci95": {}, "baseline": "dense"},
            "r4_w25": {"metrics": {"comp@5": 0.481, "comp@10": 0.6, "ndcg@5": 0.59}, "ci95": {}, "baseline": "dense"}}
    (grid / "summary.json").write_text(json.dumps({"variants": rows}))
    prefs = tmp_path / "data" / "qta" / "bench-syn"
    prefs.mkdir(parents=True)
    (prefs / "preferences.meta.json").write_text(json.dumps({"counts": {"records": 433, "pairs": 120, "ties": 313}}))
    lines, data = synthetic_sections(tmp_path / "runs", params.qta)
    text = "\n".join(lines)
    assert text.count("### bench-syn, dev split") == 1 and "433 rounds" not in text
    assert "| r4_w25 |" in text and "-0.086" in text and "| r8_w75 |" in text and "+0.000" in text
    assert data["synthetic"]["dev"]["bench-syn"]["variants"]["r8_w75"]["metrics"]["comp@5"] == 0.567
