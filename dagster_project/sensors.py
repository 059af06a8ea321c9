"""Raw-data sensor: notice new or changed dataset files and rebuild the affected catalogs.

It fingerprints each dataset's source folder (``params.yaml: source.root`` resolved against the
project, plus the ``source.beir`` user catalogs): relative path, size and mtime of every file
(``MANIFEST.tsv`` included), from a stat of each file (``os.scandir``; no file is read). A folder read
by several datasets (the six ToolBench groups share one; the ``toolbench-env-*`` groups also share the
12k-file tool environment) is fingerprinted once per tick. The cursor keeps the last fingerprints; a changed fingerprint requests a
run of that dataset's ``catalog`` asset with ``force: true``: ``source.root`` is a DVC dep of every catalog
stage, but a user catalog under ``source.beir`` may live anywhere, outside DVC's deps, and DVC alone would
call its stage up to date. The first tick only records a baseline; so does a tick with an empty cursor
(the UI's "Preview tick" sends ``""``), which is no history, not "every dataset changed".
"""

# no `from __future__ import annotations`: Dagster reads the op signatures' annotations at runtime

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_project.dvc_assets import StageItem, load_params

CATALOG_STAGE = "catalog"


def _stats(folder: str) -> list[tuple[str, int, int]]:
    """``(relative path, size, mtime_ns)`` of every file under ``folder``, sorted (symlinked dirs followed)."""
    out: list[tuple[str, int, int]] = []
    stack = [("", folder)]
    while stack:
        prefix, path = stack.pop()
        with os.scandir(path) as entries:
            for e in entries:
                if e.is_dir():
                    stack.append((f"{prefix}{e.name}/", e.path))
                elif e.is_file():
                    st = e.stat()
                    out.append((prefix + e.name, st.st_size, st.st_mtime_ns))
    out.sort()
    return out


def fingerprint(folder: Path) -> str | None:
    """sha256 over ``(relative path, size, mtime_ns)`` of every file under ``folder`` (``None`` if absent)."""
    if not folder.exists():
        return None
    if folder.is_file():
        st = folder.stat()
        files = [(folder.name, st.st_size, st.st_mtime_ns)]
    else:
        files = _stats(str(folder))
    h = hashlib.sha256()
    for rel, size, mtime in files:
        h.update(f"{rel}\t{size}\t{mtime}\n".encode())
    return h.hexdigest()


def fingerprints(sources: dict[str, tuple[Path, ...]]) -> dict[str, str]:
    """``{dataset: fingerprint of its folders}`` (datasets with a missing folder left out), each distinct
    folder fingerprinted once."""
    memo: dict[Path, str | None] = {}
    out: dict[str, str] = {}
    for ds, folders in sources.items():
        fps = [memo[f] if f in memo else memo.setdefault(f, fingerprint(f)) for f in folders]
        if None not in fps:
            out[ds] = "+".join(fps)  # type: ignore[arg-type]
    return out


def dataset_sources(project_dir: str | Path, datasets: Sequence[str]) -> dict[str, tuple[Path, ...]]:
    """``{dataset: its source folders}`` for the datasets the sensor can watch (a ToolBench env group
    reads two)."""
    project_dir = Path(project_dir)
    params = load_params(project_dir)
    source = params.get("source") or {}
    from toolret.catalog.datasets import DATASETS, source_folders

    out: dict[str, tuple[Path, ...]] = {}
    beir = source.get("beir") or {}
    for ds in datasets:
        if ds in beir:
            p = Path(beir[ds])
            out[ds] = (p if p.is_absolute() else project_dir / p,)
        elif ds in DATASETS:
            out[ds] = source_folders(ds, source.get("root"), project_dir)
    return out


def build_sensors(items: Sequence[StageItem], project_dir: str | Path) -> list[dg.SensorDefinition]:
    catalogs = {i.dataset or i.facets.get("item"): i for i in items if i.stage == CATALOG_STAGE}
    catalogs = {k: v for k, v in catalogs.items() if k}
    if not catalogs:
        return []

    @dg.sensor(
        name="raw_data_sensor",
        target=dg.AssetSelection.assets(*[i.asset_key for i in catalogs.values()]),
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Rebuild a dataset's catalog when its raw source files change (size/mtime fingerprint).",
    )
    def raw_data_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        current = fingerprints(dataset_sources(project_dir, list(catalogs)))
        try:
            previous: Any = json.loads(context.cursor) if context.cursor else None
        except ValueError:
            previous = None
        if not isinstance(previous, dict):  # None on the first tick, "" from the UI's "Preview tick"
            return dg.SensorResult(skip_reason=dg.SkipReason(f"baseline recorded for {sorted(current)}"),
                                   cursor=json.dumps(current, sort_keys=True))
        changed = sorted(ds for ds, fp in current.items() if previous.get(ds) != fp)
        if not changed:
            return dg.SensorResult(skip_reason=dg.SkipReason("no raw dataset changed"),
                                   cursor=json.dumps(current, sort_keys=True))
        requests = [
            dg.RunRequest(
                run_key=f"{ds}:{current[ds][:16]}",
                asset_selection=[catalogs[ds].asset_key],
                run_config={"ops": {catalogs[ds].op_name: {"config": {"force": True}}}},
                tags={"toolret/trigger": "raw_data_sensor", "toolret/dataset": ds},
            )
            for ds in changed
        ]
        return dg.SensorResult(run_requests=requests, cursor=json.dumps(current, sort_keys=True))

    return [raw_data_sensor]


__all__ = ["build_sensors", "dataset_sources", "fingerprint", "fingerprints"]
