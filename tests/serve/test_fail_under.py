"""`toolret evaluate --fail-under`: the regression gate before a pipeline is served."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def _evaluate(dataset, out, *gates: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "toolret.cli", "evaluate", "--dataset", str(dataset), "--method", "bm25",
           "--k", "1,5", "--output", str(out)]
    for g in gates:
        cmd += ["--fail-under", g]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_gate_fails_with_exit_3_naming_the_metrics_and_writes_the_result(serve_catalog, tmp_path):
    directory, _ = serve_catalog
    out = tmp_path / "fail.json"
    p = _evaluate(directory, out, "recall@5=0.01,ndcg@5=1.01", "recall@1=1.01")
    assert p.returncode == 3, p.stderr[-2000:]
    metrics = json.loads(out.read_text())["metrics"]  # written either way
    assert metrics["ndcg@5"] < 1.01 and metrics["recall@1"] < 1.01 and metrics["recall@5"] >= 0.01
    line = next(x for x in p.stderr.splitlines() if "regression gate failed" in x)
    assert f"ndcg@5 = {metrics['ndcg@5']:.4f} < 1.01" in line and f"recall@1 = {metrics['recall@1']:.4f} < 1.01" in line
    assert "recall@5" not in line  # the metric that met its gate is not named


def test_gate_passes_and_bad_gates_are_errors(serve_catalog, tmp_path):
    from toolret.cli import main

    directory, _ = serve_catalog
    p = _evaluate(directory, tmp_path / "ok.json", "recall@5=0.2", "mrr=0")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "regression gate passed: recall@5 = " in p.stderr
    # malformed: refused before evaluating; unknown metric: refused after writing the result
    assert main(["evaluate", "--dataset", str(directory), "--method", "bm25", "--output", str(tmp_path / "x.json"),
                 "--fail-under", "recall@5"]) == 2
    assert not (tmp_path / "x.json").exists()
    assert main(["evaluate", "--dataset", str(directory), "--method", "bm25", "--k", "5",
                 "--output", str(tmp_path / "y.json"), "--fail-under", "recall@50=0.5"]) == 2
    assert (tmp_path / "y.json").exists()
