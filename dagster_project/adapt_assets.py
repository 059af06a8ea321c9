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
from toolret.adapt.promotion import champion_held_up
from toolret.feedback.loop import LoopConfig, count_pairs, load_loop_config, retrain_due

GROUP = "adapt"
OUT_ROOT = "data/adapt"
FEEDBACK_ROOT = "data/feedback"


def adapt_catalogs(project_dir: Path) -> dict[str, Path]:
    """``{name: catalog folder}`` of the user catalogs (``source.beir``), relative paths under the project."""
    beir = ((load_params(project_dir).get("source") or {}).get("beir") or {})
    return {str(n): (Path(p) if Path(p).is_absolute() else project_dir / p) for n, p in beir.items()}


def adapt_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([GROUP, name])


def last_fingerprint(project_dir: Path, name: str) -> str | None:
    """The fingerprint of the catalog's last adapt: its challenger where one waits, else its champion."""
    for role in ("challenger", "champion"):
        card = project_dir / OUT_ROOT / name / role / "model_card.json"
        if card.is_file():
            return json.loads(card.read_text(encoding="utf-8"))["catalog"]["fingerprint"]
    return None


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
        toolret = str(Path(sys.executable).parent / "toolret")
        cmd = [toolret, "adapt", "--catalog", str(folder), "--out", str(out)]
        loop = load_loop_config(project_dir).get(name)
        if loop is not None and count_pairs(loop.receipts):  # traffic: its feedback folder, then adapt --feedback
            fb = project_dir / FEEDBACK_ROOT / name
            fcmd = [toolret, "feedback", "--receipts", *map(str, loop.receipts), "--out", str(fb)]
            context.log.info("$ " + " ".join(fcmd))
            done = subprocess.run(fcmd, cwd=project_dir, env=stage_env({"TOOLRET_PROJECT_DIR": str(project_dir)}),
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                raise dg.Failure(description=f"`toolret feedback` of {name} failed:\n{done.stderr[-3000:]}")
            cmd += ["--feedback", str(fb)]
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
        served = out / report.get("role", "champion")
        md: dict[str, Any] = {"champion": sel["champion"], "why": dg.MetadataValue.text(sel["why"]),
                              "fingerprint": report["catalog"]["fingerprint"][:16],
                              "generated_this_run": report["generation"]["generated_this_run"],
                              "seconds": report["seconds"],
                              "role": report.get("role", "champion"),
                              "index": dg.MetadataValue.path(str(served)),
                              "card": dg.MetadataValue.md((served / "MODEL_CARD.md").read_text())}
        md[f"dev/{sel['metric']}"] = dg.MetadataValue.float(report["dev"][sel["champion"]]["metrics"][sel["metric"]])
        if report.get("mlflow"):
            md["registry"] = report["mlflow"]["uri"]
        return dg.MaterializeResult(metadata=md, data_version=dg.DataVersion(report["catalog"]["fingerprint"][:16]))

    return _adapt


def build_adapt_definitions(project_dir: Path) -> dict[str, list]:
    """The assets, the sensor and the schedule (empty lists when there is no user catalog)."""
    catalogs = adapt_catalogs(project_dir)
    if not catalogs:
        return {"assets": [], "sensors": [], "schedules": [], "jobs": [], "checks": []}
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

    loop = load_loop_config(project_dir)
    sensors = [changed] + [_traffic_sensor(cfg, job) for name, cfg in sorted(loop.items()) if name in catalogs]
    checks = [_held_up_check(name, project_dir) for name in sorted(loop) if name in catalogs]
    return {"assets": assets, "sensors": sensors, "schedules": [weekly], "jobs": [job], "checks": checks}


def _traffic_sensor(cfg: LoopConfig, job) -> dg.SensorDefinition:
    """Requests a re-adapt of ``cfg.catalog`` once ``cfg.new_pairs`` new feedback pairs (clicks) arrived in
    its gateway receipts since the last request; the cursor is the pair count then (toolret.feedback.loop)."""

    @dg.sensor(name=f"adapt_feedback_{cfg.catalog}", job=job, minimum_interval_seconds=300,
               default_status=dg.DefaultSensorStatus.STOPPED,
               description=f"Re-adapts {cfg.catalog} with its feedback once {cfg.new_pairs} new (query, called tool) "
                           f"pairs arrived in {', '.join(str(r) for r in cfg.receipts)}.")
    def traffic(context: dg.SensorEvaluationContext):
        pairs = count_pairs(cfg.receipts)
        cursor = int(context.cursor) if (context.cursor or "").isdigit() else 0
        if not retrain_due(pairs, cursor, cfg.new_pairs):
            return dg.SkipReason(f"{pairs - cursor} new feedback pairs of {cfg.new_pairs}")
        context.update_cursor(str(pairs))
        return dg.RunRequest(run_key=f"{cfg.catalog}-feedback-{pairs}", asset_selection=[adapt_key(cfg.catalog)],
                             tags={"toolret/catalog": cfg.catalog, "toolret/trigger": "feedback",
                                   "toolret/feedback_pairs": str(pairs)})

    return traffic


def _held_up_check(name: str, project_dir: Path) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=adapt_key(name), name="promoted_champion_held_up", blocking=False,
                    description="Fails if the promoted champion scores below its predecessor on the newest "
                                "(held-out) feedback, paired p < 0.05 (toolret.adapt.promotion.champion_held_up).")
    def held_up() -> dg.AssetCheckResult:
        r = champion_held_up(name, project_dir / FEEDBACK_ROOT / name)
        return dg.AssetCheckResult(passed=bool(r["passed"]), severity=dg.AssetCheckSeverity.ERROR,
                                   metadata={"why": r["why"], **{k: v for k, v in (r["verdict"] or {}).items()
                                                                 if isinstance(v, (int, float))}})

    return held_up


__all__ = ["GROUP", "OUT_ROOT", "adapt_catalogs", "adapt_key", "build_adapt_definitions", "last_fingerprint",
           "moved"]
