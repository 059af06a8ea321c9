"""The fingerprint a kept ``dvc status`` is valid for: every file the graph reads, none of the runtime stores."""

from __future__ import annotations

import os

import yaml

from dagster_project.graph_snapshot import fingerprint, store_status, stored_status


def _project(tmp_path):
    p = tmp_path / "p"
    (p / "data" / "catalogs").mkdir(parents=True)
    (p / "data" / "mlflow").mkdir()
    (p / "src").mkdir()
    (p / "shared").mkdir()
    (p / "shared" / "rows.tsv").write_text("a\n")
    (p / "src" / "code.py").write_text("x = 1\n")
    (p / "data" / "catalogs" / "c.json").write_text("{}")
    (p / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"s": {
        "cmd": "true", "deps": ["${source.root}/rows.tsv", "src/code.py"], "outs": ["data/catalogs/c.json"]}}}))
    (p / "params.yaml").write_text(yaml.safe_dump({"source": {"root": "shared"}}))
    (p / "dvc.lock").write_text("schema: '2.0'\n")
    return p


def _touch_later(path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def test_every_file_the_graph_reads_moves_the_fingerprint(tmp_path) -> None:
    p = _project(tmp_path)
    seen = {fingerprint(p)}
    for changed in ("data/catalogs/c.json", "src/code.py", "shared/rows.tsv", "dvc.lock", "params.yaml"):
        _touch_later(p / changed)
        if changed in ("dvc.lock", "params.yaml"):
            (p / changed).write_text((p / changed).read_text() + "# edited\n")
        now = fingerprint(p)
        assert now not in seen, changed
        seen.add(now)
    (p / "data" / "catalogs" / "new.json").write_text("{}")
    assert fingerprint(p) not in seen


def test_runtime_stores_do_not_move_it(tmp_path) -> None:
    p = _project(tmp_path)
    before = fingerprint(p)
    (p / "data" / "mlflow" / "mlflow.db").write_text("runs")
    (p / "data" / ".orchestration").mkdir()
    (p / "data" / ".orchestration" / "run.json").write_text("{}")
    assert fingerprint(p) == before


def test_a_kept_status_is_taken_only_while_the_fingerprint_holds(tmp_path) -> None:
    p = _project(tmp_path)
    store_status(p, {"s": ["changed command"]}, "run-1")
    assert stored_status(p) == {"s": ["changed command"]}
    _touch_later(p / "src" / "code.py")
    assert stored_status(p) is None
