"""Dataset names -> loaders; the one entry point that turns a name (or a BEIR path) into a Catalog.

A named dataset reads one or more folders under the source root (``toolbench-env-*``: the groups'
``toolbench-stabletoolbench`` and the tool environment ``toolbench-toolenv``); its loader is called with
those folders, in the order :func:`source_dirs` gives them. The ``catalog`` DVC stage depends on exactly
these folders (:func:`toolret.methods.core.catalog_source_deps`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path

from toolret.catalog.io import load_catalog
from toolret.catalog.loaders.beir import load_beir
from toolret.catalog.loaders.mtrb import load_metatool, load_mtrb_toolbench, load_restbench
from toolret.catalog.loaders.toolbench import GROUPS, group_dataset_name, load_toolbench_group
from toolret.catalog.loaders.toolbench_env import load_toolbench_env_group
from toolret.catalog.loaders.toollens import load_toollens, load_toollens_scene_disjoint
from toolret.catalog.model import Catalog
from toolret.catalog.source import source_root
from toolret.catalog.splits import gold_set_split
from toolret.errors import CatalogError
from toolret.paths import data_dir, project_dir

# name -> (source folders under the source root, loader called with those folders as Paths)
_LOADERS: dict[str, tuple[tuple[str, ...], Callable[..., Catalog]]] = {
    "toollens": (("toollens",), load_toollens),
    "toollens-scene-disjoint": (("toollens",), load_toollens_scene_disjoint),
    "mtrb-restbench": (("mtrb",), load_restbench),
    "mtrb-metatool": (("mtrb",), load_metatool),
    "mtrb-toolbench": (("mtrb",), load_mtrb_toolbench),
}
for _g in GROUPS:
    _LOADERS[group_dataset_name(_g)] = (
        ("toolbench-stabletoolbench",), lambda folder, g=_g: load_toolbench_group(folder, g))
for _g in GROUPS:
    _LOADERS[group_dataset_name(_g, "toolbench-env-")] = (
        ("toolbench-stabletoolbench", "toolbench-toolenv"),
        lambda groups, toolenv, g=_g: load_toolbench_env_group(groups, toolenv, g))

DATASETS = list(_LOADERS)


def source_dirs(name: str) -> tuple[str, ...]:
    """The source folders (relative to the source root) a named dataset is read from."""
    if name not in _LOADERS:
        raise CatalogError(f"unknown dataset {name!r}; choose one of {DATASETS}")
    return _LOADERS[name][0]


def source_folders(name: str, root: str | Path | None = None,
                   project_dir: str | Path | None = None) -> tuple[Path, ...]:
    """Every raw source folder a named dataset is read from (e.g. ``(.../datasets/mtrb,)``)."""
    base = source_root(root, project_dir)
    return tuple(base / d for d in source_dirs(name))


def source_folder(name: str, root: str | Path | None = None, project_dir: str | Path | None = None) -> Path:
    """The first (primary) source folder of a named dataset; :func:`source_folders` gives all of them."""
    return source_folders(name, root, project_dir)[0]


def carve_dev_split(catalog: Catalog, fraction: float, seed: int) -> Catalog:
    """Move a seeded random ``fraction`` of the train queries into a ``dev`` split (test untouched).

    A catalog whose provenance says ``dev_split_by: gold_set`` (a scene-disjoint variant) gets a dev split
    of whole gold sets instead (:func:`toolret.catalog.splits.gold_set_split`): dev mirrors its test split.
    """
    train = sorted(q.id for q in catalog.queries if q.split == "train")
    if not train or fraction <= 0 or any(q.split == "dev" for q in catalog.queries):
        return catalog
    if catalog.provenance.get("dev_split_by") == "gold_set":

        stats = gold_set_split(catalog, "train", "dev", fraction, seed)
        catalog.provenance = {**catalog.provenance, "dev_split": {**stats, "n_dev": stats["n_queries_moved"]}}
        return catalog
    n_dev = max(1, round(len(train) * fraction))
    dev = set(random.Random(seed).sample(train, n_dev))
    for q in catalog.queries:
        if q.id in dev:
            q.split = "dev"
    catalog.provenance = {**catalog.provenance, "dev_split": {"fraction": fraction, "seed": seed, "n_dev": n_dev}}
    return catalog


def load_dataset(name_or_path: str, *, root: str | Path | None = None, beir: Mapping[str, str] | None = None,
                 dev_fraction: float = 0.05, seed: int = 13, project_dir: str | Path | None = None) -> Catalog:
    """Load a named dataset (verified against its MANIFEST) or a BEIR-layout directory.

    Args:
        name_or_path: one of :data:`DATASETS`, a name in ``beir``, or a path to a BEIR directory.
        root: dataset source root (default ``../shared/datasets`` or ``$TOOLRET_DATA_SOURCE``).
        beir: extra ``{name: BEIR directory}`` user catalogs (``params.yaml: source.beir``).
        dev_fraction, seed: the dev split carved from train (never from test).
    """
    beir = dict(beir or {})
    if name_or_path in _LOADERS:
        loader = _LOADERS[name_or_path][1]
        folders = source_folders(name_or_path, root, project_dir)
        for folder in folders:
            if not folder.is_dir():
                raise CatalogError(f"dataset {name_or_path!r}: source folder {folder} not found "
                                   "(set params.yaml source.root or TOOLRET_DATA_SOURCE)")
        catalog = loader(*folders)
    elif name_or_path in beir:
        path = Path(beir[name_or_path])
        if not path.is_absolute() and project_dir:
            path = Path(project_dir) / path
        catalog = load_beir(path, name=name_or_path)
    elif Path(name_or_path).is_dir():
        catalog = load_beir(name_or_path)
    else:
        raise CatalogError(f"unknown dataset {name_or_path!r}: not one of {DATASETS}, "
                           f"not in source.beir {sorted(beir)}, and not a BEIR directory")
    return carve_dev_split(catalog, dev_fraction, seed)


def load_dataset_for(name: str, params) -> Catalog:
    """A catalog a component learns or selects on (``toolrerank.train_dataset``, ``hybrid.dev_dataset``):
    a curated catalog directory, else ``data/curated/<name>`` where it is built (a synthetic training
    catalog exists only there), else the named dataset loaded from the sources."""

    if Path(name).is_dir():
        return load_catalog(name)
    curated = data_dir() / "curated" / name
    if curated.is_dir():
        return load_catalog(curated)
    return load_dataset(name, root=params.source.root, beir=params.source.beir, dev_fraction=params.catalog.dev_fraction,
                        seed=params.catalog.seed, project_dir=project_dir())

