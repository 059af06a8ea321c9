"""Record a code-only change in ``dvc.lock`` without rebuilding data: ``dvc commit -f`` for the code.

When a commit changes source files that stages import but cannot change what those stages produce (a new
component registered beside the existing ones, a refactor), ``dvc status`` lists every stage importing
them, and ``dvc commit -f`` would need each stage's data deps (curated catalogs ...) built first. This
rewrites, for every locked stage (or those named), the dependency list to what ``dvc.yaml`` now declares:
git-tracked source files get their current md5 and size, other deps keep their locked entry. Params,
commands and outputs are not touched, so a params or command change still shows in ``dvc status``.

With ``--params`` the locked params of the stages are set to what ``params.yaml`` now holds for the keys
each declares: for a params edit that cannot alter outputs (a key moved out of a section that only reports
read, e.g. the papers' numbers to ``paper:``).

A data dep narrowed to a committed subfolder of a folder dep it had (``data/generations`` ->
``data/generations/<model>``: every file git-tracked) gets that subfolder's DVC directory hash.

With ``--adopt`` a data dep the stage newly declares (one it already read but did not list, e.g. the
catalog a dense-ft artifact's key is checked against) gets the entry its producing stage locked for it as
an output: the data the stage was built from, since the stage's own inputs are checked against it at run
time. Each adoption is printed; a dep no locked stage produces is still an error.

A stage is relocked only if it was current in code at ``--rev`` (default ``HEAD``): every git-tracked
code dep its lock entry records must match that revision's version of the file. A stage whose lock already
recorded an older version (its code changed in an earlier commit, unrecorded) is left stale and listed, so
that this tool never hides a change that was not reviewed as output-neutral.

Only for changes that cannot alter outputs; say so in the commit message. ``tests/test_dvc_lock.py``
checks the committed stages afterwards.

Usage: .venv/bin/python tools/relock_code_deps.py [--params] [--adopt] [--rev REV] [STAGE ...]
"""

from __future__ import annotations

import copy
import hashlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _code_entry(root: Path, path: str) -> dict:
    data = (root / path).read_bytes()
    return {"path": path, "hash": "md5", "md5": hashlib.md5(data).hexdigest(), "size": len(data)}


def _narrowed_entry(root: Path, path: str, old: dict, tracked: set[str]) -> dict | None:
    """The locked entry of ``path`` where it is a git-tracked folder (every file committed, e.g. LLM generation
    shards) inside a folder dep of the stage's lock entry: the stage now declares part of what it read (its
    DVC directory hash, as ``dvc commit`` would record it); else ``None``."""
    folder = root / path
    if not folder.is_dir() or not any(path.startswith(p.rstrip("/") + "/") for p in old):
        return None
    files = [f.relative_to(root).as_posix() for f in folder.rglob("*") if f.is_file()]
    if not files or any(f not in tracked for f in files):
        return None
    import tempfile

    from dvc.fs import LocalFileSystem
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.db import HashFileDB

    fs = LocalFileSystem()
    with tempfile.TemporaryDirectory() as odb:
        _, meta, obj = build(HashFileDB(fs, odb), str(folder), fs, "md5")
    return {"path": path, "hash": "md5", "md5": obj.hash_info.value, "size": meta.size, "nfiles": meta.nfiles}


def _md5_at(root: Path, rev: str, path: str, memo: dict) -> str | None:
    """md5 of ``path`` as committed at ``rev`` (None where it did not exist there)."""
    if path not in memo:
        out = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True)
        memo[path] = hashlib.md5(out.stdout).hexdigest() if out.returncode == 0 else None
    return memo[path]


def _lookup(params: dict, dotted: str):
    node = params
    for part in dotted.split("."):
        node = node[part]
    return node


def main(argv: list[str], root: Path = ROOT) -> int:
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo
    from ruamel.yaml import YAML

    tracked = set(subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                                 check=True).stdout.splitlines())
    yaml = YAML()
    yaml.width = 4096
    lock_path = root / "dvc.lock"
    lock = yaml.load(lock_path.read_text(encoding="utf-8"))
    relock_params = "--params" in argv
    adopt = "--adopt" in argv  # newly declared data deps take their producer's locked output
    rev = "HEAD"
    if "--rev" in argv:
        i = argv.index("--rev")
        rev = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    argv = [a for a in argv if a not in ("--params", "--adopt")]
    stages = list(Repo(str(root)).index.stages)
    declared = {s.name: [d.def_path for d in s.deps if not isinstance(d, ParamsDependency)] for s in stages}
    declared_params = {s.name: {d.def_path: list(d.params or []) for d in s.deps if isinstance(d, ParamsDependency)}
                       for s in stages}
    current = {}
    if relock_params:
        for path in {p for by_file in declared_params.values() for p in by_file}:
            current[path] = YAML(typ="safe").load((root / path).read_text(encoding="utf-8")) or {}
    produced = {o["path"]: o for entry in lock["stages"].values() for o in entry.get("outs", [])} if adopt else {}
    names = argv or list(lock["stages"])
    unknown = [n for n in names if n not in lock["stages"] or n not in declared]
    if unknown:
        print(f"relock: not in both dvc.lock and dvc.yaml: {unknown}", file=sys.stderr)
        return 2
    changed = 0
    committed: dict = {}
    left_stale = []
    for name in names:
        entry = lock["stages"][name]
        old = {d["path"]: d for d in entry.get("deps", [])}
        if any(path in tracked and d.get("md5") != _md5_at(root, rev, path, committed)
               and _md5_at(root, rev, path, committed) is not None for path, d in old.items()):
            left_stale.append(name)  # its code changed before rev, unrecorded: not this tool's to hide
            continue
        new = []
        for path in declared[name]:
            if path in tracked and (root / path).is_file():
                new.append(_code_entry(root, path))
            elif path in old:
                new.append(old[path])
            elif (narrowed := _narrowed_entry(root, path, old, tracked)) is not None:
                new.append(narrowed)  # a subfolder of a data dep it read whole: it reads less, not other data
                print(f"relock: {name}: data dep narrowed to the committed folder {path}")
            elif path in produced:
                new.append({k: v for k, v in produced[path].items() if k != "cache"})
                print(f"relock: {name}: new data dep {path} adopts its producer's locked output")
            else:
                print(f"relock: {name}: data dep {path} was never locked; run `dvc commit -f {name}` (or --adopt "
                      "where a stage produces it)", file=sys.stderr)
                return 2
        new.sort(key=lambda d: d["path"])  # dvc writes deps in path order
        stage_changed = False
        if [dict(d) for d in entry.get("deps", [])] != new:
            entry["deps"] = new
            stage_changed = True
        for path, keys in declared_params[name].items() if relock_params else ():
            locked = entry.setdefault("params", {}).setdefault(path, {})
            for key in keys:
                value = _lookup(current[path], key)
                if locked.get(key) != value:
                    locked[key] = copy.deepcopy(value)  # no YAML anchors between stages
                    stage_changed = True
        changed += stage_changed
    tmp = lock_path.with_suffix(".lock.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        yaml.dump(lock, f)
    tmp.replace(lock_path)
    print(f"relock: {changed} of {len(names)} stages' code deps{' and params' if relock_params else ''} updated")
    if left_stale:
        print(f"relock: {len(left_stale)} stages left stale (their lock records code older than {rev}): "
              f"{', '.join(left_stale)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
