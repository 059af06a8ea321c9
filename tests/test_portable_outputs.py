"""Outputs depend on their inputs' content and parameters only, never on where the data or the checkout live.

The catalog of a dataset read from a copy of the datasets folder at one absolute path and from a symbolic
link at another is byte-identical (a DVC hash that moved with the directory layout made a fresh clone's
``make run`` regenerate every committed LLM output downstream); and no committed output or run-info sidecar
holds a path of a machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolret.catalog.io import save_catalog
from toolret.catalog.datasets import load_dataset, source_dirs
from toolret.catalog.source import source_root

REPO = Path(__file__).resolve().parents[1]
SHARED = source_root()
# the small datasets (the catalog of each is built in seconds); the loaders of the large ones share the code
DATASETS = ("mtrb-restbench", "mtrb-metatool", "toollens")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/datasets not present")
def test_catalogs_are_byte_identical_from_a_copy_and_a_symlink_elsewhere(tmp_path: Path) -> None:
    copy_root = tmp_path / "machine-a" / "datasets"
    for name in DATASETS:
        for d in source_dirs(name):
            if not (copy_root / d).exists():
                shutil.copytree(SHARED / d, copy_root / d)
    link_root = tmp_path / "machine-b" / "deeper" / "datasets"
    link_root.parent.mkdir(parents=True)
    link_root.symlink_to(SHARED, target_is_directory=True)
    for name in DATASETS:
        a = save_catalog(load_dataset(name, root=copy_root), tmp_path / "out-a" / name)
        b = save_catalog(load_dataset(name, root=link_root), tmp_path / "out-b" / name)
        fa, fb = _files(a), _files(b)
        assert sorted(fa) == sorted(fb)
        for rel in fa:
            assert fa[rel] == fb[rel], f"{name}/{rel} differs between two locations of the same datasets"
        text = fa["catalog.json"].decode()
        for root in (copy_root, link_root, SHARED.resolve(), tmp_path):
            assert str(root) not in text, f"{name}/catalog.json names the machine path {root}"


# a JSON string that is a whole absolute path of a machine (a sentence an LLM wrote that mentions
# `/home/user/docs` is not one: it does not start with the path)
MACHINE_PATH = re.compile(r"^/(?:work|tmp|home|root|Users|opt|usr|var|mnt|srv|private)(?:/[^\s/]+)+/?$")
TEXT_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml")
LOCAL = [str(REPO), str(REPO.parent), str(SHARED.resolve())]  # this checkout's and the datasets' locations


def machine_paths(value, where: str = "") -> list[str]:
    """Every ``(where, path)`` in a parsed JSON value whose string is a machine's absolute path or embeds this
    checkout's or the datasets' location."""
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            found += machine_paths(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += machine_paths(v, f"{where}[{i}]")
    elif isinstance(value, str):
        if MACHINE_PATH.match(value) or any(p in value for p in LOCAL if len(p) > 1):
            found.append(f"{where}: {value[:120]}")
    return found


# what the raw text of a file that holds such a path must contain (JSON may write "/" as "\/"): a file without
# it is not parsed (most committed outputs; parsing them all took 44 s)
MAY_NAME_A_PATH = re.compile(r"\\?/(?:work|tmp|home|root|Users|opt|usr|var|mnt|srv|private)(?![A-Za-z0-9_])")


def may_name_a_machine_path(text: str) -> bool:
    return bool(MAY_NAME_A_PATH.search(text)) or any(
        v in text for p in LOCAL if len(p) > 1 for v in (p, p.replace("/", "\\/")))


def test_machine_paths_finds_what_it_must() -> None:
    for value in ({"provenance": {"source": "/work/shared/datasets/toollens"}}, [{"a": f"see {REPO}/data/x"}],
                  {"b": "/tmp/x/y"}):
        assert machine_paths(value)
        for text in (json.dumps(value), json.dumps(value).replace("/", "\\/")):  # both ways JSON writes "/"
            assert may_name_a_machine_path(text), text
        import yaml

        assert may_name_a_machine_path(yaml.safe_dump(value))
    assert not machine_paths({"output": "is '/home/user/documents' a folder?", "source": "toollens"})
    assert not may_name_a_machine_path(json.dumps({"output": "a home/user path", "source": "toollens"}))


def _committed_outputs() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "data", "results"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    return [REPO / p for p in out.splitlines() if p.endswith(TEXT_SUFFIXES)]


def _read_records(path: Path) -> list:
    text = path.read_text(encoding="utf-8")
    if not may_name_a_machine_path(text):
        return []  # no record of it can hold one (test_machine_paths_finds_what_it_must)
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return [yaml.safe_load(text)]
    return [json.loads(text)]


@pytest.mark.integration  # reads every committed output
def test_no_committed_output_or_run_info_names_a_machine_path() -> None:
    files = _committed_outputs()
    assert files, "no committed outputs under data/ (git ls-files data)"
    run_info = REPO / "data" / "run_info"
    if run_info.is_dir():  # the sidecars of this checkout's runs (untracked, but read by reports and MLflow)
        files += sorted(run_info.rglob("*.json"))
    bad = []
    for path in files:
        for i, rec in enumerate(_read_records(path)):
            bad += [f"{path.relative_to(REPO)}#{i}{hit}" for hit in machine_paths(rec)]
    assert not bad, "outputs naming a machine path:\n" + "\n".join(bad[:20])


def test_dvc_lock_names_no_absolute_path() -> None:
    from toolret.provenance import read_dvc_lock

    lock = read_dvc_lock(REPO)
    bad = [f"{stage}: {d['path']}" for stage, s in lock["stages"].items()
           for d in [*(s.get("deps") or []), *(s.get("outs") or [])] if os.path.isabs(d["path"])]
    assert not bad, bad[:10]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
