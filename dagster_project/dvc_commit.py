"""``dvc commit -f`` of many stages with one read and one write of ``dvc.lock``.

``dvc commit -f a b c ...`` commits its targets one at a time, and each one reloads the project (``dvc.yaml``
with its ``foreach`` expansions, the ~4 MB ``dvc.lock``) and rewrites ``dvc.lock``: at the end of a fresh
clone's ``make run`` (~200 stages) that was over ten minutes of bookkeeping. Here the stages are collected
from the project's index, loaded once (collecting each target on its own parses ``dvc.lock`` again for every
one: ~10 min for ~130 stages), and saved (their dependencies' and outputs' hashes, cached outputs moved to the
cache) as ``dvc commit -f`` does, under the repository's lock, and ``dvc.lock`` is written once for them all.

``python -m dagster_project.dvc_commit STAGE...`` (run in the project directory) prints the stages committed.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path


def commit_stages(project: str | Path, targets: Sequence[str]) -> list[str]:
    """Commit ``targets`` (stage names, ``foreach`` items as ``name@key``) of the DVC project at ``project``;
    returns the stages recorded in ``dvc.lock``."""
    from dvc.repo import Repo, locked

    @locked
    def _commit(repo: Repo) -> list[str]:
        from dvc.repo.stage import StageInfo

        by_name = {stage.addressing: stage for stage in repo.index.stages}  # dvc.yaml and dvc.lock read once
        stages = [info for target in targets
                  for info in ([StageInfo(by_name[target])] if target in by_name
                               else repo.stage.collect_granular(target))]  # a path, or a name DVC will refuse
        by_file: dict[str, tuple[object, list]] = {}
        for info in stages:
            info.stage.save()
            info.stage.commit(filter_info=info.filter_info, relink=True)
            by_file.setdefault(info.stage.dvcfile.path, (info.stage.dvcfile, []))[1].append(info.stage)
        for dvcfile, group in by_file.values():
            dvcfile.dump_stages(group, update_pipeline=False)  # one write of the lock file per dvc.yaml
        return [info.stage.addressing for info in stages]

    with contextlib.chdir(project), Repo(str(project)) as repo:  # targets are read relative to the cwd, as DVC's
        return _commit(repo)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m dagster_project.dvc_commit STAGE...", file=sys.stderr)
        return 2
    for name in commit_stages(Path.cwd(), args):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
