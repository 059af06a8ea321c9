"""Resources: DVC (runs stages with the project's own ``dvc``) and MLflow (plain ``mlflow``, no dagster-mlflow)."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_project.warm_commands import WarmUnavailable, run_warm, warm_argv

TELEMETRY_OFF = {
    "DVC_NO_ANALYTICS": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "GX_ANALYTICS_ENABLED": "false",
    "DAGSTER_DISABLE_TELEMETRY": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def stage_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for stage subprocesses: this interpreter's bin dir first on PATH (so the
    ``toolret`` and ``dvc`` entry points of the venv are found), telemetry and downloads off, numeric
    kernels pinned (:mod:`toolret.reproducibility`: the same bytes on every x86-64 machine)."""
    from toolret.reproducibility import pin_numeric_kernels

    env = dict(os.environ)
    pin_numeric_kernels(env)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    for k, v in TELEMETRY_OFF.items():
        env.setdefault(k, v)
    env.update(extra or {})
    return env


class RunState:
    """What one Dagster run knows of the DVC graph: the stale stages (``dvc status`` once, at the first
    step), which of them are current by ``dvc.lock`` (:mod:`dagster_project.current_by_lock`: only files
    missing in this clone, none needed by the run), and the stages it re-ran since. A step whose stage was
    current (or current by the lock) and none of whose upstream stages re-ran needs no ``dvc repro``.

    Kept as ``data/.orchestration/<run id>.json`` under a file lock, so that steps in other processes
    (a multiprocess executor) share it.
    """

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.stale: dict[str, Any] = data["stale"]
        self.ran: list[str] = data["ran"]
        self.uncommitted: list[str] = list(data.get("uncommitted", []))
        self.deferred: set[str] = set(data.get("deferred", []))
        self.build: set[str] = set(data.get("build", []))

    @classmethod
    def open(cls, project: Path, run_id: str, dvc: "DvcResource", log: Any = None,
             graph: "Mapping[str, tuple[Sequence[str], Sequence[str]]] | None" = None,
             in_run: "Sequence[str] | None" = None, pull: bool = False) -> "RunState":
        """``graph``: ``{stage: (upstream stages, outs)}`` of the whole project and ``in_run``: the stages this
        run materializes; without them no stage is taken as current by the lock. The status is the one the
        last run stored where nothing the graph reads changed since (:mod:`dagster_project.graph_snapshot`),
        else DVC's, after a ``dvc pull`` where ``pull`` (a batch run: ``make run``)."""
        import fcntl

        folder = project / "data" / ".orchestration"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{run_id}.json"
        with open(folder / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.is_file():
                from dagster_project import graph_snapshot

                start = time.perf_counter()
                stored = graph_snapshot.stored_status(project)
                if stored is not None:  # nothing the graph reads changed since the run that stored it
                    stale, how = stored, "kept from the last run: no file the graph reads changed since"
                else:
                    if pull:  # what the DVC remote has is restored first (an output there is not rebuilt)
                        dvc.run(["pull", "-q", "--allow-missing"], log=log, check=False)
                    stale, how = dvc.status(), "asked of DVC"
                data: dict[str, Any] = {"stale": stale, "ran": [], "status": how}
                if graph is not None:
                    from dagster_project.current_by_lock import plan

                    p = plan(stale, {s: tuple(g[0]) for s, g in graph.items()},
                             {s: tuple(g[1]) for s, g in graph.items()}, set(in_run if in_run is not None else graph),
                             lambda s: all((project / o).exists() for o in graph[s][1]))
                    data.update(deferred=sorted(p.deferred), build=sorted(p.build))
                if log is not None:
                    log.info(f"dvc status of the whole graph ({how}): {len(stale)} stale stage(s), "
                             f"{len(data.get('deferred', []))} of them current by dvc.lock (files this clone "
                             f"lacks and this run does not need), {len(data.get('build', []))} built because "
                             f"a stage of the run reads their missing outputs "
                             f"({time.perf_counter() - start:.1f} s, once for this run)")
                _write_json(path, data)
            data = json.loads(path.read_text(encoding="utf-8"))
        return cls(path, data)

    def reason(self, stage: str, upstream: Sequence[str]) -> str | None:
        """Why ``stage`` may need to run (``None``: current, or current by the lock)."""
        ran = [u for u in upstream if u in self.ran]
        if stage in self.stale and stage not in self.deferred:
            if stage in self.build:
                return ("its outputs are missing here and a stage of this run reads them (current by dvc.lock: "
                        "built, not changed)")
            return "stale at the run's start: " + describe_changes(self.stale[stage])
        return f"upstream stage(s) re-ran in this run: {', '.join(ran)}" if ran else None

    @classmethod
    def read(cls, project: Path, run_id: str) -> "RunState | None":
        path = project / "data" / ".orchestration" / f"{run_id}.json"
        if not path.is_file():
            return None
        return cls(path, json.loads(path.read_text(encoding="utf-8")))

    def mark_ran(self, stage: str, committed: bool = True) -> None:
        """``stage`` ran. A stage built only because its outputs were missing (:attr:`build`) is not a change:
        the stages reading it do not re-run because of it."""
        import fcntl

        with open(self.path.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if stage not in data["ran"] and stage not in data.get("build", []):
                data["ran"].append(stage)
            if not committed and stage not in data.setdefault("uncommitted", []):
                data["uncommitted"].append(stage)
            _write_json(self.path, data)
        self.ran, self.uncommitted = data["ran"], data.get("uncommitted", [])

    def committed(self) -> None:
        """The run's stages are in ``dvc.lock`` now."""
        data = json.loads(self.path.read_text(encoding="utf-8"))
        data["uncommitted"] = []
        _write_json(self.path, data)
        self.uncommitted = []


def _line_sink(log: Any, maxlen: int | None) -> tuple[collections.deque[str], Any]:
    """A command's output lines: the last ``maxlen`` kept, each non-blank one sent to ``log``."""
    tail: collections.deque[str] = collections.deque(maxlen=maxlen)

    def on_line(line: str) -> None:
        tail.append(line)
        if log is not None and line.strip():
            log.info(line)

    return tail, on_line


def _commit_backup(project: Path) -> Path:
    return project / "data" / ".orchestration" / "dvc.lock.before-commit"


def restore_interrupted_commit(project: Path) -> str | None:
    """Put back ``dvc.lock`` as it was before a ``dvc commit`` that did not return (killed mid-write, the lock
    may be truncated); what was done, or ``None`` where no commit was interrupted. The stages that commit would
    have recorded are found stale again and rerun (their outputs are there: cheap ones cost their command)."""
    backup = _commit_backup(project)
    if not backup.is_file():
        return None
    os.replace(backup, project / "dvc.lock")
    return f"dvc.lock put back from {backup.relative_to(project)} (the stages it would have recorded are stale again)"


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj), encoding="utf-8")
    os.replace(tmp, path)


