"""Every method is one :class:`toolret.registry.Method` registered with one call, and the registry's lookups
(components, pipelines, sections, stages, reports, generation jobs, CLI commands) read the registered methods."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import toolret.methods
import toolret.registry as reg
from toolret.errors import CatalogError
from toolret.config import StrictModel, load_params
from toolret.registry import CliCommand, Component, Method, NamedPipeline, Section, StageTemplate, register_method

PACKAGES = sorted(i.name for i in pkgutil.iter_modules(toolret.methods.__path__))


@pytest.fixture
def methods():
    """The registered methods, restored after the test."""
    reg.load_plugins()
    saved = dict(reg._METHODS)
    yield reg._METHODS
    reg._METHODS.clear()
    reg._METHODS.update(saved)


def _retriever(name: str) -> Component:
    return Component(name, "retriever", lambda ctx: None, lambda path: None)


def test_every_method_package_exports_one_registered_method() -> None:
    assert PACKAGES == ["baselines", "colt", "core", "qta", "reinvoke", "toolrerank"]
    registered = reg.methods()
    for name in PACKAGES:
        module = importlib.import_module(f"toolret.methods.{name}")
        assert isinstance(module.METHOD, Method), name
        assert registered[module.METHOD.name] is module.METHOD, name
        assert module.METHOD.module == module.__name__, name
    # the core stages are a method like any other
    core = registered["core"]
    assert {"catalog", "clean", "index", "evaluate", "index_ft"} <= {t.name for t in core.stages}
    assert not core.components and reg.stage_owner("catalog") == "toolret.methods.core"


def test_lookups_read_the_registered_methods() -> None:
    registered = reg.methods()
    names = lambda attr: sorted(x.name for m in registered.values() for x in getattr(m, attr))  # noqa: E731
    assert names("components") == sorted(c.name for c in reg.components())
    assert names("pipelines") == sorted(reg.pipelines(load_params()))
    assert names("sections") == sorted(reg.config_sections())
    assert names("stages") == sorted(t.name for t in reg.stage_templates())
    assert sorted(j for m in registered.values() for j in m.generation_jobs) == reg.generation_jobs()
    assert {n for n, m in registered.items() if m.report} == {"colt", "qta", "reinvoke", "toolrerank"}
    assert reg.report_hook("qta").__module__ == "toolret.methods.qta.report"
    with pytest.raises(CatalogError, match="no ablation report for 'baselines'"):
        reg.report_hook("baselines")


def test_the_old_per_item_registration_calls_are_gone() -> None:
    for old in ("register_component", "register_pipeline", "register_section", "register_stage", "register_report",
                "register_generation_job"):
        assert not hasattr(reg, old), old
    for path in Path(toolret.methods.__path__[0]).glob("*/__init__.py"):
        assert path.read_text(encoding="utf-8").count("register_method(") == 1, path


def test_a_method_registers_everything_at_once(methods) -> None:
    class ToyConfig(StrictModel):
        x: int = 1

    stage = StageTemplate(name="toy_stage", desc="d", cmd="toolret index", entry="toolret.cli:cmd_index")
    method = register_method(Method(
        name="toy", components=[_retriever("toy-r")], pipelines=[NamedPipeline("toy-p", "toy-r", "a toy")],
        sections=[Section("toy", ToyConfig, staged=True)], stages=[stage], report="toolret.methods.qta.report:write_report",
        generation_jobs={"toy-job": "toolret.methods.reinvoke.generation:queries_job"},
        cli=[CliCommand("toy-cmd", "a toy command", run="toolret.cli:main")],
    ))
    assert method.module == __name__ and isinstance(method.components, tuple)
    assert reg.component("toy-r").role == "retriever"
    assert reg.parse_spec("toy-p", load_params()).components == ["toy-r"]
    assert reg.config_sections()["toy"] == (ToyConfig, True) and reg.stage_owner("toy_stage") == __name__
    assert "toy-job" in reg.generation_jobs() and "toy-cmd" in [c.name for c in reg.cli_commands()]
    assert reg.report_hook("toy").__module__ == "toolret.methods.qta.report"
    # registering it again from the same module (a re-import) replaces it
    again = register_method(Method(name="toy", components=[_retriever("toy-r2")]))
    assert reg.methods()["toy"] is again and "toy-r" not in reg.available_methods()


def test_names_are_unique_across_methods(methods) -> None:
    before = dict(methods)
    with pytest.raises(ValueError, match=r"component names \{'bm25': 'baselines'\}"):
        register_method(Method(name="clash", components=[_retriever("bm25")]))
    with pytest.raises(ValueError, match=r"stage names \{'catalog': 'core'\}"):
        register_method(Method(name="clash", stages=[StageTemplate(name="catalog", desc="", cmd="", entry="")]))
    with pytest.raises(ValueError, match="registered twice"):
        register_method(Method(name="core", module="somewhere.else"))
    with pytest.raises(ValueError, match="given twice"):
        register_method(Method(name="clash", components=[_retriever("a1"), _retriever("a1")]))
    # a pipeline that does not parse leaves nothing registered
    with pytest.raises(CatalogError, match="unknown component 'nope'"):
        register_method(Method(name="clash", components=[_retriever("c1")],
                               pipelines=[NamedPipeline("clash-p", "c1+nope")]))
    assert methods == before


SEEN: list = []


def _toy_command(args, params, catalog) -> None:
    SEEN.append((args.flag, params.bm25.k1, catalog.name if catalog is not None else None))


def test_a_method_contributes_cli_subcommands(methods, tmp_path: Path) -> None:
    from make_fixture import write_fixture_catalog

    from toolret.cli import build_parser, main

    def arguments(parser) -> None:
        parser.add_argument("--flag", default="x")

    register_method(Method(name="toy", cli=[
        CliCommand("toy-run", "a toy command", run=f"{__name__}:_toy_command", arguments=arguments),
        CliCommand("toy-source", "a toy command on a catalog", run=f"{__name__}:_toy_command", arguments=arguments,
                   source=True, overrides=False),
    ]))
    SEEN.clear()
    assert main(["toy-run", "--flag", "y", "--set", "bm25.k1=0.5"]) == 0
    source = write_fixture_catalog(tmp_path / "fixture")
    assert main(["toy-source", "--dataset", str(source)]) == 0
    assert SEEN == [("y", 0.5, None), ("x", 1.2, "fixture")]
    with pytest.raises(SystemExit):  # no --set where the command takes no overrides
        build_parser().parse_args(["toy-source", "--dataset", "d", "--set", "a.b=1"])


def test_reranker_separation_and_toolrerank_grid_are_toolrerank_s_commands_not_the_core_cli() -> None:
    from toolret.cli import build_parser

    commands = {c.name: c for c in reg.methods()["toolrerank"].cli}
    assert set(commands) == {"reranker-separation", "toolrerank-grid"}
    assert all(c.run.startswith("toolret.methods.toolrerank.") and c.source for c in commands.values())
    args = build_parser().parse_args(["reranker-separation", "--dataset", "toollens", "--artifact", "a"])
    assert (args.artifact, args.queries, args.seed) == ("a", 200, 99)
    args = build_parser().parse_args(["toolrerank-grid", "--catalog", "c", "--artifact", "a"])
    assert (args.artifact, args.split, args.queries, args.seed) == ("a", "dev", 300, 13)
    cli = (Path(toolret.methods.__path__[0]).parent / "cli.py").read_text(encoding="utf-8")
    assert "toolrerank" not in cli.lower() and "reranker-separation" not in cli


def test_loads_reads_a_saved_component_through_its_class_imported_on_first_use(tmp_path):
    from toolret.registry import component, loads
    from toolret.retrieval.bm25 import BM25Retriever

    r = BM25Retriever()
    r.index(["a", "b"], ["weather forecast", "movie search"])
    r.save(tmp_path / "bm25")
    back = loads("toolret.retrieval.bm25:BM25Retriever")(tmp_path / "bm25")
    assert isinstance(back, BM25Retriever) and back.search(["weather"], 1).ranked_ids(0) == ["a"]
    assert component("bm25").load(tmp_path / "bm25").search(["movie"], 1).ranked_ids(0) == ["b"]
    with pytest.raises(ValueError, match="module:Class"):
        loads("toolret.retrieval.bm25.BM25Retriever")


def test_a_named_pipeline_builds_its_components_with_its_settings(methods) -> None:
    from toolret.catalog.model import Catalog, Query, Tool
    from toolret.pipeline import build_pipeline

    params = load_params()
    assert params.bm25.k1 != 0.5
    register_method(Method(name="toy", pipelines=[
        NamedPipeline("toy-bm25", "bm25", "bm25 with k1 0.5", settings=(("bm25.k1", 0.5),))]))
    catalog = Catalog("tiny", [Tool("t1", "Weather", {"original": "forecast"})], [Query("q1", "rain", "test")],
                      {"q1": {"t1": 1}})
    assert reg.parse_spec("toy-bm25", params).settings == (("bm25.k1", 0.5),)
    assert build_pipeline("toy-bm25", catalog, params).retriever.config.k1 == 0.5
    assert build_pipeline("bm25", catalog, params).retriever.config.k1 == params.bm25.k1  # nothing leaks


def test_toolrerank_intents_is_the_dev_selected_composition() -> None:
    """The registered pipeline the multi-request dev split chose: intents to the reranker, query to the first stage."""
    params = load_params()
    spec = reg.parse_spec("toolrerank-intents", params)
    assert spec.components == ["reinvoke-intents", params.toolrerank.first_stage, "toolrerank-ce"]
    assert dict(spec.settings) == {"reinvoke.intent_ranking": "query", "toolrerank.score_views": "rewrites"}
