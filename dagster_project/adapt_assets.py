"""``toolret adapt`` in Dagster: one asset per user catalog (``params.yaml: source.beir``), a sensor that
re-adapts a catalog whose tools changed, and a weekly schedule that retrains only those.

The asset runs ``toolret adapt --catalog <path> --out data/adapt/<name>`` (the science is in
:mod:`toolret.adapt`); its metadata is the champion, why it was chosen, its dev score and its registry URI.
A catalog's fingerprint is its tools' ids and documents (:func:`toolret.adapt.catalog_fingerprint`); the
last adapt's is in ``data/adapt/<name>/champion/model_card.json``.
"""

# no `from __future__ import annotations`: Dagster reads the op signatures' annotations at runtime

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_project.dvc_assets import load_params
from dagster_project.resources import stage_env

GROUP = "adapt"
OUT_ROOT = "data/adapt"


def adapt_catalogs(project_dir: Path) -> dict[str, Path]:
    """``{name: catalog folder}`` of the user catalogs (``source.beir``), relative paths under the project."""
    beir = ((load_params(project_dir).get("source") or {}).get("beir") or {})
    return {str(n): (Path(p) if Path(p).is_absolute() else project_dir / p) for n, p in beir.items()}


def adapt_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([GROUP, name])


def last_fingerprint(project_dir: Path, name: str) -> str | None:
    card = project_dir / OUT_ROOT / name / "champion" / "model_card.json"
    if not card.is_file():
        return None
    return json.loads(card.read_text(encoding="utf-8"))["catalog"]["fingerprint"]


def current_fingerprint(folder: Path) -> str | None:
    from toolret.adapt import catalog_fingerprint, load_tools
    from toolret.errors import AdaptInputError

    try:
        return catalog_fingerprint(load_tools(folder))
    except AdaptInputError:
        return None  # an empty or broken catalog: adapting it would fail (the asset run says why)


def moved(project_dir: Path) -> dict[str, str]:
    """``{name: current fingerprint}`` of the catalogs whose tools changed since their last adapt (or never
    adapted)."""
    out = {}
    for name, folder in adapt_catalogs(project_dir).items():
        fp = current_fingerprint(folder)
        if fp is not None and fp != last_fingerprint(project_dir, name):
            out[name] = fp
    return out


def _adapt_asset(name: str, folder: Path, project_dir: Path) -> dg.AssetsDefinition:
    @dg.asset(key=adapt_key(name), group_name=GROUP, kinds={"toolret"},
              description=f"[{name}] `toolret adapt`: requests written from the tool documents of {folder.name}, "
                          "candidates trained on them, the champion chosen on synthetic dev, registered as "
                          f"`models:/adapt-{name}@champion` and written to `{OUT_ROOT}/{name}/champion`.")
    def _adapt(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        out = project_dir / OUT_ROOT / name
        cmd = [str(Path(sys.executable).parent / "toolret"), "adapt", "--catalog", str(folder), "--out", str(out)]
        context.log.info("$ " + " ".join(cmd))
        proc = subprocess.run(cmd, cwd=project_dir, env=stage_env({"TOOLRET_PROJECT_DIR": str(project_dir)}),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        for line in proc.stderr.splitlines()[-60:]:
            context.log.info(line)
        if proc.returncode != 0:
            raise dg.Failure(description=f"`toolret adapt` of {name} failed ({proc.returncode}); the previous "
                                         f"champion stays:\n{proc.stderr[-3000:]}")
        report = json.loads((out / "adapt_report.json").read_text(encoding="utf-8"))
        sel = report["selection"]
        md: dict[str, Any] = {"champion": sel["champion"], "why": dg.MetadataValue.text(sel["why"]),
                              "fingerprint": report["catalog"]["fingerprint"][:16],
                              "generated_this_run": report["generation"]["generated_this_run"],
                              "seconds": report["seconds"],
                              "index": dg.MetadataValue.path(str(out / "champion")),
                              "card": dg.MetadataValue.md((out / "champion" / "MODEL_CARD.md").read_text())}
        md[f"dev/{sel['metric']}"] = dg.MetadataValue.float(report["dev"][sel["champion"]]["metrics"][sel["metric"]])
        if report.get("mlflow"):
            md["registry"] = report["mlflow"]["uri"]
        return dg.MaterializeResult(metadata=md, data_version=dg.DataVersion(report["catalog"]["fingerprint"][:16]))

    return _adapt


def build_adapt_definitions(project_dir: Path) -> dict[str, list]:
    """The assets, the sensor and the schedule (empty lists when there is no user catalog)."""
    catalogs = adapt_catalogs(project_dir)
    if not catalogs:
        return {"assets": [], "sensors": [], "schedules": [], "jobs": []}
    assets = [_adapt_asset(n, f, project_dir) for n, f in catalogs.items()]
    job = dg.define_asset_job("adapt_job", selection=dg.AssetSelection.groups(GROUP),
                              description="`toolret adapt` of the user catalogs (source.beir)")

    def requests() -> list[dg.RunRequest]:
        return [dg.RunRequest(run_key=f"{n}-{fp[:16]}", asset_selection=[adapt_key(n)], tags={"toolret/catalog": n})
                for n, fp in sorted(moved(project_dir).items())]

    @dg.sensor(name="adapt_catalog_changed", job=job, minimum_interval_seconds=300,
               default_status=dg.DefaultSensorStatus.STOPPED,
               description="Re-adapts a user catalog whose tools (ids, documents) changed since its last adapt.")
    def changed(_: dg.SensorEvaluationContext):
        reqs = requests()
        return reqs or dg.SkipReason("no catalog changed since its last adapt")

    @dg.schedule(name="weekly_adapt", job=job, cron_schedule="0 4 * * 1", execution_timezone="UTC",
                 default_status=dg.DefaultScheduleStatus.STOPPED,
                 description="Weekly: re-adapts only the catalogs whose fingerprint moved (stopped by default).")
    def weekly(_: dg.ScheduleEvaluationContext):
        reqs = requests()
        return reqs or dg.SkipReason("no catalog fingerprint moved")

    return {"assets": assets, "sensors": [changed], "schedules": [weekly], "jobs": [job]}


__all__ = ["GROUP", "OUT_ROOT", "adapt_catalogs", "adapt_key", "build_adapt_definitions", "last_fingerprint",
           "moved"]
