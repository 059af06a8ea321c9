"""Helpers of the orchestration tests: temporary git + DVC projects, Dagster instances, env.

Imported by ``conftest.py`` and the tests (``tests/orchestration`` is put on ``sys.path``).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

for _k, _v in {"DVC_NO_ANALYTICS": "1", "MLFLOW_DISABLE_TELEMETRY": "true", "GX_ANALYTICS_ENABLED": "false",
               "DAGSTER_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TQDM_DISABLE": "1"}.items():
    os.environ.setdefault(_k, _v)

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FIXTURES = REPO / "tests" / "fixtures"
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def env_for(project: Path | None = None, **extra: str) -> dict[str, str]:
    """Subprocess env: the venv's bin first on PATH, telemetry off, no inherited MLflow/DAGSTER target."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "TOOLRET_PROJECT_DIR")}
    env["PATH"] = str(BIN) + os.pathsep + env.get("PATH", "")
    if project is not None:
        env["TOOLRET_PROJECT_DIR"] = str(project)
    env.update(extra)
    return env


def sh(cmd: list[str], cwd: Path, timeout: float = 300, **extra_env: str) -> subprocess.CompletedProcess:
    """Run a command, raising with its output on failure."""
    proc = subprocess.run(cmd, cwd=cwd, env=env_for(**extra_env), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


_TEMPLATE: Path | None = None


def _template() -> Path:
    """An empty git + DVC repository (``git init``, ``dvc init``, analytics off, one commit), made once per
    process: each project is a copy of it (two ``dvc`` CLI starts, ~3 s on 2 busy cores, saved per project)."""
    global _TEMPLATE
    if _TEMPLATE is None:
        import tempfile

        path = Path(tempfile.mkdtemp(prefix="toolret-dvc-template-")) / "repo"
        path.mkdir()
        sh(["git", "init", "-q"], path)
        sh(["git", "config", "user.email", "tests@toolret.invalid"], path)
        sh(["git", "config", "user.name", "toolret tests"], path)
        sh([str(BIN / "dvc"), "init", "-q"], path)
        sh([str(BIN / "dvc"), "config", "core.analytics", "false"], path)
        sh(["git", "add", "-A"], path)
        sh(["git", "commit", "-q", "-m", "dvc init"], path)
        _TEMPLATE = path
    return _TEMPLATE


def make_dvc_project(path: Path, dvc_yaml: str | dict, params: dict[str, Any], copy_code: bool = True) -> Path:
    """A git + DVC project at ``path`` with ``dvc.yaml``/``params.yaml`` (and ``toolret/`` for code deps): a
    copy of the process's empty git + DVC template, the files added in a second commit."""
    if path.exists() and any(path.iterdir()):
        raise FileExistsError(f"{path}: not empty")
    shutil.copytree(_template(), path, symlinks=True, dirs_exist_ok=True)
    if copy_code:  # the stages' code deps (the CLI itself runs the installed package)
        shutil.copytree(REPO / "toolret", path / "toolret", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    text = dvc_yaml if isinstance(dvc_yaml, str) else yaml.safe_dump(dvc_yaml, sort_keys=False)
    (path / "dvc.yaml").write_text(text, encoding="utf-8")
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    sh(["git", "add", "-A"], path)
    sh(["git", "commit", "-q", "-m", "fixture project"], path)
    return path


def fixture_params(source_dir: Path, methods: list[str], finetune: bool) -> dict[str, Any]:
    """The real params.yaml, narrowed to the fixture dataset and made fast."""
    params = copy.deepcopy(yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8")))
    params["source"] = {"root": str(source_dir.parent), "beir": {"fixture": str(source_dir)}}
    for key in list(params):  # every per-method dataset list (finetune_datasets, reinvoke_datasets ...)
        if key.endswith("_datasets"):
            params[key] = []
    from toolret.registry import stage_templates

    for t in stage_templates():  # ... and every other list a stage iterates over (e.g. qta.runs)
        if t.foreach and t.foreach.startswith("${") and "." in t.foreach:
            *path, key = t.foreach[2:-1].split(".")  # e.g. qta.runs, qta.synthetic.runs
            holder = params
            for part in path:
                holder = holder.get(part) if isinstance(holder, dict) else None
            if isinstance(holder, dict) and key in holder:
                holder[key] = type(holder[key])()
        if t.only_if and "." in t.only_if:  # ... and every setting that switches a stage on (a dataset name)
            section, _, key = t.only_if.partition(".")
            if isinstance(params.get(section), dict) and isinstance(params[section].get(key), str):
                params[section][key] = None
    params["datasets"] = ["fixture"]
    params["synthetic"], params["trained_on"], params["selections"] = {}, {}, {}  # they name the real datasets
    params["finetune_datasets"] = ["fixture"] if finetune else []
    params["trained_on"] = {"fixture": "fixture"} if finetune else {}
    params["methods"] = methods
    params.setdefault("evaluation", {})["bootstrap_samples"] = 200
    ft = params.setdefault("finetune", {})
    ft.update({"epochs": 1, "batch_size": 8, "max_train_pairs": 32})
    return params


def fixture_dvc_yaml(params: dict[str, Any]) -> str:
    """``dvc.yaml`` as ``make stages`` writes it for these params (stages gated by ``only_if`` drop out)."""
    from toolret.config import validate_params
    from toolret.stages import render_dvc_yaml

    return render_dvc_yaml(validate_params(params, "fixture params"))


def make_instance(home: Path):
    """A Dagster instance in ``home`` configured by the project's ``dagster_home/dagster.yaml`` template."""
    import dagster as dg

    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return dg.DagsterInstance.from_config(str(home))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
