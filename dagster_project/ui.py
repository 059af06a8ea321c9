"""``make ui``: the MLflow UI server and ``dagster dev``, started together and stopped together.

Run as a script, ``python dagster_project/ui.py`` (standard library only: it does not load the code
location, which ``dagster dev`` serves in its own processes). It starts

* ``mlflow ui --backend-store-uri sqlite:///<mlflow-dir>/mlflow.db --default-artifact-root <mlflow-dir>/artifacts``
* ``dagster dev -m dagster_project`` with ``TOOLRET_MLFLOW_UI_URL`` naming that MLflow UI,

each in its own session (its own process group), so the terminal's Ctrl-C reaches this launcher only.
On SIGINT, SIGTERM or SIGHUP (or when either server exits) it stops both: SIGINT to ``dagster dev``'s
group (its graceful shutdown), SIGTERM to MLflow's, then, after ``--grace`` seconds, SIGKILL to both
groups and to every descendant seen before the stop (one that moved to a session of its own included).
The shell recipe it replaces (``mlflow ui &``, ``trap "kill $MLF"``, ``dagster dev``) did not: SIGTERM to
``make`` (which make passes to its recipe shell only), or a SIGINT that a script's ``&`` leaves ignored, never
reached ``dagster dev``, and the trap waited for it to exit. (SIGINT to ``make`` alone cannot work: GNU make
passes it on to nobody and waits for its recipe.)
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _children_map() -> dict[int, list[int]]:
    """``{ppid: [pid, ...]}`` of every process (``/proc``)."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
        out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid``."""
    tree = _children_map()
    seen: set[int] = set()
    todo = list(tree.get(pid, ()))
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(tree.get(p, ()))
    return seen


def _started(pid: int) -> str | None:
    """The start time of a running ``pid`` (``/proc/<pid>/stat``), ``None`` once it has ended (a zombie too:
    its parent reaps it); with the pid, it names a process (a pid is reused, not with the same start time)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # state is field 3, starttime field 22
    return None if fields[0] in ("Z", "X") else fields[19]


def _snapshot(pids) -> dict[int, str]:
    return {pid: t for pid in pids if (t := _started(pid)) is not None}


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(procs: dict[str, subprocess.Popen], grace: float, first: dict[str, int]) -> None:
    """Stop ``procs`` (each the leader of its own process group) and all their descendants within
    ``grace`` seconds plus a SIGKILL: ``first[name]`` to each group, then SIGKILL to what is left."""
    seen = _snapshot({p.pid for p in procs.values()}.union(*(descendants(p.pid) for p in procs.values())))
    for name, p in procs.items():
        _signal_group(p.pid, first.get(name, signal.SIGTERM))

    def left() -> list[int]:
        return sorted(pid for pid, t in seen.items() if _started(pid) == t)

    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for p in procs.values():
            if p.poll() is None:  # a process started while stopping counts too
                seen.update({pid: t for pid, t in _snapshot(descendants(p.pid)).items() if pid not in seen})
        if not left():
            break
        time.sleep(0.1)
    stuck = left()
    if stuck:
        print(f"make ui: {len(stuck)} processes still running after {grace:g} s, killed: "
              + "; ".join(f"{pid} {_cmdline(pid)}" for pid in stuck), file=sys.stderr, flush=True)
    for p in procs.values():
        _signal_group(p.pid, signal.SIGKILL)
    for pid in stuck:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for p in procs.values():
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def commands(args: argparse.Namespace) -> dict[str, list[str]]:
    bin_dir = Path(sys.executable).parent
    store = Path(args.mlflow_dir).resolve()
    return {
        "mlflow": [str(bin_dir / "mlflow"), "ui", "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
                   "--default-artifact-root", str(store / "artifacts"), "-h", args.host, "-p", str(args.mlflow_port)],
        "dagster": [str(bin_dir / "dagster"), "dev", "-m", "dagster_project", "-h", args.host,
                    "-p", str(args.dagster_port)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The MLflow UI and `dagster dev`, stopped together (make ui).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--mlflow-port", type=int, default=5000)
    parser.add_argument("--dagster-port", type=int, default=3000)
    parser.add_argument("--mlflow-dir", default="data/mlflow", help="the MLflow store (mlflow.db, artifacts/)")
    parser.add_argument("--grace", type=float, default=6.0,
                        help="seconds the servers get to stop before SIGKILL (default 6)")
    args = parser.parse_args(argv)

    received: list[int] = []

    def on_signal(sig: int, _frame) -> None:
        received.append(sig)

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    (Path(args.mlflow_dir) / "artifacts").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TOOLRET_MLFLOW_UI_URL": f"http://{args.host}:{args.mlflow_port}"}
    procs: dict[str, subprocess.Popen] = {}
    rc = 0
    try:
        for name, cmd in commands(args).items():
            if received:
                break
            # own session: the terminal's Ctrl-C reaches this launcher only, which stops the servers
            procs[name] = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        while not received:
            ended = [(n, p.returncode) for n, p in procs.items() if p.poll() is not None]
            if ended:
                name, rc = ended[0]
                print(f"make ui: {name} exited ({rc}); stopping the other server", file=sys.stderr, flush=True)
                break
            time.sleep(0.2)
    finally:
        for sig in STOP_SIGNALS:  # a second Ctrl-C while stopping changes nothing: stop() ends with SIGKILL
            signal.signal(sig, signal.SIG_IGN)
        stop(procs, args.grace, {"dagster": signal.SIGINT, "mlflow": signal.SIGTERM})
    if received:  # end as the signal would have, so `make` reports it (e.g. "Interrupt")
        signal.signal(received[0], signal.SIG_DFL)
        os.kill(os.getpid(), received[0])
        return 128 + received[0]
    return rc or 0


if __name__ == "__main__":
    raise SystemExit(main())
