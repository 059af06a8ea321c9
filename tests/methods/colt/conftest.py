"""A temporary project with the curated fixture catalog and small COLT settings (frozen MiniLM encoder,
its embeddings in a temporary store shared by the tests of a session)."""

from __future__ import annotations

import json

import pytest
import yaml

from toolret.catalog.io import save_catalog
from toolret.catalog.datasets import load_dataset

SMALL = {
    "evaluation": {"ks": [1, 3, 5], "k_max": 10, "bootstrap_samples": 50},
    "catalog": {"dev_fraction": 0.2, "seed": 13},
    "colt": {"encoder": "dense", "max_epochs": 8, "patience": 4, "batch_size": 16, "list_size": 6},
}


@pytest.fixture(scope="session")
def embedding_store(tmp_path_factory):
    return str(tmp_path_factory.mktemp("colt_embeddings"))


@pytest.fixture
def colt_project(tmp_path, monkeypatch, embedding_store):
    """``(project dir, catalog, curated dir, params)``: 30 tools, 80 train (16 of them carved to dev), 20 test."""
    from make_fixture import write_fixture_catalog

    from toolret.config import validate_params

    proj = tmp_path / "project"
    proj.mkdir()
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(proj))
    source = write_fixture_catalog(tmp_path / "fixture", n_tools=30, n_train=80, n_test=20)
    catalog = load_dataset(str(source), dev_fraction=0.2, seed=13)
    curated = save_catalog(catalog, proj / "data" / "curated" / catalog.name)
    raw = json.loads(json.dumps(SMALL))
    raw["dense"] = {"embedding_cache": embedding_store}
    (proj / "params.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    return proj, catalog, curated, validate_params(raw)


@pytest.fixture
def cli():
    """``cli(project, *args)``: run ``toolret`` in-process with the project's params; returns the exit code."""
    from toolret.cli import main

    return lambda proj, *args: main(["--params", str(proj / "params.yaml"), *args])
