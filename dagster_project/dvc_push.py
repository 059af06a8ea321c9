"""``dvc push`` of many stages' outputs with one read of ``dvc.yaml`` and ``dvc.lock``.

``dvc push a b c ...`` collects each stage-name target on its own, and each collection parses the project
again (``dvc.yaml`` with its ``foreach`` expansions and the ~1.7 MB ``dvc.lock``, ~6 s on 2 cores): at the end
of a fresh clone's ``make run`` (~150 stages) that was over 20 minutes of parsing before a byte moved. Here the
stages are looked up in the project's index, loaded once, and DVC's own push then runs over them (same
remote, same objects, same errors for outputs missing from the cache).

``python -m dagster_project.dvc_push STAGE...`` (run in the project directory) prints the number of files
pushed.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path


def push_stages(project: str | Path, targets: Sequence[str]) -> int:
    """Push the outputs of ``targets`` (stage names, ``foreach`` items as ``name@key``; a path is collected
    as DVC collects it) of the DVC project at ``project`` to its default remote; returns the files pushed."""
    from dvc.repo import Repo
    from dvc.repo.stage import StageInfo

    with contextlib.chdir(project), Repo(str(project)) as repo:  # targets are read relative to the cwd, as DVC's
        by_name = {stage.addressing: stage for stage in repo.index.stages}  # dvc.yaml and dvc.lock read once
        loader = repo.stage
        collect, collect_granular = loader.collect, loader.collect_granular

        def plain(args: tuple, kwargs: dict) -> bool:  # a bare name: no deps, recursion, graph or glob asked
            return not args and not any(kwargs.values())

        def collect_one(target=None, *args, **kwargs):  # what push's index_from_targets asks for each target
            if target in by_name and plain(args, kwargs):
                return [by_name[target]]
            return collect(target, *args, **kwargs)

        def collect_granular_one(target=None, *args, **kwargs):
            if target in by_name and plain(args, kwargs):
                return [StageInfo(by_name[target])]
            return collect_granular(target, *args, **kwargs)

        loader.collect, loader.collect_granular = collect_one, collect_granular_one  # this Repo only
        return int(repo.push(targets=list(targets)) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m dagster_project.dvc_push STAGE...", file=sys.stderr)
        return 2
    print(f"{push_stages(Path.cwd(), args)} file(s) pushed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
