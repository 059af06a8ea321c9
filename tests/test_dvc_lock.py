"""The committed ``dvc.lock`` is current for every stage whose outputs are committed to git.

Such a stage (LLM generations, QTA preference data: ``cache: false`` outputs in git) costs minutes to
hours to recompute. If a commit changes one of its code deps or params without updating ``dvc.lock``,
``dvc repro`` (and ``make run``) on a fresh clone regenerates it. A change that cannot alter the output
is recorded with ``dvc commit -f <stage>``; one that can is regenerated -- in the same commit.

What a fresh clone can check without building anything: the stage's command, its dependency list, the
md5 of every git-tracked dependency (the code), its params, and the md5 of its committed outputs. Data
dependencies built by earlier stages (curated catalogs) are produced from the verified datasets by
deterministic stages that ``make run`` rebuilds; they are compared by ``dvc status`` in ``make run``.
"""

from __future__ import annotations

import hashlib
import subprocess

import pytest
import yaml

from toolret.stages import ROOT


def _md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _git_files() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return set(out.stdout.splitlines())


def _lookup(params: dict, dotted: str):
    node = params
    for part in dotted.split("."):
        node = node[part]
    return node


def stale_committed_stages() -> dict[str, list[str]]:
    """``stage -> reasons`` for every ``dvc.lock`` stage whose outputs are all git-tracked and that
    ``dvc repro`` would rerun on a fresh clone because of the code, params or command."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    tracked = _git_files()
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text(encoding="utf-8"))["stages"]
    params_yaml = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    stages = {s.addressing: s for s in Repo(str(ROOT)).index.stages}
    stale: dict[str, list[str]] = {}
    for name, locked in lock.items():
        outs = [o["path"] for o in locked.get("outs", [])]
        if not outs or not all(o in tracked for o in outs):
            continue
        reasons = []
        stage = stages.get(name)
        if stage is None:
            stale[name] = ["no longer in dvc.yaml (remove it from dvc.lock)"]
            continue
        if stage.cmd != locked["cmd"]:
            reasons.append("command changed")
        locked_deps = {d["path"]: d for d in locked.get("deps", [])}
        now_deps = {d.def_path for d in stage.deps if not isinstance(d, ParamsDependency)}
        if set(locked_deps) != now_deps:
            reasons.append(f"deps added {sorted(now_deps - set(locked_deps))[:3]} removed {sorted(set(locked_deps) - now_deps)[:3]}")
        for path, dep in locked_deps.items():
            if path in tracked and (ROOT / path).is_file() and _md5(ROOT / path) != dep["md5"]:
                reasons.append(f"{path} changed")
        for dep in stage.deps:
            if isinstance(dep, ParamsDependency):
                recorded = locked.get("params", {}).get(dep.def_path, {})
                for key in dep.params or []:
                    if key not in recorded or _lookup(params_yaml, key) != recorded[key]:
                        reasons.append(f"param {key} changed")
        for out in locked["outs"]:
            if _md5(ROOT / out["path"]) != out["md5"]:
                reasons.append(f"output {out['path']} differs from its dvc.lock md5")
        if reasons:
            stale[name] = reasons
    return stale


def test_no_stage_with_committed_outputs_is_stale():
    stale = stale_committed_stages()
    assert not stale, ("stages whose committed outputs dvc repro would regenerate (record a change that cannot "
                       f"alter them with `dvc commit -f <stage>`, regenerate otherwise): {stale}")
