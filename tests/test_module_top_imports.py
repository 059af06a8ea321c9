"""Imports sit at the module top: a ``toolret`` import inside a function is kept only where a top-level one
would close an import cycle, load a heavy library on import, or make every stage depend on more code
(:data:`KEPT`, with the reason). A stage's code deps are what its entry function uses
(:func:`toolret.stages.entry_imports`), so a command module imports every command's code at its top.

Heavy third-party libraries (torch, transformers, MLflow ...) stay inside the functions that use them.
"""

from __future__ import annotations

import ast

from toolret.stages import ROOT

# module -> the function-level toolret imports it keeps, and why
KEPT = {
    "toolret/methods/colt/components.py": ("toolret.methods.colt.graphs", "toolret.methods.colt.train"),  # scipy, torch
    "toolret/methods/colt/train.py": ("toolret.methods.colt.model",),  # torch at its top
    # the dvc.yaml generator's top level is a code dep of every stage (registration_modules): the params
    # models are read only when it writes dvc.yaml
    "toolret/stages.py": ("toolret.config",),
}


def function_level_imports(path) -> list[tuple[int, str]]:
    """``(line, imported module)`` of every ``toolret`` import not at the module's top level (a top-level
    ``if`` / ``try`` block counts as top level)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = set()
    for node in tree.body:
        top.update(map(id, ast.walk(node)) if isinstance(node, (ast.If, ast.Try, ast.With)) else [id(node)])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                names = ["toolret (relative)"]
            out += [(node.lineno, n) for n in names if n.startswith("toolret")]
    return out


def test_toolret_imports_sit_at_the_module_top() -> None:
    found = {}
    for path in sorted((ROOT / "toolret").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        lazy = [(line, m) for line, m in function_level_imports(path) if m not in KEPT.get(rel, ())]
        if lazy:
            found[rel] = lazy
    assert found == {}, "move these imports to the module top (or say in KEPT why not)"
    assert all(function_level_imports(ROOT / rel) for rel in KEPT), "a KEPT entry that is no longer needed"


def test_the_check_finds_an_import_inside_a_function(tmp_path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import json\nif json:\n    from toolret import paths\n\n"
                      "def f():\n    from toolret.atomic import write_json\n    return write_json\n")
    assert function_level_imports(module) == [(6, "toolret.atomic")]


def test_no_module_imports_a_private_name_of_another() -> None:
    """The CLI, Dagster, the benchmarks and tools use toolret's public names only."""
    found = []
    for folder in ("toolret", "dagster_project", "benchmarks", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolret"):
                    found += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []


def test_a_stage_entry_depends_on_what_it_uses_not_on_its_module_top() -> None:
    """``toolret fit`` builds a component through the registry; the CLI's other commands' imports (the
    gateway, the reproduction matrix) are at the same module top but no dep of it."""
    from toolret.stages import entry_imports

    used = entry_imports("toolret.cli:cmd_fit")
    assert "toolret.registry" in used or "toolret.registry.build_component" in used
    assert not {m for m in used if m.startswith(("toolret.gateway", "toolret.reproduce", "toolret.serving"))}
