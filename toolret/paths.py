"""The project's paths and its raw ``params.yaml``: the helpers both :mod:`toolret.config` and
:mod:`toolret.registry` read, in a module that imports neither (no import cycle between them:
``tests/test_import_graph.py``).

The project root is ``$TOOLRET_PROJECT_DIR``, else the current directory if it holds a ``params.yaml``,
else the repository this package lives in (:func:`project_dir`); its artifacts live under ``data/``
(:func:`data_dir`). Saved components store the paths inside the project project-relative
(:func:`portable_path`; :func:`project_path` resolves them back), so a copied or re-cloned ``data/`` loads.

:func:`read_params_file` reads ``params.yaml`` unvalidated (the registry reads its ``plugins:`` list before
any validation); :func:`toolret.config.load_params` validates it. Both raise :class:`ConfigError`.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from toolret.errors import CatalogError
from toolret.errors import ConfigError

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def project_dir() -> Path:
    """The project root: ``$TOOLRET_PROJECT_DIR``, else the current directory if it holds a
    ``params.yaml``, else the repository this package lives in."""
    env = os.environ.get("TOOLRET_PROJECT_DIR")
    if env:
        return Path(env).resolve()
    cwd = Path.cwd()
    return cwd if (cwd / "params.yaml").is_file() else PACKAGE_ROOT


def data_dir() -> Path:
    return project_dir() / "data"


def read_params_file(path: str | Path | None = None) -> tuple[dict[str, Any], Path]:
    """The raw mapping of ``params.yaml`` (default: the project's; ``{}`` if the project has none) and its path.

    Raises:
        ConfigError: a ``path`` given explicitly that is not a file (a typo must not run on the defaults).
    """
    import yaml

    explicit = bool(path)
    path = Path(path) if path else project_dir() / "params.yaml"
    if not path.is_file():
        if explicit:
            raise ConfigError(f"{path}: params file not found")
        return {}, path
    try:
        data = load_yaml_file(path) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data, path


def load_yaml_file(path: str | Path) -> Any:
    """A YAML file in the safe schema (what ``yaml.safe_load`` returns), parsed with libyaml where it is built
    (~5-10x faster than the pure-Python parser: ``dvc.lock`` is 4 MB) and once per file text in a process
    (a command reads ``params.yaml`` several times, an orchestrated run ``dvc.lock`` once a step). The result
    is the caller's own copy."""
    import yaml

    path = Path(path)
    text = path.read_text(encoding="utf-8")
    key = str(path.resolve())
    hit = _YAML_MEMO.get(key)
    if hit is None or hit[0] != text:
        hit = (text, yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
        _YAML_MEMO[key] = hit
    return copy.deepcopy(hit[1])


_YAML_MEMO: dict[str, tuple[str, Any]] = {}  # resolved path -> (text, parsed)


def under_project(path: str | os.PathLike) -> Path:
    """A path to write to (a cache that may not exist yet): as given when absolute, else relative to the
    project directory -- never the working directory (saved components store project-relative paths,
    :func:`portable_path`; :func:`project_path` reads existing ones)."""
    path = Path(path)
    return path if path.is_absolute() else (project_dir() / path).resolve()


def portable_path(value: Any) -> Any:
    """``value`` with absolute paths inside the project made project-relative (recursively through dicts
    and lists): a saved pipeline keeps working when ``data/`` is copied or the repository re-cloned."""
    if isinstance(value, dict):
        return {k: portable_path(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable_path(v) for v in value]
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str) and value.startswith(os.sep):
        root = project_dir()
        try:
            return Path(os.path.normpath(value)).relative_to(root).as_posix()
        except ValueError:
            return value
    return value


def project_path(value: str | os.PathLike) -> Path:
    """A path as written by :func:`portable_path`: absolute as is, relative to the project when it exists
    there (else relative to the working directory)."""
    path = Path(value)
    if path.is_absolute():
        return path
    inside = project_dir() / path
    return inside if inside.exists() else path


def model_dir(training: str | os.PathLike, component: str) -> Path:
    """Where ``component``'s artifact trained on ``training`` lives: ``data/models/<name>/<component>`` for a
    named catalog; a catalog folder under ``data/curated`` keeps its sub-path (``data/curated/ablations/x``
    -> ``data/models/ablations/x``, so an ablation's models sit beside each other); another folder by its name."""
    path = Path(training)
    if len(path.parts) > 1:
        curated = (data_dir() / "curated").resolve()
        folder = (path if path.is_absolute() else project_dir() / path).resolve()
        if folder.is_relative_to(curated) and folder != curated:
            return data_dir() / "models" / folder.relative_to(curated) / component
    return data_dir() / "models" / path.name / component


__all__ = ["PACKAGE_ROOT", "ConfigError", "data_dir", "model_dir", "portable_path", "project_dir", "project_path",
           "read_params_file", "under_project"]
