"""Trained models in the MLflow model registry, versioned by the md5 DVC records for their weights.

Every DVC stage output under ``data/models/`` (today ``finetune@<ds>`` -> ``data/models/<ds>/dense-ft``)
is a registered model named ``<dataset>.<method>`` (MLflow forbids ``/`` in names) whose versions are
the output's versions: a version's source is the model folder relative to the project (no machine path),
its tags ``dvc_md5`` (from ``dvc.lock``), ``dvc_stage`` and ``dvc_path``, its description the model card
(:func:`model_card`), its run the run that made it known: the evaluation run that used it first, or, when
the reports register it before any (:func:`register_models`), the run that trained it or an evaluation
run of it (:func:`producing_run`); the alias ``current`` names the version ``dvc.lock`` records now.
Registering is idempotent: an md5 already registered returns that version; a new md5 makes a new version.
Evaluation runs whose DVC lineage holds a model carry a ``toolret.model.<name>`` tag
(``models:/<name>/<version>``) and the model version a tag pointing back. (``toolret adapt`` registers its
champions itself, :func:`toolret.adapt.run.log_and_register`: alias ``champion``, linked to the adapt run.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolret.provenance import read_dvc_lock
from toolret.tracking.lineage import stage_md5s, upstream_stages, version_tags
from toolret.tracking.store import CURRENT_TAG, get_client

MODELS_ROOT = "data/models"
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.\-]")


def registered_model_name(dataset: str, method: str) -> str:
    """``("toollens", "dense-ft")`` -> ``"toollens.dense-ft"`` (characters MLflow rejects become ``_``)."""
    return _NAME_BAD.sub("_", f"{dataset}.{method}")


@dataclass(frozen=True)
class ModelOutput:
    """A DVC output under ``data/models/<dataset>/<method>``."""

    path: str  # relative to the project
    md5: str
    stage: str

    @property
    def dataset(self) -> str:
        return self.path[len(MODELS_ROOT) + 1:].split("/")[0]

    @property
    def method(self) -> str:
        rest = self.path[len(MODELS_ROOT) + 1:].split("/")[1:]
        return "/".join(rest) or self.dataset

    @property
    def name(self) -> str:
        return registered_model_name(self.dataset, self.method)


def _model_outs(lock: dict[str, Any], stages: list[str] | None = None) -> list[ModelOutput]:
    out = []
    for stage, body in (lock.get("stages") or {}).items():
        if stages is not None and stage not in stages:
            continue
        for entry in body.get("outs") or []:
            path = str(entry.get("path", "")).rstrip("/") if isinstance(entry, dict) else ""
            if path.startswith(MODELS_ROOT + "/") and entry.get("md5"):
                out.append(ModelOutput(path, str(entry["md5"]), stage))
    return out


def model_outputs(project_dir: str | Path, dataset: str | None = None, lock: dict[str, Any] | None = None
                  ) -> list[ModelOutput]:
    """The model outputs ``dvc.lock`` records (of one dataset when given)."""
    lock = read_dvc_lock(project_dir) if lock is None else lock
    return [m for m in _model_outs(lock) if dataset is None or m.dataset == dataset]


def models_used_by(stage: str, lock: dict[str, Any]) -> list[ModelOutput]:
    """Model outputs in the DVC lineage of ``stage`` (its own outs included)."""
    return _model_outs(lock, [stage, *upstream_stages(stage, lock)])


CURRENT_ALIAS = "current"
# On a training run (toolret.tracking.training_steps): the project-relative folder of the artifact it wrote.
ARTIFACT_TAG = "toolret.artifact"


def _filter_literal(value: str) -> str | None:
    """``value`` as a quoted MLflow filter literal; ``None`` when it holds a quote or a backslash."""
    return None if "'" in value or "\\" in value else f"'{value}'"


def producing_run(client: Any, model: ModelOutput, lock: dict[str, Any]) -> str | None:
    """The run behind a version registered without an evaluation run at hand (``None`` when there is none).

    First the newest finished training run of the model's folder (tag :data:`ARTIFACT_TAG`), else the
    newest current evaluation run whose DVC lineage (param ``dvc.stages``) holds the model's stage and
    whose stage md5s (its ``dvc.md5.*`` tags) are the ones ``dvc.lock`` records now, so it read this md5 of
    the model (an evaluation of an earlier training is not this version's run).
    """

    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return None
    path = _filter_literal(model.path)
    if path is not None:
        for run in client.search_runs(experiments, f"tags.`{ARTIFACT_TAG}` = {path} and attributes.status = 'FINISHED'",
                                      max_results=1, order_by=["attributes.start_time DESC"]):
            return run.info.run_id
    stage = _filter_literal(f"%{model.stage}%")
    query = f"tags.`toolret.kind` = 'evaluation' and tags.`{CURRENT_TAG}` = 'true'"
    runs = client.search_runs(experiments, query + (f" and params.`dvc.stages` LIKE {stage}" if stage else ""),
                              max_results=1000, order_by=["attributes.start_time DESC"])
    for run in runs:
        tags = run.data.tags
        if run.info.status != "FINISHED" or model.stage not in run.data.params.get("dvc.stages", "").split(", "):
            continue
        expected = version_tags(stage_md5s(tags.get("dvc.stage", ""), lock))
        if expected and all(tags.get(k) == v for k, v in expected.items()):
            return run.info.run_id
    return None


def model_card(model: ModelOutput, project_dir: str | Path) -> str:
    """The version's description: what the artifact is, what it was trained on and with, and its dev score
    (from the artifact's own ``MODEL_CARD.md`` where it has one, else its ``artifact_key.json`` and training
    report), and how to restore it."""
    folder = Path(project_dir) / model.path
    if (folder / "MODEL_CARD.md").is_file():
        return (folder / "MODEL_CARD.md").read_text(encoding="utf-8")[:5000]
    import json

    lines = [f"# `{model.name}`", "", f"`{model.path}`, trained by DVC stage `{model.stage}` (DVC md5 `{model.md5}`; "
             f"restore it with `dvc checkout {model.stage}` at a commit whose dvc.lock records this md5)."]
    key = folder / "artifact_key.json"
    if key.is_file():
        k = json.loads(key.read_text(encoding="utf-8"))
        config = k.get("config") or {}
        lines += ["", f"- kind: {k.get('kind', model.method)}; base model: {k.get('base_model', '-')}",
                  "- training: " + ", ".join(f"{n} {config[n]}" for n in sorted(config)
                                              if isinstance(config[n], (int, float, str)))]
    for report in sorted(folder.glob("*.json")):
        if report.name == "artifact_key.json":
            continue
        data = json.loads(report.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            facts = {n: data[n] for n in ("n_train_pairs", "steps", "selected_step", "epochs_trained")
                     if isinstance(data.get(n), (int, float))}
            if facts:
                lines.append(f"- {report.stem}: " + ", ".join(f"{n} {v}" for n, v in facts.items()))
    return "\n".join(lines)


def register_model(client: Any, model: ModelOutput, project_dir: str | Path, run_id: str | None = None,
                   lock: dict[str, Any] | None = None) -> dict[str, Any]:
    """Register ``model`` (idempotent per md5; a new version linked to ``run_id``, the run that used it first,
    else to :func:`producing_run`), point the alias ``current`` at it and return ``{"name", "version", "md5",
    "stage", "path", "created"}``. A version registered earlier with another description (none, by an older
    toolret) gets the model card as its description."""
    from mlflow.exceptions import MlflowException

    name = model.name
    try:
        client.get_registered_model(name)
    except MlflowException:
        try:
            client.create_registered_model(
                name, tags={"dataset": model.dataset, "method": model.method, "dvc_path": model.path},
                description=f"`{model.path}`, trained by DVC stage `{model.stage}`; one version per DVC md5.")
        except MlflowException:  # registered concurrently
            client.get_registered_model(name)
    info = {"name": name, "md5": model.md5, "stage": model.stage, "path": model.path}
    found = next((mv for mv in client.search_model_versions(f"name='{name}'")
                  if (mv.tags or {}).get("dvc_md5") == model.md5), None)
    created = found is None
    card = model_card(model, project_dir)
    if found is None:
        if run_id is None:
            run_id = producing_run(client, model, read_dvc_lock(project_dir) if lock is None else lock)
        found = client.create_model_version(
            name, source=model.path, run_id=run_id,
            tags={"dvc_md5": model.md5, "dvc_stage": model.stage, "dvc_path": model.path}, description=card)
    elif (found.description or "") != card:
        client.update_model_version(name, found.version, description=card)
    version = str(found.version)
    try:
        current = str(client.get_model_version_by_alias(name, CURRENT_ALIAS).version)
    except MlflowException:
        current = None
    if current != version:
        client.set_registered_model_alias(name, CURRENT_ALIAS, version)
    return {**info, "version": version, "created": created}


def register_models(project_dir: str | Path, dataset: str | None = None, tracking_uri: str | None = None,
                    lock: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Register every model output of ``dvc.lock`` (of one dataset) whose folder exists; a new version is
    linked to the run that trained or evaluated it where one is logged (:func:`producing_run`)."""

    client = get_client(tracking_uri, project_dir)
    lock = read_dvc_lock(project_dir) if lock is None else lock
    return [register_model(client, m, project_dir, lock=lock) for m in model_outputs(project_dir, dataset, lock)
            if (Path(project_dir) / m.path).exists()]


__all__ = ["ARTIFACT_TAG", "CURRENT_ALIAS", "MODELS_ROOT", "model_card", "ModelOutput", "model_outputs",
           "models_used_by", "producing_run", "register_model", "register_models", "registered_model_name"]
