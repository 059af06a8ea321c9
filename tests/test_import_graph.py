"""The import graph of the core modules: the registry and the config never import the stage machinery (the
core stages are a method package, :mod:`toolret.methods.core`); ``toolret`` never imports Dagster. Imports
anywhere in a module count, the lazy ones inside functions included (as for DVC code deps)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ("toolret.config", "toolret.registry", "toolret.stages")


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


def test_stage_machinery_is_a_leaf_of_the_registry() -> None:
    graph = _graph()
    assert "toolret.registry" in _edges(graph, "toolret.stages")
    assert "toolret.stages" not in _edges(graph, "toolret.registry")
    assert "toolret.stages" not in _edges(graph, "toolret.config")
    # the core stages register themselves like any method's
    assert "toolret.stages" in graph["toolret.methods.core"] and "toolret.registry" in graph["toolret.methods.core"]


def test_toolret_never_imports_dagster() -> None:
    offenders = {m: sorted(i for i in imps if i.split(".")[0] in ("dagster", "dagster_project"))
                 for m, imps in _graph().items()}
    assert not {m: v for m, v in offenders.items() if v}