def describe_changes(changes: Any) -> str:
    """``dvc status`` changes of one stage as one line: ``changed deps: a (modified), b (deleted); ...``."""
    parts = []
    for change in changes if isinstance(changes, list) else [changes]:
        if isinstance(change, dict):
            for kind, paths in change.items():
                if isinstance(paths, dict):
                    parts.append(f"{kind}: " + ", ".join(f"{p} ({h})" for p, h in sorted(paths.items())))
                else:
                    parts.append(str(kind))
        else:
            parts.append(str(change))
    return "; ".join(parts) or "stale"


class CostlyStageStale(dg.Failure):
    """A costly stage (LLM generation, training) whose committed outputs a run would regenerate."""


def costly_stale_failure(stage: str, changes: Any) -> CostlyStageStale:
    return CostlyStageStale(description=(
        f"costly stage `{stage}` is stale and `make run` does not regenerate committed costly outputs "
        f"(LLM generations, trained models) unasked. What changed: {describe_changes(changes)}. "
        f"If the change cannot alter its outputs (a refactor, a comment): `dvc commit -f {stage}`; to "
        f"regenerate it: `dvc repro {stage}` or `make paper` (or `make run ALLOW_COSTLY=1`)."),
        metadata={"stage": stage, "changes": dg.MetadataValue.json(changes)})


