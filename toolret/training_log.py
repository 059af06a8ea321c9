"""Where a training run reports its steps: loggers the platform installs, which a method's training calls.

A method's training is science and imports no tracking code: it asks :func:`training_loggers` for one logger
per installed factory and hands their ``callback()`` (a ``transformers.TrainerCallback``) to its trainer,
then calls ``finish(artifact)`` once the artifact is saved. The platform installs its loggers
(:func:`install`): the CLI installs MLflow's (:mod:`toolret.tracking.training_steps`) when it starts, so a
training run from ``toolret`` / a DVC stage logs its steps, and a library call logs nothing unless asked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol


class TrainingLogger(Protocol):
    """One training run's step logger."""

    def callback(self) -> Any:
        """A ``transformers.TrainerCallback`` that logs each logged step."""

    def finish(self, artifact: Path) -> None:
        """Called once with the saved artifact's folder."""


# (experiment, run name, params, state folder: where a resumable logger keeps its run id) -> logger
LoggerFactory = Callable[[str, str, Mapping[str, Any], Path], TrainingLogger]
_FACTORIES: dict[str, LoggerFactory] = {}


def install(name: str, factory: LoggerFactory) -> None:
    """Install (or replace) the logger factory ``name``."""
    _FACTORIES[name] = factory


def uninstall(name: str) -> None:
    _FACTORIES.pop(name, None)


def training_loggers(experiment: str, run_name: str, params: Mapping[str, Any], state_dir: Path) -> list[TrainingLogger]:
    """One logger per installed factory (by name), for one training run."""
    return [factory(experiment, run_name, params, state_dir) for _, factory in sorted(_FACTORIES.items())]


__all__ = ["LoggerFactory", "TrainingLogger", "install", "training_loggers", "uninstall"]
