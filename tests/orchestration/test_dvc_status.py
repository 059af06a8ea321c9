"""A stage's status from the index loaded once in the orchestrating process is ``dvc status``'s."""

from __future__ import annotations

import json
import subprocess

import pytest
from orch_helpers import BIN, make_dvc_project
from test_dvc_commit import DVC_YAML, STAGES, _run_commands

pytestmark = pytest.mark.integration


def _cli_status(project, stage: str) -> list:
    out = subprocess.run([str(BIN / "dvc"), "status", "--json", stage], cwd=project, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out[out.find("{"):]).get(stage, [])


def test_stage_status_agrees_with_dvc_status_and_follows_the_lock(tmp_path):
    from dagster_project.dvc_commit import commit_stages
    from dagster_project.dvc_status import stage_status

    project = make_dvc_project(tmp_path / "p", DVC_YAML, {}, copy_code=False)
    _run_commands(project)
    for stage in STAGES:  # never run through DVC: every stage stale, as the CLI says
        assert stage_status(project, stage) == _cli_status(project, stage) != []
    commit_stages(project, STAGES)  # the lock changed: the cached index is not reused
    for stage in STAGES:
        assert stage_status(project, stage) == _cli_status(project, stage) == []
    (project / "out" / "a.txt").write_text("changed\n")  # an upstream output changed: its downstream is stale
    assert stage_status(project, "copy") == _cli_status(project, "copy") != []
    assert stage_status(project, "make@c") == []
    with pytest.raises(KeyError, match="nosuch"):
        stage_status(project, "nosuch")