class DvcResource(dg.ConfigurableResource):
    """Runs DVC commands in the project directory.

    Attributes:
        project_dir: the DVC project (holds ``dvc.yaml``, ``params.yaml``, ``dvc.lock``).
        tail_lines: how many output lines a failure reports.
        allow_costly: run stale costly stages (``meta: costly``) whose outputs exist; off in ``make run``
            (a stale one stops the run naming what changed), on in ``make paper`` (``TOOLRET_ALLOW_COSTLY=1``).
    """

    project_dir: str
    tail_lines: int = 40
    allow_costly: bool = False

    def _dvc(self) -> list[str]:
        exe = Path(sys.executable).parent / "dvc"
        return [str(exe)] if exe.exists() else [sys.executable, "-m", "dvc"]

    def _stream(self, argv: list[str], log: Any, maxlen: int | None) -> tuple[int, str]:
        """Run ``argv`` in the project (stdout and stderr merged, line by line to ``log``): ``(rc, last lines)``."""
        tail, on_line = _line_sink(log, maxlen)
        env = stage_env({"TOOLRET_PROJECT_DIR": self.project_dir})  # the CLI targets this project
        proc = subprocess.Popen(argv, cwd=self.project_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", bufsize=1, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        for line in proc.stdout:
            on_line(line.rstrip("\n"))
        return proc.wait(), "\n".join(tail)

    def run(self, args: list[str], log: Any = None, check: bool = True, keep: str = "tail") -> tuple[int, str]:
        """Run ``dvc <args>`` streaming its output (stdout and stderr merged) line by line to ``log``.

        Returns:
            ``(returncode, last lines of output)``.

        Raises:
            dagster.Failure: on a non-zero exit when ``check``, with the output tail in its metadata.
        """
        return self._run_argv([*self._dvc(), *args], log, check, keep, serialize=True)

    def _run_argv(self, cmd: list[str], log: Any, check: bool, keep: str, serialize: bool = False
                  ) -> tuple[int, str]:
        """``serialize``: one DVC command at a time in this project, across the processes of a multiprocess
        run (``make run WORKERS=N``): DVC holds a repository lock while it works, and a second ``dvc`` that
        finds it taken fails instead of waiting. Stage commands of a batch run are not DVC's and run side by side."""
        import contextlib

        if log is not None:
            log.info(f"$ {' '.join(cmd)}  (cwd={self.project_dir})")
        with self._dvc_lock() if serialize else contextlib.nullcontext():
            rc, text = self._stream(cmd, log, self.tail_lines if keep == "tail" else None)
        if rc != 0 and check:
            raise dg.Failure(
                description=f"`{' '.join(cmd)}` exited with {rc}:\n{text}",
                metadata={"command": " ".join(cmd), "returncode": rc,
                          "output_tail": dg.MetadataValue.md(f"```\n{text}\n```")},
            )
        return rc, text

    @contextmanager
    def _dvc_lock(self):
        import fcntl

        folder = Path(self.project_dir) / "data" / ".orchestration"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".dvc-command.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def status(self, stages: Sequence[str] = ()) -> dict[str, Any]:
        """``dvc status --json [stages]``: ``{stage: [changes]}`` of every stale stage (current ones absent)."""
        _, text = self.run(["status", "--json", *stages], check=True, keep="all")
        start = text.find("{")
        try:
            return json.loads(text[start:]) if start >= 0 else {}
        except ValueError as e:
            raise dg.Failure(description=f"`dvc status --json` printed no JSON ({e}):\n{text[-2000:]}") from None

    def run_state(self, run_id: str, log: Any = None,
                  graph: "Mapping[str, tuple[Sequence[str], Sequence[str]]] | None" = None,
                  in_run: Sequence[str] | None = None, pull: bool = False) -> "RunState":
        """The run's view of the graph: one ``dvc status`` for the whole graph at the run's first step (kept
        in a file beside the Dagster home so every step of the run reads it), what of it is current by
        ``dvc.lock`` (``graph``, ``in_run``: :meth:`RunState.open`), and the stages the run re-ran."""
        return RunState.open(Path(self.project_dir), run_id, self, log, graph, in_run, pull)

    def run_command(self, stage: str, cmd: str, outs: Sequence[str], log: Any = None) -> None:
        """Run a stage's command as ``dvc repro`` would (its non-persistent outputs removed first), without
        DVC's per-stage bookkeeping: the run records it in ``dvc.lock`` afterwards, all stages in one
        ``dvc commit`` (:meth:`commit`)."""
        import shutil

        root = Path(self.project_dir)
        for out in outs:
            path = root / out
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        if log is not None:
            log.info(f"Running stage '{stage}' (its command; dvc.lock is written once, at the end of the run):")
            log.info(f"> {cmd}")
        rc, text = self._run_warm(stage, cmd, log)
        if rc is None:
            rc, text = self._stream(["bash", "-c", cmd], log, self.tail_lines)
        if rc != 0:
            raise dg.Failure(description=f"stage `{stage}`: `{cmd}` exited with {rc}:\n{text}",
                             metadata={"command": cmd, "returncode": rc,
                                       "output_tail": dg.MetadataValue.md(f"```\n{text}\n```")})

    def _run_warm(self, stage: str, cmd: str, log: Any) -> tuple[int | None, str]:
        """``toolret ...`` as a child of the run's warm server (:mod:`dagster_project.warm_commands`: imports
        done once per run): ``(rc, last lines)``; ``(None, "")`` for a command it does not take."""
        argv = warm_argv(cmd)
        if argv is None:
            return None, ""
        tail, on_line = _line_sink(log, self.tail_lines)
        logs = Path(self.project_dir) / "data" / ".orchestration" / "logs" / f"{stage.replace('/', '_')}.log"
        try:
            rc = run_warm(argv, self.project_dir, stage_env({"TOOLRET_PROJECT_DIR": self.project_dir}), logs, on_line)
        except WarmUnavailable:
            return None, ""
        return rc, "\n".join(tail)

    def commit(self, stages: Sequence[str], log: Any = None) -> None:
        """``dvc commit -f`` of ``stages`` with one read and one write of ``dvc.lock`` for them all
        (:mod:`dagster_project.dvc_commit`; DVC's own command rewrites the lock once per stage).

        DVC rewrites ``dvc.lock`` in place: a kill during that write leaves it truncated. The lock as it was is
        kept beside the run's state until the commit returns; the next run puts it back if it is still there
        (:func:`restore_interrupted_commit`)."""
        if not stages:
            return
        root = Path(self.project_dir)
        backup = _commit_backup(root)
        if (root / "dvc.lock").is_file():
            backup.parent.mkdir(parents=True, exist_ok=True)
            tmp = backup.with_name(backup.name + ".tmp")
            tmp.write_bytes((root / "dvc.lock").read_bytes())
            os.replace(tmp, backup)
        self._run_module("dagster_project.dvc_commit", stages, log, check=True)
        backup.unlink(missing_ok=True)

    def _run_module(self, module: str, args: Sequence[str], log: Any, check: bool) -> int:
        """``module``'s ``main`` on ``args`` in a fresh interpreter, in the project folder, one DVC command at
        a time (``dagster_project`` found where this file is, whatever the cwd); returns the exit status."""
        code_root = str(Path(__file__).resolve().parents[1])
        return self._run_argv([sys.executable, "-c", f"import sys; sys.path.insert(0, {code_root!r}); "
                               f"from {module} import main; sys.exit(main())", *args],
                              log, check=check, keep="tail", serialize=True)[0]

    def push(self, stages: Sequence[str], log: Any = None, check: bool = False) -> int:
        """``dvc push`` of ``stages``' outputs to the DVC remote with one read of the project for them all
        (:mod:`dagster_project.dvc_push`; DVC's own command parses ``dvc.lock`` again for every target).
        Returns the exit status (a failed push is reported, not raised, unless ``check``)."""
        if not stages:
            return 0
        return self._run_module("dagster_project.dvc_push", stages, log, check=check)

    def repro(self, stage: str, force: bool = False, log: Any = None) -> str:
        """``dvc repro --single-item <stage>`` (``--force`` to rerun an up-to-date stage)."""
        args = ["repro", "--single-item", stage]
        if force:
            args.append("--force")
        return self.run(args, log=log)[1]


def default_tracking_uri(project_dir: str | Path) -> str:
    """``$MLFLOW_TRACKING_URI`` or ``sqlite:///<project>/data/mlflow/mlflow.db``."""
    from toolret.tracking import default_tracking_uri as _uri

    return _uri(project_dir)


DEFAULT_MLFLOW_UI = "http://127.0.0.1:5000"  # where `make ui` serves the MLflow UI


class MlflowResource(dg.ConfigurableResource):
    """Logs evaluation runs, comparison reports and model versions with :mod:`toolret.tracking` (plain MLflow).

    Attributes:
        project_dir: the project (for the default store and dvc.lock look-ups).
        tracking_uri: MLflow store; empty = ``$MLFLOW_TRACKING_URI`` or the project's sqlite store.
        experiment: MLflow experiment of the evaluation runs.
        comparison_experiment: MLflow experiment of the per-dataset comparison runs (kept apart, so the
            evaluation runs table holds one kind of row).
        ui_url: base URL of the MLflow UI, for the run / model-version links in asset metadata
            (default ``$TOOLRET_MLFLOW_UI_URL`` or ``http://127.0.0.1:5000``).
    """

    project_dir: str
    tracking_uri: str = ""
    experiment: str = "toolret"
    comparison_experiment: str = "toolret-comparisons"
    ui_url: str = DEFAULT_MLFLOW_UI

    def uri(self) -> str:
        return self.tracking_uri or default_tracking_uri(self.project_dir)

    def experiment_id(self) -> str:
        from toolret.tracking import get_client, get_or_create_experiment

        return get_or_create_experiment(get_client(self.uri(), self.project_dir), self.experiment)

    def run_url(self, run_id: str, experiment_id: str | None = None) -> str:
        from toolret.tracking import run_url

        return run_url(self.ui_url, experiment_id or self.experiment_id(), run_id)

    def model_version_url(self, name: str, version: str | int) -> str:
        from toolret.tracking import model_version_url

        return model_version_url(self.ui_url, name, version)

    def log_evaluation_run(self, result_json: str | Path, per_query: str | Path | None, tags: dict[str, str]) -> str:
        from toolret.tracking import log_evaluation_run

        return log_evaluation_run(result_json, per_query, tags=tags, experiment=self.experiment,
                                  tracking_uri=self.uri(), project_dir=self.project_dir)

    def log_comparison_report(self, dataset: str, result_paths: list[str | Path], tags: dict[str, str]
                              ) -> dict[str, Any]:
        from toolret.tracking import log_comparison_report

        return log_comparison_report(dataset, result_paths, tags=tags, experiment=self.comparison_experiment,
                                     tracking_uri=self.uri(), project_dir=self.project_dir)

    def register_models(self, dataset: str | None = None) -> list[dict[str, Any]]:
        """Register the dataset's DVC model outputs in the MLflow model registry (idempotent per md5)."""
        from toolret.tracking import register_models

        return register_models(self.project_dir, dataset, tracking_uri=self.uri())


__all__ = ["CostlyStageStale", "DEFAULT_MLFLOW_UI", "DvcResource", "RunState", "costly_stale_failure", "describe_changes", "MlflowResource", "TELEMETRY_OFF", "stage_env", "default_tracking_uri"]
