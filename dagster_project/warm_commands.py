"""Stage commands of the form ``toolret ...`` run without paying the interpreter's start each time.

A fresh ``toolret`` process spends 5-15 s on imports before it does anything (torch, transformers, Great
Expectations, the registered methods) -- for a stage whose work takes seconds that is most of its cost, and a
``make run`` from an empty cache runs ~190 of them. Here a warm server (``python -m
dagster_project.warm_commands``, one per orchestrating process, started at its first command) imports those
modules once; each command is a child it forks: a process of its own (its own exit code, output and memory; a
crash or ``sys.exit`` touches nothing else) that starts with the imports done. The server is single-threaded
and never runs the code it imported, so no thread pool exists when it forks.

Only a command that is exactly ``toolret ARGS`` (no shell syntax) is run this way; anything else goes to bash.
``TOOLRET_WARM_COMMANDS=0`` turns it off.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import select
import shlex
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

# imported once by the server (whatever fails to import there is left to the child, which reports it)
PRELOAD = ("toolret.cli", "toolret.registry", "torch", "transformers", "sentence_transformers", "bm25s",
           "great_expectations", "toolret.catalog.validation", "toolret.evaluation", "toolret.pipeline")
_SHELL = set(";|&<>$`(){}*?[]~!\n\\\"'")
_server: subprocess.Popen | None = None
_lock = threading.Lock()


def warm_argv(cmd: str) -> list[str] | None:
    """The CLI arguments of ``cmd`` if it is exactly ``toolret ARGS`` without shell syntax, else ``None``."""
    if os.environ.get("TOOLRET_WARM_COMMANDS", "1") == "0" or any(c in _SHELL for c in cmd):
        return None
    argv = shlex.split(cmd)
    return argv[1:] if argv and argv[0] == "toolret" else None


# ---------------------------------------------------------------------------------------------- the server
def _child(argv: list[str], cwd: str, env: dict[str, str], log_path: str) -> int:
    """In the forked child: output to ``log_path``, the command's cwd and environment, then the CLI."""
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, errors="replace", closefd=False)  # noqa: SIM115 - the process's own
    sys.stderr = open(2, "w", buffering=1, errors="replace", closefd=False)  # noqa: SIM115
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["toolret", *argv]
    try:
        from toolret.cli import main

        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - reported as the process would, exit 1
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()
    return code or 0


def serve() -> None:
    """Read ``{"argv", "cwd", "env", "log"}`` lines on stdin; fork one child per line; answer ``{"rc"}``."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass
    try:  # the registered methods and plugins, as every command's parser loads them
        from toolret.cli import build_parser

        build_parser()
    except Exception:  # noqa: BLE001
        pass
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_child(request["argv"], request["cwd"], request["env"], request["log"]))
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        out.flush()


# ---------------------------------------------------------------------------------------------- the client
class WarmUnavailable(RuntimeError):
    """The warm server could not be started: the caller runs the command the ordinary way."""


def _start(cwd: str | Path, env: Mapping[str, str]) -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        code_root = str(Path(__file__).resolve().parents[1])  # where dagster_project is, whatever the cwd
        server_env = {**env, "PYTHONPATH": os.pathsep.join(p for p in (code_root, env.get("PYTHONPATH")) if p)}
        _server = subprocess.Popen([sys.executable, "-m", "dagster_project.warm_commands"], cwd=str(cwd),
                                   env=server_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                   stderr=subprocess.DEVNULL, bufsize=1)
        ready = _server.stdout.readline()
        if not ready.strip():
            _server = None
            raise WarmUnavailable("the warm command server did not start")
        atexit.register(_server.kill)
    return _server


def run_warm(argv: list[str], cwd: str | Path, env: Mapping[str, str], log_path: Path,
             on_line: Callable[[str], None], poll_s: float = 0.2) -> int:
    """Run ``toolret *argv`` as a child of the warm server; its output (stdout and stderr merged) goes to
    ``log_path`` and, line by line, to ``on_line``. Returns its exit code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_bytes(b"")
    with _lock:
        server = _start(cwd, env)
        server.stdin.write(json.dumps({"argv": list(argv), "cwd": str(cwd), "env": dict(env),
                                       "log": str(log_path)}) + "\n")
        server.stdin.flush()
        pending, rc = "", None
        with open(log_path, encoding="utf-8", errors="replace") as f:
            while rc is None:
                ready, _, _ = select.select([server.stdout], [], [], poll_s)
                if ready:
                    answer = server.stdout.readline()
                    if not answer:  # the server died (killed): the command did not finish
                        rc = -9
                    else:
                        rc = json.loads(answer)["rc"]
                pending += f.read()
                *lines, pending = pending.split("\n")
                for line in lines:
                    on_line(line)
        if pending:
            on_line(pending)
    return rc


__all__ = ["PRELOAD", "WarmUnavailable", "run_warm", "serve", "warm_argv"]


if __name__ == "__main__":
    serve()
