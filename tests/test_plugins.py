"""A method package outside the ``toolret`` tree (a plugin: one folder written here, named once in
``params.yaml: plugins`` or ``$TOOLRET_PLUGINS``) runs through ``toolret evaluate``, ``dvc.yaml`` generation
and the Dagster definitions, without touching any core file.

The registry is process-global: the ``registry`` fixture restores it (and ``sys.modules`` / ``sys.path``)
after each test, so the plugin registered here is invisible to every other test."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from dagster_project.definitions import build_definitions  # at import: its package builds the repo's definitions
from make_fixture import fixture_records, write_fixture_catalog
from toolret.cli import main
from toolret.errors import CatalogError

pytestmark = pytest.mark.integration

PLUGIN = "toyplugin_ngram"  # the plugin's module (a folder of the temporary project)
TOY = "toy-ngram"  # the retriever it registers
TYPO_QID, TYPO_TEXT = "q9999", "forecasts"  # a query no document shares a word with (see test 1)
FORECAST_TOOL = "t001"  # the fixture's "SkyCast / 5 Day Forecast" API, the only one whose text says "forecast"

PLUGIN_INIT = '''\
"""Toy method: character n-gram overlap retrieval, its params section and its index / evaluate stages."""

from pathlib import Path

from toolret.config import StrictModel
from toolret.registry import Component, Method, Section, register_method
from toolret.stage_templates import index_and_evaluate

with open(Path(__file__).with_name("imports.log"), "a", encoding="utf-8") as log:  # counts the imports
    log.write("imported\\n")


class ToyConfig(StrictModel):
    ngram: int = 3  # character n-gram length (a word shorter than it is one gram)


def _build(ctx):
    from .retriever import NgramRetriever

    return NgramRetriever(ctx.params.toy)


def _load(path):
    from .retriever import NgramRetriever

    return NgramRetriever.load(path)


METHOD = register_method(Method(
    name="toy",
    sections=(Section("toy", ToyConfig, staged=True),),
    components=(Component("toy-ngram", "retriever", _build, _load, ("toy",),
                          "character n-gram overlap, set cosine (a test plugin)"),),
    stages=index_and_evaluate(
        "toy-ngram", foreach="${toy_datasets}", names=("index_toy", "evaluate_toy"), orders=(52, 62),
        index_desc="toy n-gram index", evaluate_desc="toy n-gram evaluation on the test split", params=("toy",),
    ),
))
'''

PLUGIN_RETRIEVER = '''\
"""The toy retriever: documents ranked by the set cosine of their character n-grams with the query's."""

import json
import re
from pathlib import Path

import numpy as np

from toolret.registry import COMPONENT_FILE, write_component_meta
from toolret.roles import Ranking, default_query_ids


def grams(text, n):
    return {w[i:i + n] for w in re.findall(r"\\w+", text.lower()) for i in range(max(1, len(w) - n + 1))}


class NgramRetriever:
    name = "toy-ngram"

    def __init__(self, config):
        self.config = config
        self.tool_ids, self.documents = [], []

    def fit(self, catalog):
        pass

    def index(self, tool_ids, documents):
        self.tool_ids, self.documents = list(tool_ids), list(documents)
        self._grams = [grams(d, self.config.ngram) for d in self.documents]

    def search(self, queries, k, query_ids=None):
        k = min(k, len(self.tool_ids))
        indices = np.full((len(queries), k), -1, dtype=np.int64)
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        for row, query in enumerate(queries):
            q = grams(query, self.config.ngram)
            s = np.array([len(q & d) / np.sqrt(len(q) * len(d)) if q and d else 0.0 for d in self._grams])
            top = [i for i in np.argsort(-s, kind="stable")[:k] if s[i] > 0]
            indices[row, :len(top)] = top
            scores[row, :len(top)] = s[top]
        return Ranking(default_query_ids(len(queries), query_ids), self.tool_ids, indices, scores)

    def save(self, path):
        path = Path(path)
        path.mkdir(parents=True)
        write_component_meta(path, self.name, config=self.config.to_dict(), tool_ids=self.tool_ids)
        (path / "documents.json").write_text(json.dumps(self.documents), encoding="utf-8")

    @classmethod
    def load(cls, path):
        from . import ToyConfig

        meta = json.loads((Path(path) / COMPONENT_FILE).read_text(encoding="utf-8"))
        r = cls(ToyConfig(**meta["config"]))
        r.index(meta["tool_ids"], json.loads((Path(path) / "documents.json").read_text(encoding="utf-8")))
        return r
