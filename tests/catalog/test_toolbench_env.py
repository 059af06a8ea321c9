"""``toolbench-env-*``: the ToolBench test groups over the tool environment (loader rules on a fixture
source root written per test; the documented counts on the real data)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml

from make_toolbench_env import ENV_PREFIX, write_manifest, write_toolbench_env_fixture
from toolret.catalog.io import load_catalog, save_catalog
from toolret.catalog.loaders.toolbench import api_document
from toolret.catalog.loaders.toolbench_env import normalise_name, schema_template
from toolret.errors import CatalogError
from toolret.catalog.datasets import DATASETS, load_dataset, source_dirs
from toolret.catalog.source import source_root

pytestmark = pytest.mark.integration

ENV_NAMES = ["toolbench-env-g1-instruction", "toolbench-env-g1-category", "toolbench-env-g1-tool",
             "toolbench-env-g2-instruction", "toolbench-env-g2-category", "toolbench-env-g3-instruction"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_toolbench_env_fixture(tmp_path / "datasets")


def _load(root: Path, name: str = "toolbench-env-g1-tool"):
    return load_dataset(name, root=root)


def _tools(catalog) -> dict:
    return {t.id: t for t in catalog.tools}


def _env_file(root: Path, rel: str) -> Path:
    return root / "toolbench-toolenv" / ENV_PREFIX / rel


# -- matching ---------------------------------------------------------------------------------------

def test_matching_tiers_and_counts(root):
    c = _load(root)
    m = c.provenance["matching"]
    assert (m["group_apis"], m["matched_exactly"], m["matched_after_normalisation"],
            m["added_from_api_list"]) == (8, 4, 1, 3)
    origin = {t.id: t.metadata["origin"] for t in c.tools}
    assert origin["SkyCast::Current Weather"] == "toolenv-exact"
    assert origin["Storm Watch Alerts::Severe Alerts"] == "toolenv-exact"  # through the tool's title
    assert origin["SkyCast::5-day forecast"] == "toolenv-normalised"  # env: "5 Day Forecast"
    assert origin["SkyCast::Air Quality"] == "api_list"
    assert origin["MarketPulse_v2::Stock Quote"] == "api_list"  # _v2 kept: env's MarketPulse is another tool
    assert origin["TEST::test"] == "api_list"  # the normalised namesake test/TEST lies in another category
    assert origin["MarketPulse::Stock Quote"] == origin["test::TEST"] == "toolenv"
    env = c.provenance["toolenv"]
    assert (env["tool_files"], env["apis"], env["apis_without_name"]) == (8, 17, 2)
    assert (env["identical_duplicates"], env["duplicate_conflicts"]) == (1, 2)
    assert c.provenance["corpus_size"] == len(c.tools) == 17 - 2 - 1 - 2 + 3


def test_a_matched_api_keeps_the_group_id_and_the_environment_document(root):
    tools = _tools(_load(root))
    t = tools["SkyCast::5-day forecast"]
    assert (t.name, t.tool, t.category) == ("5-day forecast", "SkyCast", "Weather")
    assert "api_name:5 Day Forecast" in t.text and "Five-day weather forecast" in t.text  # the env's words
    assert t.metadata["source_file"] == "Weather/skycast.json"
    assert "import requests" not in t.text and "example.invalid" not in t.text  # no code / url
    added = tools["SkyCast::Air Quality"]
    group_api = json.loads((root / "toolbench-stabletoolbench/solvable_queries/test_instruction/G1_tool.json")
                           .read_text())[0]["api_list"][2]
    assert added.text == api_document(group_api)  # its document is the api_list entry's, as in toolbench-*


def test_same_category_candidate_preferred(root):
    t = _tools(_load(root))["CineBase::Search Movie"]
    assert t.category == "Movies" and "Search movies by title" in t.text
    assert t.metadata["source_file"] == "Movies/cinebase.json"  # not Entertainment/, first in path order


def test_normalisation_rule():
    assert normalise_name("5 Day Forecast") == normalise_name("5-day forecast") == "5dayforecast"
    assert normalise_name("List of Special markets") == normalise_name("list_of_special_markets")
    assert normalise_name("MarketPulse_v2") != normalise_name("MarketPulse")
    assert normalise_name("ＡＢＣ") == "abc"  # NFKC


def test_return_template_from_json_schema(root):
    t = _tools(_load(root))["NutriFacts::Nutrition Info"]
    assert t.text.endswith('return_schema: {"calories": "float", "name": "str", "items": [{"fat_g": "float"}]}')
    assert schema_template(None) == schema_template("") == schema_template({}) == {}


# -- gold and hierarchy -----------------------------------------------------------------------------

def test_same_queries_and_gold_as_toolbench_groups(root):
    for env_name in ENV_NAMES:
        env = _load(root, env_name)
        base = load_dataset(env_name.replace("toolbench-env-", "toolbench-"), root=root)
        assert [(q.id, q.text, q.split) for q in env.queries] == [(q.id, q.text, q.split) for q in base.queries]
        assert env.qrels == base.qrels
        assert set(base.tool_ids) <= set(env.tool_ids)  # every api_list API is there, under the same id


def test_every_gold_api_occurs_exactly_once(root):
    c = _load(root)
    ids = Counter(c.tool_ids)
    docs = Counter(t.text for t in c.tools)
    gold = {t for q in c.split("test") for t in c.gold(q.id)}
    assert len(gold) == 8
    for g in gold:
        assert ids[g] == 1
        assert docs[c.tools[c.tool_position(g)].text] == 1, g  # its environment twin is not there again
    assert max(ids.values()) == 1


def test_hierarchy_category_tool_api(root):
    from toolret.methods.toolrerank.hierarchy import apis_by_tool, is_multi_tool

    c = _load(root)
    tools = _tools(c)
    radar = tools["SkyCast::Radar"]
    assert (radar.category, radar.tool, radar.name) == ("Weather", "SkyCast", "Radar")
    assert tools["StormWatch::Radar Map"].tool == "StormWatch"
    by_tool = apis_by_tool(c.tools)
    assert {c.tools[i].name for i in by_tool["skycast"]} == {"Current Weather", "5-day forecast", "Radar",
                                                             "Air Quality"}
    assert {t.category for t in c.tools} == {"Weather", "Food", "Movies", "Entertainment", "Finance", "Tools", "Data"}
    assert is_multi_tool(c, "2") and not is_multi_tool(c, "1")
    s = c.stats()
    assert s["n_categories"] == 7 and s["n_parent_tools"] == len({t.tool for t in c.tools})


# -- bad input --------------------------------------------------------------------------------------

def test_unparseable_tool_file_names_the_file(root):
    path = _env_file(root, "Food/nutrifacts.json")
    path.write_text('{"tool_name": "NutriFacts", "api_list": [', encoding="utf-8")
    write_manifest(root / "toolbench-toolenv")  # the checksum matches: the parse must still fail
    with pytest.raises(CatalogError, match=r"Food/nutrifacts\.json:\d+: invalid JSON"):
        _load(root)


@pytest.mark.parametrize("content, message", [
    ('["a list"]', "expected a JSON object"),
    ('{"tool_name": "X", "api_list": {"name": "a"}}', "'api_list' must be a list"),
    ('{"tool_name": "X", "api_list": ["a"]}', r"api_list\[0\]: expected a JSON object"),
])
def test_malformed_tool_file_names_the_file(root, content, message):
    _env_file(root, "Tools/test.json").write_text(content, encoding="utf-8")
    write_manifest(root / "toolbench-toolenv")
    with pytest.raises(CatalogError, match=r"Tools/test\.json.*" + message):
        _load(root)


def test_api_without_name_is_a_counted_skip(root):
    env = _load(root).provenance["toolenv"]
    assert env["apis_without_name"] == 2
    assert env["apis_without_name_at"] == ["Food/recipes.json[3]", "Food/recipes.json[4]"]


def test_conflicting_duplicate_keeps_the_first_identical_is_merged(root):
    c = _load(root)
    env = c.provenance["toolenv"]
    assert env["duplicate_conflicts_at"] == ["Entertainment/cinebase.json[0]", "Food/recipes.json[5]"]
    details = _tools(c)["Worldwide Recipes::Recipe Details"]
    assert "Ingredients and steps" in details.text  # the first by file order, not "A second, different ..."
    assert env["identical_duplicates"] == 1
    assert sum(t.id == "Worldwide Recipes::Search Recipes" for t in c.tools) == 1


def test_tool_file_without_api_list_is_counted(root):
    path = _env_file(root, "Tools/test.json")
    path.write_text(json.dumps({"tool_name": "test", "api_list": None}), encoding="utf-8")
    write_manifest(root / "toolbench-toolenv")
    c = _load(root)
    assert c.provenance["toolenv"]["tools_without_apis"] == 1 and "test::TEST" not in c.tool_ids


def test_modified_unlisted_or_missing_tool_file_fails_verification(root):
    env = root / "toolbench-toolenv"
    path = _env_file(root, "Weather/skycast.json")
    original = path.read_bytes()
    path.write_bytes(original.replace(b"Radar", b"Radir"))
    with pytest.raises(CatalogError, match=r"skycast\.json.*does not match MANIFEST"):
        _load(root)
    path.write_bytes(original)
    extra = _env_file(root, "Weather/new_tool.json")
    extra.write_text("{}", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"new_tool\.json: not listed in"):
        _load(root)
    extra.unlink()
    path.unlink()
    with pytest.raises(CatalogError, match=r"skycast\.json: missing"):
        _load(root)
    shutil.rmtree(env)
    with pytest.raises(CatalogError, match="toolbench-toolenv not found"):
        _load(root)


def test_replacement_characters_removed_and_catalog_round_trips(root, tmp_path):
    path = _env_file(root, "Weather/stormwatch.json")
    tool = json.loads(path.read_text(encoding="utf-8"))
    tool["api_list"][1]["description"] = "A storm \ufffd radar map.\u2028Second line."
    path.write_text(json.dumps(tool, ensure_ascii=False), encoding="utf-8")
    write_manifest(root / "toolbench-toolenv")
    c = _load(root)
    assert c.provenance["toolenv"]["replacement_characters_removed_at"] == ["Weather/stormwatch.json[1]"]
    assert "\ufffd" not in _tools(c)["StormWatch::Radar Map"].text
    again = load_catalog(save_catalog(c, tmp_path / "saved"))  # U+2028 stays inside its JSON line
    assert again.tool_ids == c.tool_ids and [t.text for t in again.tools] == [t.text for t in c.tools]
    assert again.qrels == c.qrels


def test_oversized_document_drops_its_return_template(root):
    path = _env_file(root, "Food/nutrifacts.json")
    tool = json.loads(path.read_text(encoding="utf-8"))
    tool["api_list"][0]["schema"]["properties"].update({f"field_{i:05d}": {"type": "string"} for i in range(2000)})
    tool["api_list"].append({**tool["api_list"][0], "name": "Huge", "description": "x" * 30_000})
    path.write_text(json.dumps(tool), encoding="utf-8")
    write_manifest(root / "toolbench-toolenv")
    c = _load(root)
    from toolret.catalog.validation import MAX_DOC_CHARS, validate_catalog

    assert c.provenance["toolenv"]["oversized_documents_at"] == {
        "cut": ["Food/nutrifacts.json[1]"], "return_template_dropped": ["Food/nutrifacts.json[0]"]}
    tools = _tools(c)
    assert tools["NutriFacts::Nutrition Info"].text.endswith("return_schema: {}")
    assert len(tools["NutriFacts::Huge"].text) == MAX_DOC_CHARS
    assert validate_catalog(c).success


def test_doc_limit_is_validations():
    from toolret.catalog.loaders import toolbench_env
    from toolret.catalog.validation import MAX_DOC_CHARS

    assert toolbench_env.MAX_DOC_CHARS == MAX_DOC_CHARS


# -- registration, validation, DVC deps ---------------------------------------------------------------

def test_registered_with_two_source_folders():
    assert set(ENV_NAMES) <= set(DATASETS)
    assert source_dirs("toolbench-env-g2-category") == ("toolbench-stabletoolbench", "toolbench-toolenv")
    assert source_dirs("toolbench-g2-category") == ("toolbench-stabletoolbench",)


def test_catalog_passes_validation_and_cleanup(root):
    from toolret.catalog.cleanup import clean_catalog
    from toolret.catalog.validation import validate_catalog

    c = _load(root)
    assert validate_catalog(c).success
    cleaned, report = clean_catalog(c, tokenizer="whitespace")
    assert cleaned.doc_variants() == ["original", "cleaned"] and report["tools"]["structured"] == len(c.tools)
    assert validate_catalog(cleaned).success


def test_catalog_stage_depends_on_each_datasets_own_folders():
    from toolret.config import load_params
    from toolret.stages import ROOT, render_dvc_yaml

    params = load_params(ROOT / "params.yaml")
    params = params.model_copy(update={"datasets": ["toollens", "toolbench-env-g1-tool"],
                                       "source": params.source.model_copy(update={"beir": {"mine": "data/mine"}})})
    params = params.model_copy(update={"datasets": [*params.datasets, "mine"]})
    stage = yaml.safe_load(render_dvc_yaml(params))["stages"]["catalog"]
    assert stage["foreach"] == {
        "toollens": {"src0": "${source.root}/toollens", "src1": "${source.root}/toollens"},
        "toolbench-env-g1-tool": {"src0": "${source.root}/toolbench-stabletoolbench",
                                  "src1": "${source.root}/toolbench-toolenv"},
        "mine": {"src0": "data/mine", "src1": "data/mine"}}
    assert stage["do"]["deps"][:2] == ["${item.src0}", "${item.src1}"]
    assert "${source.root}" not in stage["do"]["deps"]
    assert stage["do"]["cmd"] == "toolret catalog build --dataset ${key} --out data/catalogs/${key}"
    committed = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]["catalog"]
    assert set(committed["foreach"]) == set(load_params(ROOT / "params.yaml").datasets)
    assert committed["foreach"]["toollens"] == {"src0": "${source.root}/toollens"}


# -- the real data -----------------------------------------------------------------------------------

SHARED = source_root()


@pytest.mark.skipif(not (SHARED / "toolbench-toolenv").is_dir() or not (SHARED / "toolbench-stabletoolbench").is_dir(),
                    reason="../shared/datasets/toolbench-{toolenv,stabletoolbench} not present")
def test_real_toolenv_counts():
    c = load_dataset("toolbench-env-g1-tool")
    base = load_dataset("toolbench-g1-tool")
    p = c.provenance
    m, env = p["matching"], p["toolenv"]
    # SOURCE.md: 1,857 exact, unstripped; stripped (the rule) "SEO Keyword Research " matches too
    assert (m["group_apis"], m["matched_exactly"], m["matched_after_normalisation"], m["added_from_api_list"]) \
        == (2479, 1858, 11, 610)
    assert (m["gold_apis_all_groups"], m["gold_all_groups"]["matched_exactly"]) == (1221, 906)
    assert (env["tool_files"], env["categories"], env["apis"], env["apis_without_name"]) == (12301, 49, 46803, 0)
    assert p["toolenv_verification"]["files_verified"] == 12301
    assert len(c.tools) == p["corpus_size"] == (env["apis"] - env["apis_without_name"] - env["identical_duplicates"]
                                                 - env["duplicate_conflicts"] + m["added_from_api_list"])
    assert len(c.tools) >= 46_000 and len(set(c.tool_ids)) == len(c.tools)
    assert len(c.split("test")) == 158
    assert c.qrels == base.qrels and set(base.tool_ids) <= set(c.tool_ids)
    assert len({t.category for t in c.tools}) == 49
    assert sum(len(d) for d in p["checksums"].values()) < 10_000  # the manifest's sha256, not 12,301 entries
