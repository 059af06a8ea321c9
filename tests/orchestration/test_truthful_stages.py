"""The pipeline tells the truth: an edited source file reruns exactly the stages that run it, and an
unchanged stage re-run gives the same outputs (same md5 in dvc.lock)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orch_helpers import BIN, sh

pytestmark = pytest.mark.integration


def _copy(pipeline, tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(pipeline.project, project, symlinks=True)
    return project


def test_editing_a_module_marks_the_stages_that_import_it(pipeline, tmp_path: Path) -> None:
    project = _copy(pipeline, tmp_path)
    dvc = str(BIN / "dvc")
    before = sh([dvc, "status"], project).stdout
    assert "evaluate@fixture-bm25" not in before, before  # materialized: up to date
    with open(project / "toolret" / "evaluation.py", "a", encoding="utf-8") as f:
        f.write("\n# an edit\n")
    after = sh([dvc, "status"], project).stdout
    assert "evaluate@fixture-bm25" in after and "toolret/evaluation.py" in after, after
    assert "catalog@fixture" not in after, after  # catalogs never run the evaluation code


def test_rerunning_unchanged_stages_keeps_dvc_lock(pipeline, tmp_path: Path) -> None:
    project = _copy(pipeline, tmp_path)
    dvc = str(BIN / "dvc")
    lock = (project / "dvc.lock").read_text(encoding="utf-8")
    for stage in ("catalog@fixture", "clean@fixture", "index@fixture-bm25", "evaluate@fixture-bm25"):
        sh([dvc, "repro", "--force", "--single-item", stage], project, timeout=600)
    assert (project / "dvc.lock").read_text(encoding="utf-8") == lock
    # the volatile fields went to the untracked run-info sidecar
    info = project / "data" / "run_info" / "runs" / "fixture" / "bm25" / "original.json"
    assert info.is_file() and "latency_ms" in info.read_text(encoding="utf-8")
