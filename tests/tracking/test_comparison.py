"""The comparison report: metric order, Holm-adjusted p-values, UTF-8 artifacts with a legend, idempotency.

Holm's hand-computed values are tested with the function, in tests/metrics/test_evaluate_api.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import per_query, write_result

pytestmark = pytest.mark.integration


@pytest.fixture
def results(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(0)
    runs = tmp_path / "data" / "runs" / "toy"
    return [write_result(runs / "bm25", "bm25", "original", per_query(rng, 0.3)),
            write_result(runs / "dense", "dense", "original", per_query(rng, 0.5)),
            write_result(runs / "sys-a", "sys-a", "original", per_query(rng, 0.6)),
            write_result(runs / "sys-b", "sys-b", "original", per_query(rng, 0.6)),
            write_result(runs / "sys-c", "sys-c", "original", per_query(rng, 0.6))]


def test_metrics_are_ordered_by_cutoff() -> None:
    from toolret.tracking import order_metrics

    lexicographic = sorted(["recall@1", "recall@3", "recall@5", "recall@10", "ndcg@5", "ndcg@10", "mrr", "comp@5"])
    assert lexicographic[:4] == ["comp@5", "mrr", "ndcg@10", "ndcg@5"]  # what sorted() gives
    assert order_metrics(lexicographic) == ["recall@1", "recall@3", "recall@5", "recall@10", "ndcg@5", "ndcg@10",
                                            "comp@5", "mrr"]


def _hits(k: int, n: int = 30) -> dict[str, dict[str, float]]:
    """Per-query rows with exactly ``k`` hits: every system's mean recall@5 is k / n by construction."""
    return {f"q{i:02d}": {m: float(i < k) for m in ("recall@1", "recall@3", "recall@5", "recall@10", "ndcg@5", "mrr")}
            for i in range(n)}


