"""The whole graph's ``dvc status``, kept from one run to the next while no file it reads changed.

``dvc status`` of the whole graph is the fixed cost of every run (~40 s on 2 cores: DVC expands ``dvc.yaml``,
parses the 4 MB ``dvc.lock`` and checks every dep and out). Its answer is a function of the files it reads:
``dvc.yaml``, ``dvc.lock``, ``params.yaml``, the stages' deps and outs (under ``data/``, the code under the
packages the stages import, the datasets folder). A run that ends with the graph in a known state stores that
status with a fingerprint of those files (path, size, mtime in ns: what DVC's own state database trusts to skip
rehashing a file); the next run whose fingerprint is the same takes the stored status instead of asking DVC
again, and one whose fingerprint differs asks DVC as before. Runtime stores under ``data/`` (Dagster's home,
MLflow's store, run-info sidecars, this folder) are not part of it: no stage reads them.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

SNAPSHOT = Path("data") / ".orchestration" / "graph-status.json"
RUNTIME = ("dagster_home", ".orchestration", "run_info", "mlflow")  # under data/: written by runs, read by no stage
GRAPH_FILES = ("dvc.yaml", "dvc.lock", "params.yaml")


def _roots(project: Path) -> list[Path]:
    """What the stages read and write: ``data/`` (less its runtime stores), every path a stage names outside it
    (the code packages: their top folder), and the datasets folder of ``params.yaml``."""
    from toolret.paths import load_yaml_file

    roots = [project / "data" / p.name for p in (project / "data").iterdir()
             if p.name not in RUNTIME] if (project / "data").is_dir() else []
    spec = load_yaml_file(project / "dvc.yaml")
    named: set[str] = set()
    for stage in (spec or {}).get("stages", {}).values():
        body = stage.get("do", stage)
        for entry in [*body.get("deps", []), *body.get("outs", [])]:
            path = entry if isinstance(entry, str) else next(iter(entry))
            head = path.split("${")[0]
            if head and not head.startswith("data/"):
                named.add(head.split("/")[0] if "/" in head else head)
    roots += [project / n for n in sorted(named)]
    params = load_yaml_file(project / "params.yaml") or {}
    source = (params.get("source") or {}).get("root")
    if source:
        roots.append((project / source) if not os.path.isabs(source) else Path(source))
    return roots


def fingerprint(project: str | Path) -> str:
    """sha256 over the graph files' bytes and every file under :func:`_roots` as (path, size, mtime ns)."""
    project = Path(project)
    h = hashlib.sha256()
    for name in GRAPH_FILES:
        f = project / name
        h.update(name.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"<absent>") + b"\0")
    for root in _roots(project):
        if root.is_file():
            st = root.stat()
            h.update(f"{root}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            continue
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except FileNotFoundError:  # a dangling link: as DVC, a missing file
                    continue
                h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def stored_status(project: str | Path, current: str | None = None) -> dict[str, Any] | None:
    """The stored status where its fingerprint is ``current`` (computed if not given), else ``None``."""
    path = Path(project) / SNAPSHOT
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    if data.get("fingerprint") != (current if current is not None else fingerprint(project)):
        return None
    return data["stale"]


def store_status(project: str | Path, stale: dict[str, Any], run_id: str) -> None:
    """Keep ``stale`` (``dvc status``'s answer for the graph as it is now) for the next run."""
    from toolret.atomic import write_json

    project = Path(project)
    write_json(project / SNAPSHOT, {"fingerprint": fingerprint(project), "stale": stale, "run_id": run_id})


def forget(project: str | Path) -> None:
    (Path(project) / SNAPSHOT).unlink(missing_ok=True)


__all__ = ["SNAPSHOT", "fingerprint", "forget", "store_status", "stored_status"]
