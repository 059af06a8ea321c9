"""The reproduction matrix (``results/matrix``): every committed cell reads back OK from its record, the
README's headline table is the one the records render, and a drifted or malformed cell is reported."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from toolret.errors import MatrixError
from toolret.reproduce import check, check_lines, headline_table, load_matrix, read_cell, render_readme, run
from toolret.stages import ROOT


def test_every_committed_cell_reads_back_ok_from_its_record() -> None:
    cells = load_matrix(ROOT / "results" / "matrix")
    assert {c.method for c in cells} >= {"Re-Invoke", "QTA", "ToolRerank", "toolret adapt"}
    bad = [line for line in check_lines(check(cells, ROOT)) if not line.startswith("OK")]
    assert not bad, "\n".join(bad)


def test_the_readme_headline_table_is_current_and_carries_the_records_numbers() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    cells = load_matrix(ROOT / "results" / "matrix")
    assert render_readme(readme, headline_table(check(cells, ROOT))) == readme, (
        "README headline table is stale: run `toolret reproduce --render-readme`")
    # the numbers, read from the records independently of the renderer
    rows = [line for line in readme.splitlines() if line.startswith("| [ToolRerank]")]
    g1 = next(r for r in rows if "| toolbench-g1-instruction | ToolRerank |" in r)
    record = json.loads((ROOT / "results/reports/toolrerank_results.json").read_text(encoding="utf-8"))
    node = record["toolbench-g1-instruction"]["rows"]["toolrerank"]
    lo, hi = node["ci95"]["recall@5"]
    assert f"{node['metrics']['recall@5']:.3f} [{lo:.3f}, {hi:.3f}]" in g1


def _matrix(tmp_path: Path, expected: float, record: dict, extra: str = "") -> Path:
    (tmp_path / "rec.json").write_text(json.dumps(record))
    folder = tmp_path / "matrix"
    folder.mkdir()
    (folder / "m.yaml").write_text(
        "method: M\nrecord: rec.json\ncommand: 'true'\ncells:\n"
        f"  - {{dataset: d, condition: c, metric: recall@5, at: d/rows/c, expected: {expected}{extra}}}\n")
    return folder


def test_a_drifted_cell_fails_and_the_check_exits_1(tmp_path, capsys) -> None:
    record = {"d": {"rows": {"c": {"metrics": {"recall@5": 0.70}, "ci95": {"recall@5": [0.6, 0.8]}}}}}
    _matrix(tmp_path, 0.72, record)
    args = type("A", (), {"matrix": "matrix", "method": None, "check": True, "from_records": True,
                          "render_readme": False})()
    assert run(args, tmp_path) == 1
    out = capsys.readouterr().out
    assert re.search(r"^FAIL M \| d \| c \| recall@5: 0\.7000 \(expected 0\.7200", out, re.M)
    assert "0/1 cells OK" in out


def test_the_check_without_from_records_reruns_the_command_first(tmp_path, capsys) -> None:
    record = {"d": {"rows": {"c": {"metrics": {"recall@5": 0.70}}}}}
    folder = _matrix(tmp_path, 0.5, record)
    # the cell's command rewrites the record: a rerun that reproduces 0.5 makes the cell OK
    new = json.dumps({"d": {"rows": {"c": {"metrics": {"recall@5": 0.5}}}}})
    (tmp_path / "new.json").write_text(new)
    text = (folder / "m.yaml").read_text().replace("command: 'true'", "command: 'cp new.json rec.json'")
    (folder / "m.yaml").write_text(text)
    args = type("A", (), {"matrix": "matrix", "method": None, "check": True, "from_records": False,
                          "render_readme": False})()
    assert run(args, tmp_path) == 0
    assert "1/1 cells OK" in capsys.readouterr().out


def test_a_list_selector_and_a_missing_path_name_the_cell(tmp_path) -> None:
    record = {"pooled": {"rows": [{"row": "a", "metric": "m", "mean": 0.25}, {"row": "b", "metric": "m", "mean": 0.5}]}}
    (tmp_path / "r.json").write_text(json.dumps(record))
    folder = tmp_path / "matrix"
    folder.mkdir()
    (folder / "q.yaml").write_text("method: Q\nrecord: r.json\ncommand: x\ncells:\n"
                                   "  - {dataset: d, condition: b, metric: m, at: 'pooled/rows/row=b,metric=m', expected: 0.5}\n"
                                   "  - {dataset: d, condition: z, metric: m, at: 'pooled/rows/row=z', expected: 0.5}\n")
    ok, missing = [read_cell(c, tmp_path) for c in load_matrix(folder)]
    assert ok.ok and ok.value == 0.5
    assert not missing.ok and "q.yaml cell 1" in missing.error and "row=z" in missing.error


def test_a_malformed_matrix_names_the_file_and_cell(tmp_path) -> None:
    folder = tmp_path / "matrix"
    folder.mkdir()
    (folder / "bad.yaml").write_text("method: B\ncells:\n  - {dataset: d, condition: c, metric: m, at: x, expected: 1}\n")
    with pytest.raises(MatrixError, match=r"bad\.yaml cell 0: missing record, command"):
        load_matrix(folder)
    (folder / "bad.yaml").write_text("method: B\nrecord: r\ncommand: c\ncells:\n"
                                     "  - {dataset: d, condition: c, metric: m, at: x, expected: 1, expectd: 2}\n")
    with pytest.raises(MatrixError, match=r"bad\.yaml cell 0: unknown keys \['expectd'\]"):
        load_matrix(folder)


@pytest.mark.integration  # MLflow
def test_mlflow_runs_carry_the_records_numbers_and_the_readme_the_same(tmp_path) -> None:
    from toolret.tracking.reproduction import REPRODUCTION_EXPERIMENT, log_reproduction_matrix
    from toolret.tracking.store import get_client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = check(load_matrix(ROOT / "results" / "matrix"), ROOT)
    logged = log_reproduction_matrix(results, tracking_uri=uri)
    assert logged["created"] == len(results)
    assert log_reproduction_matrix(results, tracking_uri=uri)["created"] == 0  # idempotent
    # a cell whose number moved gets a new current run; its old run points to it (the rest stay as they were)
    import dataclasses

    from toolret.tracking.store import CURRENT_TAG, SUPERSEDED_TAG

    moved = [dataclasses.replace(results[0], value=results[0].value + 0.5), *results[1:]]
    relogged = log_reproduction_matrix(moved, tracking_uri=uri)
    assert relogged["created"] == 1
    old, new = logged["runs"][results[0].cell.name], relogged["runs"][results[0].cell.name]
    client = get_client(uri)
    assert client.get_run(new).data.tags[CURRENT_TAG] == "true"
    assert (client.get_run(old).data.tags[CURRENT_TAG], client.get_run(old).data.tags[SUPERSEDED_TAG]) == ("false", new)
    assert log_reproduction_matrix(results, tracking_uri=uri)["created"] == 0  # back: the first run again
    assert client.get_run(old).data.tags[CURRENT_TAG] == "true" and SUPERSEDED_TAG not in client.get_run(old).data.tags
    assert client.get_run(new).data.tags[CURRENT_TAG] == "false"
    exp = client.get_experiment_by_name(REPRODUCTION_EXPERIMENT)
    runs = {r.data.tags["toolret.cell"]: r for r in client.search_runs([exp.experiment_id], max_results=1000)
            if r.data.tags[CURRENT_TAG] == "true"}
    assert len(runs) == len(results)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for r in results:
        run = runs[r.cell.name]
        assert run.data.metrics["value"] == r.value and run.data.tags["status"] == "OK"
        if r.cell.headline:  # the README row of the cell shows the MLflow run's number
            row = next(line for line in readme.splitlines()
                       if f"| {r.cell.dataset} | {r.cell.label or r.cell.condition} | {r.cell.metric} |" in line
                       and f"[{r.cell.method}]" in line)
            assert f"| {run.data.metrics['value']:.3f}" in row


def test_the_cli_prints_a_malformed_matrix_as_an_error_naming_the_file(tmp_path, capsys, monkeypatch) -> None:
    """Every ToolretError (here a MatrixError, no CatalogError) leaves the CLI as one line and exit 2."""
    from toolret.cli import main

    (tmp_path / "matrix").mkdir()
    (tmp_path / "matrix" / "bad.yaml").write_text("method: M\ncells: []\nexpectd: 1\n")
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    assert main(["reproduce", "--check", "--from-records", "--matrix", "matrix"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolret: error: ") and "bad.yaml" in err and "expectd" in err and "Traceback" not in err


def test_a_record_written_by_evaluate_record_reads_back_ok(fixture_catalog_dir, tmp_path, capsys) -> None:
    """A record with its condition, produced_by and run file (``toolret evaluate --record``) is a cell's record
    as before: ``--check --from-records`` reads its metric at ``at: ''``."""
    from toolret.cli import main

    out = tmp_path / "results" / "records" / "fx" / "bm25.json"
    assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", "bm25", "--record",
                 "--output", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["condition"]["spec"] == "bm25" and "git_commit" in record["produced_by"]
    folder = tmp_path / "matrix"
    folder.mkdir()
    (folder / "b.yaml").write_text(
        "method: B\ncommand: 'false'\ncells:\n"
        f"  - {{dataset: fx, condition: bm25, metric: recall@5, record: results/records/fx/bm25.json, at: '', "
        f"expected: {record['metrics']['recall@5']}}}\n")
    args = type("A", (), {"matrix": "matrix", "method": None, "check": True, "from_records": True,
                          "render_readme": False})()
    assert run(args, tmp_path) == 0
    assert re.search(r"^OK   B \| fx \| bm25 \| recall@5: ", capsys.readouterr().out, re.M)
    (ok,) = check(load_matrix(folder), tmp_path)
    assert ok.ci95 == tuple(record["ci95"]["recall@5"])


def test_a_cells_paper_number_is_read_from_a_papers_table_in_its_unit(tmp_path) -> None:
    folder = tmp_path / "matrix"
    folder.mkdir()
    (folder / "a.yaml").write_text("method: A\nrecord: r\ncommand: c\npapers_unit: percent\npapers:\n"
                                   "  T1: {x.recall@5: 95.0}\ncells:\n"
                                   "  - {dataset: d, condition: x, metric: recall@5, at: n, expected: 0.9,"
                                   " paper: T1/x.recall@5}\n")
    (folder / "b.yaml").write_text("method: B\nrecord: r\ncommand: c\ncells:\n"
                                   "  - {dataset: d, condition: y, metric: recall@5, at: n, expected: 0.4,"
                                   " paper: 'a:T1/x.recall@5'}\n"
                                   "  - {dataset: d, condition: z, metric: recall@5, at: n, expected: 0.4, paper: 0.25}\n")
    assert [c.paper for c in load_matrix(folder)] == [0.95, 0.95, 0.25]
    (folder / "b.yaml").write_text("method: B\nrecord: r\ncommand: c\ncells:\n"
                                   "  - {dataset: d, condition: y, metric: recall@5, at: n, expected: 0.4,"
                                   " paper: 'a:T2/x.recall@5'}\n")
    with pytest.raises(MatrixError, match=r"b\.yaml cell 0: paper 'a:T2/x\.recall@5': a\.yaml has no number at "
                                          r"papers\.T2"):
        load_matrix(folder)


def test_no_committed_cell_repeats_a_number_a_papers_table_holds() -> None:
    import yaml

    tables = {}
    for path in sorted((ROOT / "results" / "matrix").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        scale = 0.01 if doc.get("papers_unit") == "percent" else 1.0
        for column, entries in (doc.get("papers") or {}).items():
            for key, value in entries.items():
                if isinstance(value, (int, float)):
                    tables.setdefault(key, []).append((path.stem, column, value * scale))
    repeated = []
    for path in sorted((ROOT / "results" / "matrix").glob("*.yaml")):
        for i, cell in enumerate(yaml.safe_load(path.read_text(encoding="utf-8"))["cells"]):
            if isinstance(cell.get("paper"), (int, float)):
                same = [t for t in tables.get(f"{cell['condition']}.{cell['metric']}", [])
                        if abs(t[2] - cell["paper"]) < 6e-4]
                if same:
                    repeated.append(f"{path.name} cell {i}: {cell['paper']} is "
                                    f"{same[0][0]}.yaml papers.{same[0][1]}")
    assert not repeated, "\n".join(repeated)
