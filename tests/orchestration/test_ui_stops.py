"""`make ui` stops on Ctrl-C (SIGINT to its process group, as a terminal sends it), on SIGINT to its process
group when started by a script (which leaves SIGINT ignored in a background command: `timeout -s INT`,
`kill -INT -- -<pgid>`), or on SIGTERM to `make` (what `kill <pid>` sends): within 10 s no process it
started is left, `dagster dev`'s webserver, daemon and code server and the MLflow UI server (and its
workers) included. (SIGINT to `make` alone cannot be honoured: GNU make then waits for its recipe.)"""

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

import psutil
import pytest

from orch_helpers import REPO

pytestmark = pytest.mark.integration

STARTUP_S = 180  # both UIs answering and the code location loaded (2 busy cores: allow minutes)
STOP_S = 10
WORKSPACE = """query { workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus } } } }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, body: bytes | None = None) -> bytes:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read()


def _location_loaded(port: int) -> bool:
    out = json.loads(_get(f"http://127.0.0.1:{port}/graphql", json.dumps({"query": WORKSPACE}).encode()))
    entries = out["data"]["workspaceOrError"]["locationEntries"]
    return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _alive(p: psutil.Process) -> bool:
    try:  # is_running() also checks the create time: a reused pid is not ours
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _describe(procs) -> str:
    out = []
    for p in procs:
        try:
            out.append(f"{p.pid} {' '.join(p.cmdline())[:160]}")
        except psutil.Error:
            out.append(str(p.pid))
    return "\n".join(out)


@pytest.mark.parametrize("how", ["sigint-group", "sigint-group-from-script", "sigterm-make"])
def test_make_ui_stops_every_process_within_10s(tmp_path: Path, how: str) -> None:
    dagster_port, mlflow_port = _free_port(), _free_port()
    mlflow_dir = tmp_path / "mlflow"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TOOLRET_PROJECT_DIR")}
    # nothing lands in the repository's stores: the Dagster instance, the MLflow store the UI serves and the
    # one `toolret.tracking.ui` and the code location write to are the test's
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{mlflow_dir / 'mlflow.db'}"
    # `make ui` as typed, on free ports; `-o`: the venv and the DVC remote are set up already (a Makefile
    # newer than the venv's stamp would otherwise reinstall it)
    cmd = ["make", "--no-print-directory", "-o", ".venv/.toolret-installed", "-o", ".dvc/config.local", "ui",
           f"DAGSTER_PORT={dagster_port}", f"MLFLOW_PORT={mlflow_port}", f"MLFLOW_DIR={mlflow_dir}",
           f"DAGSTER_HOME={tmp_path / 'dagster_home'}"]
    log = tmp_path / "make_ui.log"
    with open(log, "w") as out:
        # its own process group, as a shell with job control runs a foreground command, and the SIGINT
        # disposition a terminal gives it (default) or a script's `&` does (ignored)
        sigint = signal.SIG_IGN if how == "sigint-group-from-script" else signal.SIG_DFL

        def dispositions() -> None:  # and SIGTERM as a terminal gives it, whatever this test inherited: a runner
            signal.signal(signal.SIGINT, sigint)  # started in the background may ignore SIGTERM, and GNU make
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # keeps a signal ignored that was ignored at its start

        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=dispositions)
    make = psutil.Process(proc.pid)
    seen: dict[int, psutil.Process] = {}

    def collect() -> None:
        for p in [q for q in seen.values() if _alive(q)] + [make]:
            for q in _tree(p):
                seen.setdefault(q.pid, q)

    try:
        deadline = time.monotonic() + STARTUP_S
        waiting = {"MLflow UI": lambda: _get(f"http://127.0.0.1:{mlflow_port}/health"),
                   "Dagster UI": lambda: _get(f"http://127.0.0.1:{dagster_port}/server_info"),
                   "code location": lambda: _location_loaded(dagster_port)}
        while waiting:
            assert proc.poll() is None, f"make ui exited early ({proc.returncode}):\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, (f"not up after {STARTUP_S} s: {sorted(waiting)}\n"
                                                 f"{log.read_text()[-4000:]}")
            for what, probe in list(waiting.items()):
                try:
                    if probe():
                        del waiting[what]
                except (urllib.error.URLError, ConnectionError, OSError, KeyError, ValueError):
                    pass
            time.sleep(1)
        collect()
        names = " ".join(" ".join(p.cmdline()) for p in seen.values() if _alive(p))
        assert "dagster" in names and "mlflow" in names, _describe(seen.values())

        if how.startswith("sigint-group"):  # Ctrl-C in the terminal
            os.killpg(proc.pid, signal.SIGINT)
        else:  # `kill <pid of make>`
            os.kill(proc.pid, signal.SIGTERM)
        stop_deadline = time.monotonic() + STOP_S
        while time.monotonic() < stop_deadline:
            proc.poll()
            collect()  # a process started while stopping counts too
            if not any(_alive(p) for p in seen.values()):
                break
            time.sleep(0.2)
        left = [p for p in seen.values() if _alive(p)]
        assert not left, (f"still running {STOP_S} s after {how}:\n{_describe(left)}\n"
                          f"make ui log:\n{log.read_text()[-3000:]}")
    finally:
        collect()
        # the process groups led by a process of ours that is still running (a pid of a dead one may be reused)
        groups = set()
        for p in seen.values():
            try:
                if _alive(p) and os.getpgid(p.pid) in seen:
                    groups.add(os.getpgid(p.pid))
            except OSError:
                pass
        for p in seen.values():
            if _alive(p):
                try:
                    p.kill()
                except psutil.Error:
                    pass
        for g in groups - {os.getpgrp()}:
            try:
                os.killpg(g, signal.SIGKILL)
            except OSError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
