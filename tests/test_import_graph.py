"""The import graph of the core modules: the registry and the config never import the stage machinery (the
core stages are a method package, :mod:`toolret.methods.core`); the config imports the registry (its params
model is built from the registered sections), the registry never imports the config; both read the project's
paths and raw ``params.yaml`` from :mod:`toolret.paths`, which imports no other core module; no import cycle
among them; ``toolret`` never imports Dagster. Imports anywhere in a module count, the lazy ones inside
functions and ``TYPE_CHECKING`` blocks included (as for DVC code deps)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ("toolret.config", "toolret.registry", "toolret.stages", "toolret.paths")


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    mod = _module(path)
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            name = ".".join(base[: len(base) - node.level + 1] + [node.module or ""]) if node.level else node.module
            out.add((name or "").strip("."))
            out.update(f"{name}.{a.name}" for a in node.names)
    return out


def _graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p) for p in (ROOT / "toolret").rglob("*.py")}


def _edges(graph: dict[str, set[str]], src: str) -> set[str]:
    return {c for c in CORE if c != src and any(i == c or i.startswith(c + ".") for i in graph[src])}


def _targets(graph: dict[str, set[str]], src: str) -> set[str]:
    """The ``toolret`` modules ``src`` imports (an imported name resolved to the module defining it)."""
    out: set[str] = set()
    for name in graph.get(src, ()):
        parts = name.split(".")
        found = next((m for m in (".".join(parts[:n]) for n in range(len(parts), 0, -1)) if m in graph), None)
        if found is not None and found != src:
            out.add(found)
    return out


def _reach(graph: dict[str, set[str]], src: str) -> set[str]:
    """Every ``toolret`` module ``src`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [src]
    while todo:
        for m in _targets(graph, todo.pop()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def test_the_registry_never_imports_the_config() -> None:
    graph = _graph()
    assert "toolret.config" not in _edges(graph, "toolret.registry")  # not even lazily
    assert "toolret.config" not in _reach(graph, "toolret.registry")  # nor through another module
    assert "toolret.registry" in _edges(graph, "toolret.config")  # the params model reads the registered sections


def test_no_import_cycle_among_the_core_modules() -> None:
    graph = _graph()
    # a core module on a cycle -> the other core modules on it (a cycle through any module counts)
    cycles = {m: sorted(c for c in CORE if c != m and c in _reach(graph, m) and m in _reach(graph, c))
              for m in CORE if m in _reach(graph, m)}
    assert not cycles
    # the path and raw params-file helpers depend on no other core module (only on the errors)
    assert "toolret.paths" in graph and _reach(graph, "toolret.paths") <= {"toolret.errors"}


def test_stage_machinery_is_a_leaf_of_the_registry() -> None:
    graph = _graph()
    assert "toolret.registry" in _edges(graph, "toolret.stages")
    assert "toolret.stages" not in _edges(graph, "toolret.registry")
    assert "toolret.stages" not in _edges(graph, "toolret.config")
    # the core stages register themselves like any method's, declared with the stage templates (data), never
    # with the dvc.yaml generator
    assert "toolret.stage_templates" in graph["toolret.methods.core"] and "toolret.registry" in graph["toolret.methods.core"]
    assert not [m for m, imps in graph.items() if m.startswith("toolret.methods")
                and any(i == "toolret.stages" or i.startswith("toolret.stages.") for i in imps)]


def test_toolret_never_imports_dagster() -> None:
    offenders = {m: sorted(i for i in imps if i.split(".")[0] in ("dagster", "dagster_project"))
                 for m, imps in _graph().items()}
    assert not {m: v for m, v in offenders.items() if v}
