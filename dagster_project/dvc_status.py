"""The status of one stage, asked of a DVC index loaded once in the orchestrating process.

``dvc status <stage>`` in a subprocess loads the whole project first (``dvc.yaml`` with its ``foreach``
expansions, the ~4 MB ``dvc.lock``): ~16 s for an answer that then takes 0.3 s. A batch run (``make run``) asks
it for each costly stage whose upstream stage re-ran (in a fresh clone, all of them), and leaves ``dvc.lock``
untouched until its end, so one index serves every question of the run. The index is kept while neither
``dvc.yaml`` nor ``dvc.lock`` changes; the answer is ``Stage.status()``, the call ``dvc status`` makes.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

_cached: tuple[tuple, Any, dict[str, Any]] | None = None


def _files_key(project: Path) -> tuple:
    out = []
    for name in ("dvc.yaml", "dvc.lock", "params.yaml"):
        f = project / name
        st = f.stat() if f.is_file() else None
        out.append((name, st.st_mtime_ns, st.st_size) if st else (name, None, None))
    return tuple(out)


def stage_status(project: str | Path, stage: str) -> list:
    """What changed for ``stage`` (``dvc status``'s list for it; empty when it is current)."""
    global _cached
    project = Path(project).resolve()
    key = (str(project), _files_key(project))
    with contextlib.chdir(project):  # DVC reads paths relative to the cwd, as its CLI runs
        if _cached is None or _cached[0] != key:
            from dvc.repo import Repo

            repo = Repo(str(project))
            _cached = (key, repo, {s.addressing: s for s in repo.index.stages})
        _, repo, stages = _cached
        if stage not in stages:
            raise KeyError(f"no stage {stage!r} in {project / 'dvc.yaml'}")
        with repo.lock:
            return stages[stage].status().get(stage, [])
