"""DVC round trip on the materialized fixture project: push to a local remote, lose everything, pull."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orch_helpers import BIN, sh

pytestmark = pytest.mark.integration

OUT_DIRS = ["data/catalogs/fixture", "data/curated/fixture", "data/indexes/fixture/bm25", "data/runs/fixture/bm25"]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for d in OUT_DIRS for p in sorted((root / d).rglob("*"))
            if p.is_file()}


def test_push_delete_pull_restores_outputs(pipeline, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(pipeline.project, project, symlinks=True)
    dvc = str(BIN / "dvc")
    sh([dvc, "repro"], project)  # everything up to date: a no-op that must not fail
    before = _snapshot(project)
    assert before and any(k.endswith("original.json") for k in before)

    sh([dvc, "remote", "add", "-d", "local", str(tmp_path / "remote")], project)
    sh([dvc, "push"], project)
    for d in OUT_DIRS:
        shutil.rmtree(project / d)
    shutil.rmtree(project / ".dvc" / "cache")
    assert not (project / OUT_DIRS[0]).exists()

    sh([dvc, "pull"], project)
    assert _snapshot(project) == before
    status = sh([dvc, "status"], project).stdout
    assert "up to date" in status.lower() or "changed" not in status.lower(), status
