"""The committed ``dvc.lock`` is current for every stage whose outputs are committed to git.

Such a stage (LLM generations, QTA preference data, trained adapters and learned embeddings:
``cache: false`` outputs in git, see ``toolret.registry.in_git``) costs minutes to hours to recompute. If a commit changes one of its code deps or params without updating ``dvc.lock``,
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

from toolret.stages import ROOT

pytestmark = pytest.mark.integration


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


def _yaml12(text: str):
    """YAML 1.2 as DVC reads and writes it (PyYAML's 1.1 reads ``1e-07``, which DVC writes, as a string)."""
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(text)


def _tracked_under(path: str, tracked: set[str]) -> list[str]:
    """The git-tracked files an output path covers (itself, or the files of a directory)."""
    return [t for t in tracked if t == path or t.startswith(path.rstrip("/") + "/")]


def stale_committed_stages() -> dict[str, list[str]]:
    """``stage -> reasons`` for every ``dvc.yaml`` stage whose outputs are kept in git (``cache: false``,
    :func:`toolret.registry.in_git`) that ``dvc repro`` would rerun on a fresh clone because of the code,
    params or command, or whose committed outputs and ``dvc.lock`` disagree. A stage with such outputs
    neither committed nor locked is not produced yet (``make run`` defers it) and is not stale."""
    from dvc.dependency.param import ParamsDependency
    from dvc.dvcfile import load_file
    from dvc.repo import Repo

    tracked = _git_files()
    lock = _yaml12((ROOT / "dvc.lock").read_text(encoding="utf-8"))["stages"]
    params_yaml = _yaml12((ROOT / "params.yaml").read_text(encoding="utf-8"))
    with Repo(str(ROOT)) as repo:  # dvc.yaml's stages (not repo.index: it would parse dvc.lock a second time,
        dvcfile = load_file(repo, str(ROOT / "dvc.yaml"))  # ~10 s, for hashes this reads from `lock` above)
        dvcfile.lockfile_contents = {}
        stages = {s.addressing: s for s in dvcfile.stages.values()}
    stale: dict[str, list[str]] = {}
    for name in sorted(set(lock) | set(stages)):
        stage, locked = stages.get(name), lock.get(name)
        if stage is None:
            if locked and locked.get("outs") and all(_tracked_under(o["path"], tracked) for o in locked["outs"]):
                stale[name] = ["no longer in dvc.yaml (remove it from dvc.lock)"]
            continue
        if not stage.outs or any(o.use_cache for o in stage.outs):
            continue
        committed = {o.def_path: bool(_tracked_under(o.def_path, tracked)) for o in stage.outs}
        if locked is None:
            if any(committed.values()):
                stale[name] = ["outputs committed but the stage is not in dvc.lock (`dvc commit -f` it)"]
            continue
        reasons = [f"output {p} is in dvc.lock but not committed to git" for p, c in committed.items() if not c]
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
        locked_outs = {o["path"]: o.get("md5") for o in locked.get("outs", [])}
        for out in stage.outs:
            if committed[out.def_path] and out.get_hash().value != locked_outs.get(out.def_path):
                reasons.append(f"output {out.def_path} differs from its dvc.lock md5")
        if reasons:
            stale[name] = reasons
    return stale


def test_no_stage_with_committed_outputs_is_stale():
    stale = stale_committed_stages()
    assert not stale, ("stages whose committed outputs dvc repro would regenerate (record a change that cannot "
                       f"alter them with `dvc commit -f <stage>`, regenerate otherwise): {stale}")