'''


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch):
    """The registry as it is now, restored after the test (with ``sys.modules`` and ``sys.path``);
    ``load_plugins`` reads the plugin configuration afresh during the test."""
    import toolret.registry as reg

    monkeypatch.delenv("TOOLRET_PLUGINS", raising=False)
    reg.load_plugins()  # the built-in methods are part of the state kept
    tables = ("_METHODS", "_PLUGINS")
    saved = {name: dict(getattr(reg, name)) for name in tables}
    path = list(sys.path)
    monkeypatch.setattr(reg, "_loaded", False)
    yield reg
    for name, value in saved.items():
        table = getattr(reg, name)
        table.clear()
        table.update(value)
    for module in [m for m in sys.modules if m == PLUGIN or m.startswith(PLUGIN + ".")]:
        del sys.modules[module]
    sys.path[:] = path


@pytest.fixture
def project(tmp_path: Path, registry, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory (``$TOOLRET_PROJECT_DIR``) holding the plugin folder and a ``params.yaml`` naming it,
    with the fixture catalog (plus one typo query) as dataset ``fixture``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "orchestration"))
    from orch_helpers import fixture_params

    source = write_fixture_catalog(tmp_path / "sources" / "fixture")
    with open(source / "queries.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"_id": TYPO_QID, "text": TYPO_TEXT, "metadata": {}}) + "\n")
    with open(source / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        f.write(f"{TYPO_QID}\t{FORECAST_TOOL}\t1\n")
    root = tmp_path / "project"
    (root / PLUGIN).mkdir(parents=True)
    (root / PLUGIN / "__init__.py").write_text(PLUGIN_INIT, encoding="utf-8")
    (root / PLUGIN / "retriever.py").write_text(PLUGIN_RETRIEVER, encoding="utf-8")
    (root / PLUGIN / "unused.py").write_text("RAISE = 1 / 0  # never imported\n", encoding="utf-8")
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(root))
    params = fixture_params(source, methods=["bm25"], finetune=False)  # the real params.yaml, made small
    params.update(plugins=[PLUGIN], synthetic={}, selections={}, toy={"ngram": 3}, toy_datasets=["fixture"])
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    monkeypatch.setattr(registry, "_loaded", False)  # fixture_params looked the registry up: a fresh first lookup
    return root


def _imports(root: Path) -> int:
    log = root / PLUGIN / "imports.log"
    return len(log.read_text(encoding="utf-8").splitlines()) if log.is_file() else 0


def _evaluate(dataset: Path, method: str, out: Path, *extra: str, params: Path | None = None
              ) -> tuple[dict, dict[str, dict]]:
    """``toolret [--params P] evaluate``: the result JSON and its per-query rows by query id."""
    argv = [*(["--params", str(params)] if params else []), "evaluate", "--dataset", str(dataset),
            "--method", method, "--k", "1,5", "--output", str(out), *extra]
    assert main(argv) == 0
    rows = [json.loads(line) for line in out.with_name(out.stem + ".per_query.jsonl").read_text().splitlines()]
    return json.loads(out.read_text(encoding="utf-8")), {r["query_id"]: r for r in rows}


def test_plugin_method_is_evaluated_by_toolret_evaluate(project: Path, tmp_path: Path) -> None:
    source = tmp_path / "sources" / "fixture"
    corpus, _, qrels = fixture_records()  # what write_fixture_catalog wrote (the typo query added by hand)
    words = {w for row in corpus for w in re.findall(r"\w+", row["text"].lower())}
    assert TYPO_TEXT not in words and "forecast" in words  # no lexical match, a sub-word one
    assert [row["_id"] for row in corpus if "forecast" in row["text"].lower()] == [FORECAST_TOOL]

    toy, toy_rows = _evaluate(source, TOY, tmp_path / "toy.json")
    bm25, bm25_rows = _evaluate(source, "bm25", tmp_path / "bm25.json")
    assert toy["method"] == TOY and bm25["method"] == "bm25"
    assert toy["n_queries"] == len({q for q, _ in qrels["test"]}) + 1 == len(toy_rows)
    assert set(toy["metrics"]) == set(bm25["metrics"]) and "recall@5" in toy["metrics"]
    # where bm25 has nothing to match (no shared word), the n-gram retriever finds the tool by its sub-words
    assert bm25_rows[TYPO_QID]["ranked"] == [] and bm25_rows[TYPO_QID]["recall@1"] == 0.0
    assert toy_rows[TYPO_QID]["ranked"][0] == FORECAST_TOOL and toy_rows[TYPO_QID]["recall@1"] == 1.0
    # the plugin's params section reaches the component: n-grams longer than any word match whole words only
    _, whole_words = _evaluate(source, TOY, tmp_path / "toy20.json", "--set", "toy.ngram=20")
    assert whole_words[TYPO_QID]["ranked"] == []
    assert _imports(project) == 1


def test_plugin_component_saves_and_loads(project: Path, tmp_path: Path) -> None:
    from toolret.catalog.datasets import load_dataset
    from toolret.config import load_params
    from toolret.registry import BuildContext, build_component, load_component

    catalog = load_dataset(str(tmp_path / "sources" / "fixture"))
    built = build_component(TOY, BuildContext(catalog, load_params()))
    built.index(catalog.tool_ids, catalog.docs("original"))
    built.save(tmp_path / "saved")
    loaded = load_component(tmp_path / "saved")
    queries = [q.text for q in catalog.split("test")]
    assert type(loaded).__module__ == f"{PLUGIN}.retriever"
    assert loaded.search(queries, 5).as_lists() == built.search(queries, 5).as_lists()


def test_plugin_stages_in_dvc_yaml_and_dagster(project: Path) -> None:
    assert main(["stages", "--out", str(project / "dvc.yaml")]) == 0
    stages = yaml.safe_load((project / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    for name in ("index_toy", "evaluate_toy"):
        assert stages[name]["foreach"] == "${toy_datasets}", name
        deps = stages[name]["do"]["deps"]
        # the plugin's code (relative to the project dir), the lazily imported module included ...
        assert {f"{PLUGIN}/__init__.py", f"{PLUGIN}/retriever.py"} <= set(deps), name
        assert f"{PLUGIN}/unused.py" not in deps and "data/curated/${item}" in deps, name
    assert stages["index_toy"]["do"]["params"] == ["toy"]
    assert f"--method {TOY} " in stages["index_toy"]["do"]["cmd"]
    assert f"data/indexes/${{item}}/{TOY}" in stages["evaluate_toy"]["do"]["deps"]
    # ... and of its own stages only
    for name in ("catalog", "clean", "index", "evaluate"):
        body = stages[name].get("do") or stages[name]
        assert not [d for d in body["deps"] if d.startswith(PLUGIN)], name

    graph = build_definitions(project).resolve_asset_graph()
    index_key = dg.AssetKey(["index_toy", f"fixture.{TOY}"])  # [<stage>, <dataset>.<method>]
    evaluate_key = dg.AssetKey(["evaluate_toy", f"fixture.{TOY}"])
    assert {index_key, evaluate_key} <= set(graph.get_all_asset_keys())
    assert dg.AssetKey(["clean", "fixture"]) in graph.get(index_key).parent_keys
    assert graph.get(evaluate_key).parent_keys == {dg.AssetKey(["clean", "fixture"]), index_key}


def test_plugin_named_twice_is_imported_once(project: Path, registry, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolret.config import load_params, validate_params

    monkeypatch.setenv("TOOLRET_PLUGINS", f"{PLUGIN}, {PLUGIN}")
    registry.load_plugins()
    first = registry.component(TOY)
    params = load_params()  # names it again in plugins:
    validate_params({"plugins": [PLUGIN], "toy": {"ngram": 4}})
    registry.load_plugins()
    assert params.toy.ngram == 3 and params.plugins == [PLUGIN]
    assert registry.component(TOY) is first
    # one Method, registered by the plugin's one call, holds what it brings (its factory-made stages are the factory's)
    toy = registry.methods()["toy"]
    assert toy.module == PLUGIN and [c.name for c in toy.components] == [TOY]
    assert [t.name for t in toy.stages] == ["index_toy", "evaluate_toy"]
    assert registry.stage_owner("index_toy") == "toolret.stage_templates"
    # the first lookup reads the project's params.yaml, then $TOOLRET_PLUGINS (already imported: skipped)
    assert registry.plugin_modules() == {PLUGIN: f"{(project / 'params.yaml').resolve()}: plugins"}
    assert _imports(project) == 1


def test_plugin_named_by_another_params_file(project: Path, tmp_path: Path) -> None:
    """``--params FILE``: the file's own ``plugins:`` are imported before it is validated."""
    from toolret.config import load_params

    data = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    (project / "params.yaml").write_text("{}\n", encoding="utf-8")  # the project names no plugin
    data["toy"] = {"ngram": 5}
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    assert load_params(tmp_path / "other.yaml").toy.ngram == 5
    _, rows = _evaluate(tmp_path / "sources" / "fixture", TOY, tmp_path / "other.json", params=tmp_path / "other.yaml")
    assert rows[TYPO_QID]["ranked"][0] == FORECAST_TOOL


def test_plugin_configured_by_environment(project: Path, registry, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    data = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    del data["plugins"]
    (project / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    from toolret.config import load_params
    from toolret.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown key 'toy'"):  # a plugin's section needs the plugin
        load_params()
    monkeypatch.setenv("TOOLRET_PLUGINS", PLUGIN)
    assert load_params().toy.ngram == 3
    result, _ = _evaluate(tmp_path / "sources" / "fixture", TOY, tmp_path / "env.json")
    assert result["method"] == TOY


def test_unknown_plugin_names_where_it_was_configured(project: Path, registry, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from toolret.config import load_params

    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"plugins": ["no_such_plugin_a"]}), encoding="utf-8")
    with pytest.raises(CatalogError, match=rf"'no_such_plugin_a' \(configured in {re.escape(str(other))}: plugins\)"):
        load_params(other)
    assert "no_such_plugin_a" not in registry.plugin_modules()

    monkeypatch.setenv("TOOLRET_PLUGINS", "no_such_plugin_b")
    assert main(["evaluate", "--dataset", str(tmp_path / "sources" / "fixture"), "--method", "bm25",
                 "--output", str(tmp_path / "never.json")]) == 2
    err = capsys.readouterr().err
    assert "'no_such_plugin_b'" in err and "$TOOLRET_PLUGINS" in err
    assert not (tmp_path / "never.json").exists()
