"""The training catalogs that the committed models were trained on rebuild, from the committed code, the
datasets and the committed LLM generations, to the very bytes dvc.lock records.

A `synthesize@*` stage is costly (it reads committed LLM outputs), so `make run` does not rebuild it on a
machine that has it; a fresh clone does, and if the lock's hash is not what the committed code makes,
every model trained on it (the ToolRerank cross-encoders) turns stale there and `make run` stops. That
happened: the lock's BM25-filtered catalogs had been recorded from a workspace build that no committed
code reproduces (7,387 training queries where the code writes 7,390)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from toolret.catalog.source import source_root

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
SHARED = source_root()
SOURCE = "toolbench-g1-instruction"


@functools.lru_cache(maxsize=1)
def _locked_stages() -> dict[str, dict]:
    """dvc.lock's stages, read once per process (the C YAML loader, :func:`toolret.provenance.read_dvc_lock`)."""
    from toolret.provenance import read_dvc_lock

    return read_dvc_lock(REPO)["stages"]


def _synthesize_stages() -> dict[str, dict]:
    """``{name: lock entry}`` of the synthetic catalogs built from the ToolBench G1 curated catalog."""
    stages = _locked_stages()
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    return {key.split("@", 1)[1]: entry for key, entry in stages.items()
            if key.startswith("synthesize@") and params["synthetic"][key.split("@", 1)[1]]["source"] == SOURCE}


def _dvc_dir_hash(folder: Path) -> str:
    import tempfile

    from dvc.fs import LocalFileSystem
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.db import HashFileDB

    fs = LocalFileSystem()
    _, _, obj = build(HashFileDB(fs, tempfile.mkdtemp()), str(folder), fs, "md5")
    return obj.hash_info.value


def _project_elsewhere(tmp_path: Path) -> Path:
    """An empty project at another path than this checkout, ``../shared`` a symlink to the datasets folder."""
    project = tmp_path / "elsewhere" / "project"
    (project / "data").mkdir(parents=True)
    (project.parent / "shared").symlink_to(SHARED.resolve().parent, target_is_directory=True)  # ../shared
    (project / "params.yaml").write_bytes((REPO / "params.yaml").read_bytes())
    return project


# the commands run one after another in one process, as the CLI runs each (``toolret.cli.main``), stopping at
# the first that fails (its exit code and arguments on stderr)
_RUN_ALL = """
import json, sys
from toolret.cli import main
for args in json.loads(sys.argv[1]):
    rc = main(args)
    if rc:
        sys.exit(f"toolret {' '.join(args)} exited {rc}")
"""


def _toolret_all(project: Path, commands: list[list[str]]) -> None:
    """Run ``toolret <args>`` for each of ``commands`` in ``project``, in one fresh process (not this one: its
    environment -- ``TOOLRET_DATA_SOURCE``, the working directory -- is the project's)."""
    env = {k: v for k, v in os.environ.items() if k != "TOOLRET_DATA_SOURCE"}
    env["TOOLRET_PROJECT_DIR"] = str(project)
    proc = subprocess.run([sys.executable, "-c", _RUN_ALL, json.dumps(commands)], cwd=project, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"toolret commands failed:\n{proc.stderr[-3000:]}"


def test_the_lock_lists_the_synthetic_catalogs_this_test_rebuilds() -> None:
    names = set(_synthesize_stages())
    assert {"toolbench-synthetic", "toolbench-synthetic-filtered", "toolbench-synthetic-composed"} <= names


@pytest.mark.skipif(not (SHARED / "toolbench-stabletoolbench").is_dir(), reason="../shared/datasets not present")
def test_the_committed_synthetic_catalogs_rebuild_to_their_locked_bytes(built_elsewhere: Path) -> None:
    project = built_elsewhere  # the catalogs built there from dvc.lock's commands (toolbench-g1-instruction's too)
    (project / "data" / "generations").symlink_to(REPO / "data" / "generations", target_is_directory=True)
    stages = _locked_stages()
    commands = [["catalog", "clean", "--catalog", f"data/catalogs/{SOURCE}", "--out", f"data/curated/{SOURCE}"]]
    commands += [["catalog", "synthesize", "--name", name, "--out", f"data/curated/{name}"]
                 for name in sorted(_synthesize_stages())]
    _toolret_all(project, commands)
    assert _dvc_dir_hash(project / "data" / "curated" / SOURCE) == \
        stages[f"clean@{SOURCE}"]["outs"][0]["md5"]
    wrong = []
    for name, entry in sorted(_synthesize_stages().items()):
        built, locked = _dvc_dir_hash(project / "data" / "curated" / name), entry["outs"][0]["md5"]
        if built != locked:
            wrong.append(f"synthesize@{name}: built {built}, dvc.lock records {locked}")
    assert wrong == [], "\n".join(wrong)


def _catalog_stages() -> dict[str, dict]:
    stages = _locked_stages()
    return {key: entry for key, entry in stages.items() if key.startswith("catalog@")}


@pytest.fixture(scope="module")
def built_elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One project at another path than this checkout (``../shared`` a symlink) where one process ran every
    locked ``catalog@`` stage's command (what a fresh clone's ``make run`` runs first)."""
    if not SHARED.is_dir():
        pytest.skip("../shared/datasets not present")
    project = _project_elsewhere(tmp_path_factory.mktemp("catalogs"))
    commands = []
    for stage, entry in sorted(_catalog_stages().items()):
        command = entry["cmd"].split()
        assert command[:3] == ["toolret", "catalog", "build"], f"{stage}: unexpected command {entry['cmd']!r}"
        commands.append(command[1:])
    _toolret_all(project, commands)
    return project


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/datasets not present")
@pytest.mark.parametrize("stage", sorted(_catalog_stages()))
def test_every_locked_catalog_rebuilds_elsewhere_to_its_locked_bytes(stage: str, built_elsewhere: Path) -> None:
    """Each ``catalog@`` stage's command, run in a project at another path (``../shared`` a symlink), writes the
    bytes dvc.lock records (the lock once held stale hashes for five ToolBench groups: a clone rebuilt them and
    re-ran every evaluation downstream)."""
    out = _catalog_stages()[stage]["outs"][0]
    assert (built_elsewhere / out["path"]).is_dir(), f"{stage}: its command wrote no {out['path']}"
    assert _dvc_dir_hash(built_elsewhere / out["path"]) == out["md5"], \
        f"{stage}: the code builds other bytes than dvc.lock records for {out['path']}"
