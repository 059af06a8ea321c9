"""Raw-data sensor: notice new or changed dataset files and rebuild the affected catalogs.

It fingerprints each dataset's source folder (``params.yaml: source.root`` resolved against the
project, plus the ``source.beir`` user catalogues): relative path, size and mtime of every file
(``MANIFEST.tsv`` included). The cursor keeps the last fingerprints; a changed fingerprint requests a
run of that dataset's ``catalog`` asset with ``force: true``: ``source.root`` is a DVC dep of every catalog
stage, but a user catalogue under ``source.beir`` may live anywhere, outside DVC's deps, and DVC alone would
call its stage up to date. The first tick only records a baseline; so does a tick with an empty cursor
(the UI's "Preview tick" sends ``""``), which is no history, not "every dataset changed".
"""

# no `from __future__ import annotations`: Dagster reads the op signatures' annotations at runtime

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_project.dvc_assets import StageItem, load_params

CATALOG_STAGE = "catalog"


def fingerprint(folder: Path) -> str | None:
    """sha256 over ``(relative path, size, mtime_ns)`` of every file under ``folder`` (``None`` if absent)."""
    if not folder.exists():
        return None
    h = hashlib.sha256()
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    for p in files:
        st = p.stat()
        rel = p.name if p == folder else p.relative_to(folder).as_posix()
        h.update(f"{rel}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def dataset_sources(project_dir: str | Path, datasets: Sequence[str]) -> dict[str, tuple[Path, ...]]:
    """``{dataset: its source folders}`` for the datasets the sensor can watch (a ToolBench env group
    reads two)."""
    project_dir = Path(project_dir)
    params = load_params(project_dir)
    source = params.get("source") or {}
    from toolret.catalog.registry import DATASETS, source_folders

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
        current = {ds: "+".join(fps) for ds, folders in dataset_sources(project_dir, list(catalogs)).items()
                   if None not in (fps := [fingerprint(f) for f in folders])}
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


__all__ = ["build_sensors", "dataset_sources", "fingerprint"]
