"""`toolret evaluate` end to end through the installed entry point, and the reproduction targets."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toolret.catalog.source import source_root

pytestmark = [pytest.mark.skipif(not source_root().is_dir(), reason="../shared/datasets not present"),
              pytest.mark.integration]


def _toolret(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolret.cli", *args], capture_output=True, text=True, timeout=600)


def _evaluate(tmp_path, dataset, method, docs="original", k="1,3,5,10", in_process=False):
    out = tmp_path / f"{dataset}-{method}-{docs}.json"
    args = ["evaluate", "--dataset", dataset, "--method", method, "--docs", docs, "--k", k, "--output", str(out)]
    if in_process:
        from toolret.cli import main

        assert main(args) == 0
    else:
        p = _toolret(*args)
        assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(out.read_text()), out


def test_evaluate_json_schema_and_bm25_toollens_reproduction(tmp_path):
    result, out = _evaluate(tmp_path, "toollens", "bm25")
    assert {"dataset", "method", "n_queries", "metrics", "ci95", "latency_ms", "provenance"} <= set(result)
    assert result["n_queries"] == 1877
    m = result["metrics"]
    assert all(0.0 <= v <= 1.0 for v in m.values())
    assert {"recall@5", "ndcg@5", "comp@5", "mrr"} <= set(m)
    lo, hi = result["ci95"]["recall@5"]
    assert lo <= m["recall@5"] <= hi
    assert result["latency_ms"]["p50"] <= result["latency_ms"]["p95"]
    assert result["provenance"]["dataset_checksums"] and result["provenance"]["git_sha"]
    assert 0.24 <= m["recall@5"] <= 0.36  # paper (COLT, ToolLens BM25): 0.269
    rows = out.with_name(out.name.removesuffix(".json") + ".per_query.jsonl").read_text().splitlines()
    assert len(rows) == 1877


def test_dense_reproduces_mtrb(tmp_path):
    # in this process (the entry point is the test above's): one encoder load, no interpreter start per dataset
    mt, _ = _evaluate(tmp_path, "mtrb-metatool", "dense", k="5", in_process=True)
    assert 0.77 <= mt["metrics"]["comp@5"] <= 0.84  # QTA paper: 0.811
    rb, _ = _evaluate(tmp_path, "mtrb-restbench", "dense", docs="human", k="5", in_process=True)
    assert 0.12 <= rb["metrics"]["comp@5"] <= 0.20  # QTA paper: 0.156


def test_clear_errors(tmp_path):
    p = _toolret("evaluate", "--dataset", "mtrb-toolbench", "--method", "bm25", "--output", str(tmp_path / "x.json"))
    assert p.returncode == 2 and "never released" in p.stderr
    p = _toolret("evaluate", "--dataset", "mtrb-metatool", "--method", "dense-ft", "--set", "catalog.auto_folds=0",
                 "--output", str(tmp_path / "y.json"))  # (with auto_folds a dataset without train split is k-folded)
    assert p.returncode == 2 and "no training split" in p.stderr
    p = _toolret("evaluate", "--dataset", "mtrb-metatool", "--method", "bm25", "--docs", "human", "--output", str(tmp_path / "z.json"))
    assert p.returncode == 2 and "'human'" in p.stderr
    assert not list(tmp_path.iterdir())


def test_report_tables_skip_non_results(tmp_path, fixture_catalog_dir):
    from toolret.cli import main

    runs = tmp_path / "runs" / "fixture"
    for method in ("bm25", "dense"):
        assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", method, "--k", "1,5",
                     "--output", str(runs / method / "original.json")]) == 0
    (runs / "grid").mkdir()
    (runs / "grid" / "summary.json").write_text('{"variants": {}}')  # not an evaluation result
    out = tmp_path / "report.md"
    assert main(["report", "--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8-sig")
    assert "bm25" in text and "dense" in text and "summary" not in text


def test_a_missing_params_file_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "missing.yaml"
    p = _toolret("--params", str(missing), "catalog", "build", "--dataset", "mtrb-restbench",
                 "--out", str(tmp_path / "out"))
    assert p.returncode == 2
    assert f"{missing}: params file not found" in p.stderr
    assert not (tmp_path / "out").exists()


def test_every_result_records_its_params_file(tmp_path):
    from toolret.evaluation import load_run_info

    params = tmp_path / "my-params.yaml"
    params.write_text("datasets: [mtrb-restbench]\n")
    out = tmp_path / "r.json"
    p = _toolret("--params", str(params), "evaluate", "--dataset", "mtrb-restbench", "--method", "bm25",
                 "--output", str(out), "--set", "bm25.k1=1.1")
    assert p.returncode == 0, p.stderr[-2000:]
    result = json.loads(out.read_text())
    info = result["provenance"].get("params_file") or load_run_info(out).get("provenance", {}).get("params_file")
    import hashlib

    assert info["file"] == str(params)  # outside the project: kept as given
    assert info["sha256"] == hashlib.sha256(params.read_bytes()).hexdigest()
    assert info["overrides"] == ["bm25.k1=1.1"]


def test_help_lists_every_command_once_by_what_a_user_does_plumbing_after_the_user_groups() -> None:
    from toolret.cli import COMMAND_GROUPS, METHOD_GROUP, build_parser

    text = build_parser().format_help()
    listing = text[text.index("commands (toolret COMMAND --help for each):"):]
    titles = [line[:-1] for line in listing.splitlines()[1:] if line and not line.startswith(" ")]
    assert titles == [*COMMAND_GROUPS, METHOD_GROUP]
    assert titles.index("Plumbing (DVC stages, long jobs)") > titles.index("Evaluate and compare")
    listed = [line.split()[0] for line in listing.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    parser_commands = next(a for a in build_parser()._subparsers._group_actions).choices  # noqa: SLF001
    assert sorted(listed) == sorted(parser_commands)  # each command once, none left out
    assert "toolrerank-grid" in listed[listed.index("reinvoke-tool-vectors"):]  # methods' commands together
    # a command's own page keeps its description
    assert "OpenAPI 3 file" in subprocess.run([sys.executable, "-m", "toolret.cli", "import-openapi", "--help"],
                                             capture_output=True, text=True, timeout=120).stdout
