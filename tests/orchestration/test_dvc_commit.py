"""The end-of-run commit records many stages with one read and one write of dvc.lock (``dvc commit -f a b ...``
rewrote it once per stage, reloading the project each time: over ten minutes at the end of a fresh clone's make
run; collecting each target on its own still parsed the 4 MB lock once per stage: ~10 min for ~130 stages)."""

from __future__ import annotations

import subprocess

import pytest
from orch_helpers import BIN, make_dvc_project

pytestmark = pytest.mark.integration

STAGES = ["make@a", "make@b", "make@c", "make@d", "copy"]
DVC_YAML = {
    "stages": {
        "make": {"foreach": ["a", "b", "c", "d"],
                 "do": {"cmd": "echo ${item} > out/${item}.txt", "outs": ["out/${item}.txt"]}},
        "copy": {"cmd": "cat out/a.txt out/b.txt > joined.txt", "deps": ["out/a.txt", "out/b.txt"],
                 "outs": [{"joined.txt": {"cache": False}}]},
    }
}


def _run_commands(project):
    (project / "out").mkdir()
    for item in "abcd":
        (project / "out" / f"{item}.txt").write_text(f"{item}\n")
    (project / "joined.txt").write_text("a\nb\n")


def _status(project) -> str:
    return subprocess.run([str(BIN / "dvc"), "status", "-q"], cwd=project, capture_output=True, text=True).returncode


def test_commit_stages_writes_the_lock_once_and_leaves_every_stage_current(tmp_path, monkeypatch):
    from dvc.dvcfile import Lockfile

    from dagster_project.dvc_commit import commit_stages

    project = make_dvc_project(tmp_path / "p", DVC_YAML, {}, copy_code=False)
    _run_commands(project)
    assert _status(project) != 0, "the stages ran outside DVC: stale before the commit"
    writes, reads = [], []
    real_load = Lockfile._load
    monkeypatch.setattr(Lockfile, "_load", lambda self, *a, **kw: (reads.append(1), real_load(self, *a, **kw))[1])
    real = Lockfile.dump_stages
    monkeypatch.setattr(Lockfile, "dump_stages", lambda self, stages, **kw: (writes.append(len(stages)),
                                                                              real(self, stages, **kw))[1])
    assert sorted(commit_stages(project, STAGES)) == sorted(STAGES)
    assert writes == [len(STAGES)], f"dvc.lock written {len(writes)} times for {len(STAGES)} stages"
    assert len(reads) <= 2, f"dvc.lock parsed {len(reads)} times for {len(STAGES)} stages (collect once, merge once)"
    assert _status(project) == 0, "every committed stage is current"
    assert (project / ".dvc" / "cache").is_dir() and any((project / ".dvc" / "cache").rglob("*")), \
        "a cached output is in the DVC cache, as `dvc commit` puts it"


def test_the_resource_commits_through_it_and_a_bad_stage_fails_naming_it(tmp_path):
    import dagster as dg

    from dagster_project.resources import DvcResource

    project = make_dvc_project(tmp_path / "p", DVC_YAML, {}, copy_code=False)
    _run_commands(project)
    DvcResource(project_dir=str(project)).commit(STAGES)
    assert _status(project) == 0
    with pytest.raises(dg.Failure, match="nosuch"):
        DvcResource(project_dir=str(project)).commit(["nosuch"])
