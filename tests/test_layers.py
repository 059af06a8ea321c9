"""Three layers whose imports only point down: core <- components <- platform.

- core: tools, catalogs, roles, the pipeline, save / load, metrics, evaluation, the registry and the stage
  templates a method declares (data), provenance, atomic writes, paths;
- components: retrievers, rerankers, rewriters, LLM generation, the methods' science and their configs;
- platform: the CLI, ``dvc.yaml`` generation (:mod:`toolret.stages`), MLflow tracking, serving, the gateway,
  ``toolret adapt``, ``toolret feedback``, the reproduction matrix, the public facade (:mod:`toolret.api`).

A module's layer is that of the longest prefix below naming it. Imports are read by grimp (import-linter's
graph), every import statement counted: those inside functions too.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import grimp
import pytest

CORE, COMPONENTS, PLATFORM = 0, 1, 2
NAMES = {CORE: "core", COMPONENTS: "components", PLATFORM: "platform"}
LAYERS = {
    "toolret": PLATFORM,  # the package facade (re-exports the public API)
    "toolret.atomic": CORE, "toolret.out_folders": CORE, "toolret.paths": CORE, "toolret.artifact_key": CORE, "toolret.metrics": CORE,
    "toolret.catalog": CORE, "toolret.roles": CORE, "toolret.pipeline": CORE, "toolret.evaluation": CORE,
    "toolret.evaluate_api": CORE, "toolret.config": CORE, "toolret.registry": CORE, "toolret.stage_templates": CORE,
    "toolret.jsonl_artifacts": CORE, "toolret.report_file": CORE, "toolret.grid_report": CORE,
    "toolret.provenance": CORE, "toolret.training_log": CORE, "toolret.errors": CORE,
    "toolret.retrieval.base": CORE,  # the Retriever interface every component implements
    "toolret.retrieval": COMPONENTS, "toolret.methods": COMPONENTS, "toolret.llm": COMPONENTS,
    "toolret.catalog.synthetic": COMPONENTS,  # writes training catalogs with the LLM and BM25
    "toolret.cli": PLATFORM, "toolret.stages": PLATFORM, "toolret.tracking": PLATFORM, "toolret.serving": PLATFORM,
    "toolret.serve": PLATFORM, "toolret.gateway": PLATFORM, "toolret.adapt": PLATFORM, "toolret.reproduce": PLATFORM,
    "toolret.api": PLATFORM, "toolret.agent_adapters": PLATFORM, "toolret.feedback": PLATFORM,
}


def layer_of(module: str, layers: dict[str, int]) -> int | None:
    """The layer of the longest prefix of ``module`` in ``layers`` (None: no prefix names it)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in layers:
            return layers[".".join(parts[:n])]
    return None


def upward_imports(package: str, layers: dict[str, int]) -> list[str]:
    """Every import statement (module top or inside a function) of a module of ``package`` that names a module
    of a higher layer, as ``importer:line -> imported (layer -> layer)``."""
    graph = grimp.build_graph(package, cache_dir=None)
    found = []
    for imp in graph.find_matching_direct_imports(import_expression=f"{package}.** -> {package}.**"):
        low, high = layer_of(imp["importer"], layers), layer_of(imp["imported"], layers)
        if low is not None and high is not None and high > low:
            for d in graph.get_import_details(importer=imp["importer"], imported=imp["imported"]):
                found.append(f"{d['importer']}:{d['line_number']} -> {d['imported']} ({NAMES[low]} -> {NAMES[high]})")
    return sorted(found)


def test_every_module_has_a_layer() -> None:
    graph = grimp.build_graph("toolret", cache_dir=None)
    assert not sorted(m for m in graph.modules if layer_of(m, LAYERS) is None)


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_imports("toolret", LAYERS) == []


def test_the_check_finds_an_upward_import_inside_a_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "layered"
    for sub in ("core", "platform"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "platform" / "cli.py").write_text("from layered.core import model\n")
    (pkg / "core" / "model.py").write_text(textwrap.dedent("""\
        def save():
            from layered.platform.cli import main  # lazy, still an upward import
            return main
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    layers = {"layered": PLATFORM, "layered.core": CORE, "layered.platform": PLATFORM}
    assert upward_imports("layered", layers) == ["layered.core.model:2 -> layered.platform.cli (core -> platform)"]
    sys.modules.pop("layered", None)
