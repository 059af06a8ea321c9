"""MLflow as a training logger (:mod:`toolret.training_log`): every logged step's numbers into one run per
trained artifact, which a resumed training continues (its id kept in the training's state folder)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolret import training_log
from toolret.paths import portable_path
from toolret.tracking.model_registry import ARTIFACT_TAG
from toolret.tracking.store import get_client, get_or_create_experiment

NAME = "mlflow"


class MLflowSteps:
    """A :class:`toolret.training_log.TrainingLogger` writing to the project's MLflow store."""

    def __init__(self, experiment: str, run_name: str, params: Mapping[str, Any], state_dir: Path) -> None:
        self.experiment, self.run_name, self.params = experiment, run_name, dict(params)
        self.run_id_file = Path(state_dir) / "mlflow_run_id"
        self.client = self.run_id = None

    def _start(self) -> None:
        self.client = get_client()
        if self.run_id_file.is_file():
            self.run_id = self.run_id_file.read_text(encoding="utf-8").strip()
            return
        method = self.experiment.removeprefix("toolret-").split("-", 1)[0]
        run = self.client.create_run(get_or_create_experiment(self.client, self.experiment), run_name=self.run_name,
                                     tags={"toolret.method": method})
        self.run_id = run.info.run_id
        for k, v in self.params.items():
            self.client.log_param(self.run_id, k, json.dumps(v) if isinstance(v, (list, dict)) else v)
        self.run_id_file.parent.mkdir(parents=True, exist_ok=True)
        self.run_id_file.write_text(self.run_id, encoding="utf-8")

    def callback(self):
        from transformers import TrainerCallback

        outer = self

        class Callback(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                outer._start()

            def on_log(self, args, state, control, logs=None, **kwargs):
                for key, value in (logs or {}).items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        outer.client.log_metric(outer.run_id, key.replace("/", "_"), float(value),
                                                step=state.global_step)

        return Callback()

    def finish(self, artifact: Path) -> None:
        """Log the artifact, tag the run with its folder (project-relative: the model registry finds the run
        that trained a version by it, :func:`toolret.tracking.model_registry.producing_run`) and end the run."""
        if self.client is None:
            return

        self.client.log_artifacts(self.run_id, str(artifact), artifact_path="adapter")
        self.client.set_tag(self.run_id, ARTIFACT_TAG, portable_path(str(Path(artifact).resolve())))
        self.client.set_terminated(self.run_id)


def install() -> None:
    """Make every training run of this process log its steps to MLflow."""
    training_log.install(NAME, MLflowSteps)
