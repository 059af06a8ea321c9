"""The UI path: dagster-webserver on the fixture project, a run launched through its GraphQL API."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from orch_helpers import BIN, REPO, env_for

pytestmark = pytest.mark.integration

LAUNCH = """
mutation Launch($executionParams: ExecutionParams!) {
  launchRun(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message stack }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
    ... on PipelineNotFoundError { message }
  }
}"""
RUN_STATUS = """query Run($runId: ID!) { runOrError(runId: $runId) { __typename ... on Run { status } } }"""
WORKSPACE = """query { workspaceOrError { __typename ... on Workspace {
  locationEntries { name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gql(port: int, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        out = json.loads(resp.read())
    assert "errors" not in out, out
    return out["data"]


def _wait(predicate, timeout: float, what: str, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"webserver exited early:\n{log.read_text()[-4000:]}"
        try:
            value = predicate()
            if value:
                return value
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")


def _stop(proc: subprocess.Popen) -> int:
    """SIGINT to the whole process group (the webserver and its code server), then escalate."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            return proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                return proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                return proc.wait()
    return proc.returncode


def test_launch_run_through_graphql(pipeline, tmp_path: Path) -> None:
    # Dagster's default coordinator queues runs for the daemon (`dagster dev` starts one); with the
    # webserver alone, launch runs directly.
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\n"
        "run_coordinator:\n  module: dagster.core.run_coordinator\n  class: DefaultRunCoordinator\n")
    port = _free_port()
    log = tmp_path / "webserver.log"
    env = env_for(pipeline.project, DAGSTER_HOME=str(home))
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(BIN / "dagster-webserver"), "-m", "dagster_project", "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        def loaded():
            entries = _gql(port, WORKSPACE)["workspaceOrError"]["locationEntries"]
            return entries if entries and all(e["loadStatus"] == "LOADED" for e in entries) else None

        entries = _wait(loaded, 120, "the code location to load", proc, log)
        assert entries[0]["name"] == "dagster_project"
        assert entries[0]["locationOrLoadError"]["__typename"] == "RepositoryLocation", entries

        params = {"executionParams": {
            "selector": {"repositoryLocationName": "dagster_project", "repositoryName": "__repository__",
                         "pipelineName": "toolret_all", "assetSelection": [{"path": ["catalog", "fixture"]}],
                         "assetCheckSelection": []},
            "runConfigData": {}, "mode": "default",
        }}
        launched = _gql(port, LAUNCH, params)["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]

        def finished():
            status = _gql(port, RUN_STATUS, {"runId": run_id})["runOrError"]["status"]
            return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

        status = _wait(finished, 180, f"run {run_id}", proc, log)
        assert status == "SUCCESS", log.read_text()[-4000:]
    finally:
        rc = _stop(proc)
    assert rc in (0, -signal.SIGINT, 130), f"unclean shutdown ({rc}):\n{log.read_text()[-3000:]}"

    instance = dg.DagsterInstance.from_config(str(home))
    record = instance.get_latest_materialization_event(dg.AssetKey(["catalog", "fixture"]))
    assert record is not None and record.run_id == run_id
    assert "dvc/md5/data/catalogs/fixture" in record.asset_materialization.metadata
