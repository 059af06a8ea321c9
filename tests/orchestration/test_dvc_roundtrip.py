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


def test_pushing_named_stages_sends_their_outputs_and_only_theirs(pipeline, tmp_path: Path) -> None:
    """dagster_project.dvc_push (the end of a batch run): the stages' outputs reach the remote, read back by
    `dvc pull`, and a stage not named is not pushed."""
    import json

    from dagster_project.dvc_push import push_stages

    project = tmp_path / "project"
    shutil.copytree(pipeline.project, project, symlinks=True)
    dvc = str(BIN / "dvc")
    sh([dvc, "remote", "add", "-d", "local", str(tmp_path / "remote")], project)
    named = ["catalog@fixture", "clean@fixture"]
    assert push_stages(project, named) > 0
    # `dvc status -c`: what the remote lacks, as {path: "new"} (in sync: not listed)
    cloud = json.loads(sh([dvc, "status", "-c", "--json"], project).stdout or "{}")
    lacking = " ".join(sorted(cloud))
    assert "data/catalogs/fixture" not in lacking and "data/curated/fixture" not in lacking, cloud
    assert "data/indexes/fixture/bm25" in lacking, cloud  # not named: only in the local cache

    before = _snapshot(project)
    for d in OUT_DIRS[:2]:
        shutil.rmtree(project / d)
    shutil.rmtree(project / ".dvc" / "cache")
    sh([dvc, "pull", *named], project)
    assert {k: v for k, v in _snapshot(project).items() if k.startswith(tuple(OUT_DIRS[:2]))} == \
        {k: v for k, v in before.items() if k.startswith(tuple(OUT_DIRS[:2]))}
