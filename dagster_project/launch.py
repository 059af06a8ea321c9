"""Run a job of a code location as the UI would, synchronously: ``python -m dagster_project.launch -j toolret_run``.

``make run`` / ``make paper`` use this instead of ``dagster job execute``. A run created by ``dagster job
execute`` carries no remote job origin: it shows on Dagster's Runs page only, not under its job in the
code location (the job's Runs tab and the overview timeline filter on the job name and the
``.dagster/repository`` tag, ``<repository>@<code location>``, which Dagster derives from that origin).
``dagster job launch`` does attach it, but hands the run to the instance's run coordinator, a
``QueuedRunCoordinator`` by default: without the daemon (``dagster dev`` runs one) the run waits in the
queue (QUEUED) until a daemon picks it up, and the command returns at once anyway.

So this entry loads the code location of ``-m <module>`` in this process, under the name
``dagster dev -m <module>`` gives it (the module name), creates the run from its remote job (the origin
and the repository tag come with it), executes it here, and exits 0 only if the run succeeded. No daemon,
no code server; the run bypasses the run queue, as ``dagster job execute`` did. ``$DAGSTER_HOME`` must be
set (the Makefile exports ``data/dagster_home``), so that ``make ui`` shows the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

# a launched run writes dvc.lock once, at its end (dagster_project.dvc_assets.BATCH_TAG)
RUN_TAGS = {"toolret/trigger": "launch", "toolret/dvc-lock": "batch"}
DEFAULT_UI_URL = "http://127.0.0.1:3000"


def _in_process_target(module: str, working_directory: str):
    """The workspace target of ``dagster dev -m <module>``, loaded in this process under the same name."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget, ModuleTarget

    (origin,) = ModuleTarget(module_name=module, attribute=None, working_directory=working_directory,
                             location_name=None).create_origins()
    return InProcessWorkspaceLoadTarget(InProcessCodeLocationOrigin(
        origin.loadable_target_origin, container_image=None, location_name=origin.location_name))


class LaunchError(Exception):
    """The job could not be started (no DAGSTER_HOME, code location error, unknown job)."""


def launch(job_name: str, module: str = "dagster_project", *, instance: Any = None,
           run_config: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
           working_directory: str | None = None) -> Any:
    """Create a run of ``job_name`` in the code location of ``module`` and execute it in this process.

    Returns the stored :class:`dagster.DagsterRun` once finished (its ``status`` says how it ended).
    ``instance`` defaults to the one of ``$DAGSTER_HOME``.
    """
    import dagster as dg
    from dagster._core.definitions.selector import JobSubsetSelector
    from dagster._core.execution.api import execute_run
    from dagster._core.workspace.context import WorkspaceProcessContext

    if instance is None:
        if not os.environ.get("DAGSTER_HOME"):
            raise LaunchError("DAGSTER_HOME is not set: the run would land in a throwaway instance that no UI "
                              "shows (the Makefile exports DAGSTER_HOME=data/dagster_home)")
        instance = dg.DagsterInstance.get()
    target = _in_process_target(module, working_directory or os.getcwd())
    with WorkspaceProcessContext(instance, target, version=dg.__version__, read_only=False) as process_context:
        workspace = process_context.create_request_context()
        (location_name,) = workspace.code_location_names
        if workspace.has_code_location_error(location_name):
            raise LaunchError(f"code location {location_name!r} failed to load:\n"
                              f"{workspace.get_code_location_error(location_name)}")
        location = workspace.get_code_location(location_name)
        repos = [r for r in location.get_repositories().values() if r.has_job(job_name)]
        if len(repos) != 1:
            known = sorted(j.name for r in location.get_repositories().values() for j in r.get_all_jobs())
            raise LaunchError(f"job {job_name!r} not found in code location {location_name!r} "
                              f"(jobs: {', '.join(known) or 'none'})")
        repo = repos[0]
        remote_job = location.get_job(JobSubsetSelector(location_name=location_name, repository_name=repo.name,
                                                        job_name=job_name, op_selection=None))
        run_config = dict(run_config or {})
        plan = location.get_execution_plan(remote_job, run_config, step_keys_to_execute=None, known_state=None,
                                           instance=instance)
        run = instance.create_run(
            job_name=job_name,
            run_id=None,
            run_config=run_config,
            resolved_op_selection=None,
            step_keys_to_execute=plan.execution_plan_snapshot.step_keys_to_execute,
            op_selection=None,
            status=None,
            root_run_id=None,
            parent_run_id=None,
            tags={**remote_job.tags, **RUN_TAGS, **(tags or {})},
            job_snapshot=remote_job.job_snapshot,
            execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=remote_job.parent_job_snapshot,
            remote_job_origin=remote_job.get_remote_origin(),
            job_code_origin=remote_job.get_python_origin(),
            asset_selection=None,
            asset_check_selection=None,
            asset_graph=repo.asset_graph,
        )
        recon_job = location.get_reconstructable_job(repo.name, job_name)
    execute_run(recon_job, run, instance, raise_on_error=False)
    done = instance.get_run_by_id(run.run_id)
    _close_batch(run.run_id, done.status == dg.DagsterRunStatus.SUCCESS)
    return done


def _close_batch(run_id: str, succeeded: bool) -> None:
    """Record the stages the run ran (its successful steps, even in a failed run) in dvc.lock, in one call, push
    them to the DVC remote, and keep the graph's status for the next run (:func:`dvc_assets.close_run`)."""
    from dagster_project.dvc_assets import close_run, default_project_dir
    from dagster_project.resources import DvcResource

    root = os.environ.get("TOOLRET_PROJECT_DIR") or str(default_project_dir())
    stages = close_run(DvcResource(project_dir=root), run_id, succeeded)
    if stages:
        print(f"dvc.lock: {len(stages)} stage(s) recorded (one dvc commit) and pushed to the DVC remote",
              file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dagster_project.launch",
        description="Run a job of a Dagster code location in this process, attached to the code location "
                    "(so the UI lists it under the job); exit 0 only if the run succeeded.")
    parser.add_argument("-j", "--job", required=True, help="job name, e.g. toolret_run")
    parser.add_argument("-m", "--module", default="dagster_project",
                        help="module of the code location, as in `dagster dev -m <module>` (default: %(default)s)")
    parser.add_argument("--config-json", default=None, help="run config as a JSON string")
    parser.add_argument("--tags", default=None, help="extra run tags as a JSON object")
    args = parser.parse_args(argv)

    from dagster import DagsterRunStatus
    from dagster._utils.interrupts import capture_interrupts

    try:
        run_config = json.loads(args.config_json) if args.config_json else None
        tags = json.loads(args.tags) if args.tags else None
    except ValueError as e:
        parser.error(f"invalid JSON: {e}")
    try:
        with capture_interrupts():
            run = launch(args.job, args.module, run_config=run_config, tags=tags)
    except LaunchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    ui = os.environ.get("TOOLRET_DAGSTER_UI_URL", DEFAULT_UI_URL).rstrip("/")
    where = f"run {run.run_id} of {run.job_name} ({run.remote_job_origin.repository_origin.get_label()})"
    if run.status == DagsterRunStatus.SUCCESS:
        print(f"{where} succeeded; in the Dagster UI (`make ui`): {ui}/runs/{run.run_id}")
        return 0
    print(f"error: {where} ended {run.status.value}; its events: {ui}/runs/{run.run_id} (`make ui`)",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["LaunchError", "launch", "main"]
