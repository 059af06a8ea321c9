"""Run a cache worker script, SIGKILL it once its first answer is on disk, and hand back what landed."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from toolret.llm.cache import read_records

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def kill_after_first_record(worker: str, cache: Path, *args: str) -> tuple[list[dict], ModuleType]:
    """Start ``tests/llm/<worker>.py cache *args``, kill -9 it after the first cache line, and return the
    records that landed and the worker module (its PROMPTS and PARAMS)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, str(HERE / f"{worker}.py"), str(cache), *args], env=env)
    # generous: on a loaded 2-core box the worker's imports and first answer took over 120 s (0 records landed)
    started, deadline = time.time(), time.time() + 900
    wrote = False
    try:
        while time.time() < deadline and proc.poll() is None:
            if cache.exists() and cache.read_bytes().count(b"\n") >= 1:
                wrote = True
                break
            time.sleep(0.01)
        if proc.poll() is None:  # a finished worker is reaped: its pid may be reused
            os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, "worker finished before it could be killed"
    assert wrote, f"worker {worker} wrote no cache record in {time.time() - started:.0f} s"
    sys.path.insert(0, str(HERE))
    try:
        module = importlib.import_module(worker)
    finally:
        sys.path.remove(str(HERE))
    return read_records(cache)[0], module
