"""The house's layers, kept by import-linter (the contracts in ``pyproject.toml``: core <- components <- platform,
the methods' packages independent), every module placed in a layer, and no import cycle between modules.

- core: tools, catalogs, roles and the :class:`~toolret.roles.Ranking`, the pipeline, save / load, metrics,
  evaluation, the registry and the stage templates a method declares (data), provenance, atomic writes, paths;
- components: retrievers, rerankers, rewriters, LLM generation (and the training catalogs it writes), the methods'
  science and their configs;
- platform: the CLI, ``dvc.yaml`` generation (:mod:`toolret.stages`), MLflow tracking, serving, the gateway,
  ``toolret adapt``, ``toolret feedback``, the reproduction matrix, the public facade (:mod:`toolret.api`).

Imports are read by grimp (import-linter's graph): every import statement, those inside functions too.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def layer_modules(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """Every module the layers contract names (each layer: modules separated by ``:`` or ``|``)."""
    contracts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [m.strip() for layer in layers for m in layer.replace("|", ":").split(":") if m.strip()]


def cycles(package: str) -> list[list[str]]:
    """The strongly connected groups of modules of ``package`` (each of two or more modules that import one
    another, directly or through others), by Tarjan's algorithm over grimp's graph."""
    graph = grimp.build_graph(package, cache_dir=None)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # iterative would be longer; the graph is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in edges:
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_import_contracts_hold() -> None:
    done = subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 kept, 0 broken" in done.stdout


def test_every_module_is_in_a_layer() -> None:
    named = layer_modules()
    graph = grimp.build_graph("toolret", cache_dir=None)
    unplaced = sorted(m for m in graph.modules - {"toolret"}
                      if not any(m == n or m.startswith(n + ".") for n in named))
    assert unplaced == [], "add each to a layer of pyproject.toml's [tool.importlinter] layers contract"


def test_no_import_cycle_between_modules() -> None:
    assert cycles("toolret") == []


def _package(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_the_checks_find_an_upward_import_inside_a_function_and_a_cycle(tmp_path: Path) -> None:
    _package(tmp_path, {
        "layered/__init__.py": "", "layered/core/__init__.py": "", "layered/platform/__init__.py": "",
        "layered/platform/cli.py": "from layered.core import model\n",
        "layered/core/model.py": """\
            def save():
                from layered.platform.cli import main  # lazy, still an upward import
                return main
            """,
        "layered/core/a.py": "from layered.core import b\n", "layered/core/b.py": "import layered.core.a\n",
        "pyproject.toml": """\
            [tool.importlinter]
            root_package = "layered"
            [[tool.importlinter.contracts]]
            name = "core <- platform"
            type = "layers"
            layers = ["layered.platform", "layered.core"]
            """})
    done = subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1 and "layered.core.model -> layered.platform.cli (l.2)" in done.stdout, done.stdout
    assert layer_modules(tmp_path / "pyproject.toml") == ["layered.platform", "layered.core"]
    sys.path.insert(0, str(tmp_path))
    try:
        assert cycles("layered") == [["layered.core.a", "layered.core.b"], ["layered.core.model", "layered.platform.cli"]]
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "layered" or m.startswith("layered.")]:
            del sys.modules[name]
