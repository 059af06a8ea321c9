"""Nothing heavy is kept in git: every tracked file weighs at most ``MAX_GIT_FILE_MB``, and every artifact a stage
keeps in git (``cache: false`` outputs: generations, adapters, learned embeddings, a full fine-tune in float16
shards) at most ``MAX_GIT_ARTIFACT_MB`` in all."""

from __future__ import annotations

import subprocess

import pytest

from toolret.registry import MAX_GIT_FILE_MB
from toolret.stages import ROOT

pytestmark = pytest.mark.integration

LIMIT = MAX_GIT_FILE_MB * 1024 * 1024
MAX_GIT_ARTIFACT_MB = 50  # a MiniLM fine-tuned in full: 3 float16 shards of <= 23 MB (toolret.retrieval.finetune)


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [p for p in out.stdout.split("\0") if p]


def oversized(paths: list[str], sizes: dict[str, int], limit: int) -> dict[str, int]:
    """``{path: bytes}`` of the files and of the folders (summed over their files) in ``paths`` over ``limit``."""
    out = {}
    for p in paths:
        total = sum(n for f, n in sizes.items() if f == p or f.startswith(p.rstrip("/") + "/"))
        if total > limit:
            out[p] = total
    return out


def test_oversized_counts_a_folder_as_the_sum_of_its_files():
    sizes = {"data/models/a/dense-ft/x.bin": 20, "data/models/a/dense-ft/y.bin": 10, "data/models/a/z.bin": 5}
    assert oversized(["data/models/a/dense-ft", "data/models/a/z.bin"], sizes, 25) == {"data/models/a/dense-ft": 30}
    assert oversized(["data/models/a/dense-ft"], sizes, 30) == {}


def test_no_tracked_file_over_the_limit():
    sizes = {p: (ROOT / p).stat().st_size for p in _tracked() if (ROOT / p).is_file()}
    big = {p: round(n / 2**20, 1) for p, n in sizes.items() if n > LIMIT}
    assert not big, f"tracked files over {MAX_GIT_FILE_MB} MB (MB): {big}"


def test_every_artifact_kept_in_git_is_small():
    from dvc.repo import Repo

    tracked = _tracked()
    sizes = {p: (ROOT / p).stat().st_size for p in tracked if (ROOT / p).is_file()}
    in_git = [o.def_path for s in Repo(str(ROOT)).index.stages for o in s.outs if not o.use_cache]
    assert in_git, "no stage keeps an output in git: the committed generations are gone from dvc.yaml"
    big = {p: round(n / 2**20, 1) for p, n in oversized(in_git, sizes, MAX_GIT_ARTIFACT_MB * 2**20).items()}
    assert not big, f"artifacts kept in git over {MAX_GIT_ARTIFACT_MB} MB (MB): {big}"