def test_marks_follow_holm_not_raw_p(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four systems vs the reference (dense) with raw p 0.001, 0.03, 0.04, 0.9: Holm gives 0.004, 0.09,
    0.09, 0.9, so only the first is marked although three raw p-values are below 0.05."""
    import toolret.metrics
    from toolret.tracking import compare_results

    hits = {"bm25": 9, "dense": 15, "sys-a": 18, "sys-b": 19, "sys-c": 20}
    results = [write_result(tmp_path / m, m, "original", _hits(k)) for m, k in hits.items()]
    raw = {"sys-a": 0.001, "sys-b": 0.03, "sys-c": 0.04, "bm25": 0.9}
    by_hits = {k: m for m, k in hits.items()}

    def fake_test(a, b, method="randomization", n_samples=0, seed=0):
        system = by_hits[int(np.sum(a))]  # recall@5 of the tested system: its number of hits
        return {"method": method, "p_value": raw[system], "mean_diff": float(np.mean(a) - np.mean(b)), "n": len(a)}

    monkeypatch.setattr(toolret.metrics, "paired_test", fake_test)
    cmp = compare_results("toy", results, metrics=["recall@5"])
    assert cmp.reference["recall@5"] == "dense/original"
    tests = {t["system"]: t for t in cmp.tests}
    assert {s: t["p_value"] for s, t in tests.items()} == {f"{k}/original": v for k, v in raw.items()}
    assert tests["sys-a/original"]["p_holm"] == pytest.approx(0.004)  # 4 tests in the family: 4 x 0.001
    assert tests["sys-b/original"]["p_holm"] == pytest.approx(0.09)   # 3 x 0.03
    assert tests["sys-c/original"]["p_holm"] == pytest.approx(0.09)   # max(2 x 0.04, 0.09)
    assert [s for s, t in tests.items() if t["significant"]] == ["sys-a/original"]
    table = cmp.table()
    assert table.loc["sys-a/original", "recall@5"].endswith(("▲", "▼"))
    assert not table.loc["sys-b/original", "recall@5"].endswith(("▲", "▼"))


def test_report_artifacts_are_utf8_with_a_legend(results: list[Path], tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import log_comparison_report

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    report = log_comparison_report("toy", results, experiment="t", tracking_uri=uri, n_samples=500)
    client = MlflowClient(uri)
    out = tmp_path / "dl"
    html = Path(client.download_artifacts(report["run_id"], "report/comparison.html", str(out))).read_bytes()
    assert html.startswith(b"<!DOCTYPE html>") and b'<meta charset="utf-8">' in html[:300]
    text = html.decode("utf-8")
    assert "Legend" in text and "▲" in text and "▼" in text and "(ref)" in text and "Holm" in text
    md = Path(client.download_artifacts(report["run_id"], "report/comparison.md", str(out))).read_bytes()
    csv = Path(client.download_artifacts(report["run_id"], "report/comparison.csv", str(out))).read_bytes()
    for raw in (md, csv):  # plain UTF-8: no byte order mark in front of the markdown title / CSV header
        assert not raw.startswith(b"\xef\xbb\xbf")
    assert md.startswith(b"# toy") and csv.startswith(b"system,")
    md_text = md.decode("utf-8")
    assert "Legend" in md_text and "p (Holm)" in md_text
    header = next(line for line in md_text.splitlines() if line.startswith("| system"))
    assert header.index("recall@3") < header.index("recall@5") < header.index("recall@10")
    sig = json.loads(Path(client.download_artifacts(report["run_id"], "report/significance.json", str(out)))
                     .read_text(encoding="utf-8"))
    assert sig["tests"] and all(t["p_holm"] >= t["p_value"] for t in sig["tests"])
    sig_csv = Path(client.download_artifacts(report["run_id"], "report/significance.csv", str(out))).read_text()
    assert "p_holm" in sig_csv.splitlines()[0]  # the p-values live in the artifacts, not as run metrics


def test_comparison_run_is_reused_for_the_same_results(results: list[Path], tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import log_comparison_report

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = log_comparison_report("toy", results, experiment="t", tracking_uri=uri, n_samples=200)
    second = log_comparison_report("toy", list(reversed(results)), experiment="t", tracking_uri=uri, n_samples=200)
    assert second["run_id"] == first["run_id"] and second["created"] is False
    assert second["markdown"] == first["markdown"] and second["tests"] == first["tests"]
    third = log_comparison_report("toy", results[:3], experiment="t", tracking_uri=uri, n_samples=200)
    assert third["created"] and third["run_id"] != first["run_id"]
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("t")
    runs = {r.info.run_id: r.data.tags for r in client.search_runs([exp.experiment_id])}
    assert set(runs) == {first["run_id"], third["run_id"]}
    assert runs[first["run_id"]]["toolret.superseded_by"] == third["run_id"]
    assert runs[third["run_id"]]["toolret.current"] == "true"


def test_identical_systems_are_collapsed_before_testing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dense[baseline]` repeats dense and `sys-a[full]` repeats sys-a query for query: each pair is one row and
    one test, so Holm multiplies sys-a's raw p 0.01 by the 2 distinct comparisons (bm25, sys-a), not by 4."""
    import toolret.metrics
    from toolret.tracking import compare_results

    hits = {"bm25": 9, "dense": 15, "dense[baseline]": 15, "sys-a": 18, "sys-a[full]": 18}
    results = [write_result(tmp_path / m, m, "original", _hits(k)) for m, k in hits.items()]
    raw = {9: 0.9, 15: 0.5, 18: 0.01}  # by the tested system's number of hits

    def fake_test(a, b, method="randomization", n_samples=0, seed=0):
        return {"method": method, "p_value": raw[int(np.sum(a))], "mean_diff": float(np.mean(a) - np.mean(b)),
                "n": len(a)}

    monkeypatch.setattr(toolret.metrics, "paired_test", fake_test)
    cmp = compare_results("toy", results, metrics=["recall@5"])
    assert [s.label for s in cmp.systems] == ["bm25/original", "dense/original", "sys-a/original"]
    assert {s.label: s.same_as for s in cmp.systems if s.same_as} == {
        "dense/original": ["dense[baseline]/original"], "sys-a/original": ["sys-a[full]/original"]}
    tests = {t["system"]: t for t in cmp.tests}
    assert set(tests) == {"bm25/original", "sys-a/original"}  # the copy of the reference is not tested
    assert tests["sys-a/original"]["p_holm"] == pytest.approx(0.02)
    assert "dense/original = dense[baseline]/original" in cmp.markdown()


def test_a_system_without_per_query_results_is_never_merged(tmp_path: Path) -> None:
    from toolret.tracking import compare_results

    a = write_result(tmp_path / "a", "sys-a", "original", _hits(10))
    b = write_result(tmp_path / "b", "sys-b", "original", _hits(10))
    (tmp_path / "b" / "original.per_query.jsonl").unlink()  # same means, but nothing says the queries agree
    cmp = compare_results("toy", [a, b], metrics=["recall@5"])
    assert [s.label for s in cmp.systems] == ["sys-a/original", "sys-b/original"]


def _many_systems(tmp_path: Path, n: int) -> list[Path]:
    rng = np.random.default_rng(3)
    return [write_result(tmp_path / "runs" / f"sys-{i:02d}", f"sys-{i:02d}", "original",
                         per_query(rng, 0.2 + 0.6 * i / n)) for i in range(n)]


def test_comparison_run_is_described_in_its_own_experiment_with_few_metrics(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from toolret.tracking import log_comparison_report

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = _many_systems(tmp_path, 25)  # 25 systems x 6 metrics: 150 values, 144 tests
    report = log_comparison_report("toy", results, tracking_uri=uri, n_samples=100)
    client = MlflowClient(uri)
    run = client.get_run(report["run_id"])
    assert client.get_experiment(run.info.experiment_id).name == "toolret-comparisons"
    assert report["experiment_id"] == run.info.experiment_id
    metrics = run.data.metrics
    assert len(metrics) <= 60
    labels = [f"sys-{i:02d}.original" for i in range(25)]
    assert all(f"{label}/recall_at_5" in metrics for label in labels)  # the headline metric of every system
    assert metrics["n_systems"] == 25
    description = run.data.tags["mlflow.note.content"]
    assert len(description) <= 8000
    header = next(line for line in description.splitlines() if line.startswith("| system"))
    assert header == "| system | recall@5 | ndcg@5 | mrr |"
    assert all(f"| sys-{i:02d}/original |" in description for i in range(25))


def test_the_description_renders_as_a_table_whose_reference_marker_is_no_link(tmp_path: Path) -> None:
    """MLflow's description renderer reads ``[text] (x)`` as a link (the "(ref)" marker vanished): the cells'
    brackets are escaped, a CommonMark + tables renderer shows one table row per system, no link, every "(ref)"."""
    import re

    from markdown_it import MarkdownIt

    from toolret.tracking import compare_results

    cmp = compare_results("toy", _many_systems(tmp_path, 4), n_samples=100)
    description = cmp.description()
    assert "(ref)" in description
    assert not re.search(r"(?<!\\)\[[^\]\n]*(?<!\\)\]\s*\(", description)  # no lenient-renderer link
    html = MarkdownIt("commonmark").enable("table").render(description)
    assert "<a " not in html and html.count("<table>") == 1
    assert html.count("<tr>") == 1 + len(cmp.systems)  # the header and a row per system
    assert html.count("(ref)") == description.count("(ref)") and "[0." in html  # the CI shown as written


def test_chart_has_a_labelled_panel_per_headline_metric_and_the_legend_outside(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from toolret.tracking import compare_results
    from toolret.tracking.comparison import comparison_figure, headline_metrics

    cmp = compare_results("toy", _many_systems(tmp_path, 19), n_samples=100)
    fig = comparison_figure(cmp)
    try:
        fig.canvas.draw()
        axes = fig.get_axes()
        assert [ax.get_title() for ax in axes] == headline_metrics(cmp.metrics) == ["recall@5", "ndcg@5", "mrr"]
        assert [t.get_text() for t in axes[0].get_yticklabels()] == [s.label for s in cmp.systems]
        renderer = fig.canvas.get_renderer()
        legend = fig.legends[0].get_window_extent(renderer)
        assert not any(legend.overlaps(ax.get_window_extent(renderer)) for ax in axes)
        assert not any(ax.get_legend() for ax in axes)
    finally:
        plt.close(fig)
