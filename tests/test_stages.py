"""dvc.yaml is generated from the registry, and every stage depends on the code its command runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from toolret.config import load_params
from toolret.stages import ROOT, render_dvc_yaml

pytestmark = pytest.mark.integration


def _deps() -> dict[str, list[str]]:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    return {name: (body.get("do") or body)["deps"] for name, body in stages.items()}


def test_committed_dvc_yaml_is_what_the_registry_generates():
    assert (ROOT / "dvc.yaml").read_text(encoding="utf-8") == render_dvc_yaml(load_params(ROOT / "params.yaml")), \
        "dvc.yaml is out of date: run `make stages`"


def test_stage_code_deps_follow_the_import_graph():
    deps = _deps()
    # the examples of the issue: evaluate executes the evaluation module and the metrics ...
    assert {"toolret/evaluation.py", "toolret/metrics/ndcg.py", "toolret/pipeline.py"} <= set(deps["evaluate"])
    # ... synthetic-query generation parses with llm/parsing.py, Re-Invoke evaluation runs retrieval code
    assert {"toolret/llm/parsing.py", "toolret/llm/prompts.py", "toolret/llm/cache.py"} <= set(deps["synth_queries"])
    assert {"toolret/retrieval/dense.py", "toolret/retrieval/bm25.py", "toolret/methods/reinvoke/multiview.py",
            "toolret/methods/reinvoke/components.py"} <= set(deps["evaluate_reinvoke"])
    assert "toolret/retrieval/finetune.py" in deps["finetune"]
    # ... and not what they never execute
    assert not {p for p in deps["catalog"] if p.startswith("toolret/methods/reinvoke/") and
                not p.endswith(("__init__.py", "config.py"))}
    assert "toolret/llm/parsing.py" not in deps["evaluate"]
    # the CLI imports every command's code at its top; a stage depends on what its own command uses
    cli_top = {n.module for n in ast.parse((ROOT / "toolret/cli.py").read_text()).body if isinstance(n, ast.ImportFrom)}
    assert {"toolret.gateway.cli", "toolret.reproduce", "toolret.serving.service"} <= cli_top
    for stage in ("catalog", "evaluate", "finetune", "synth_queries"):
        assert not {"toolret/gateway/cli.py", "toolret/reproduce.py", "toolret/serving/service.py"} & set(deps[stage])
    assert "toolret/retrieval/finetune.py" not in deps["catalog"]
    assert all(Path(ROOT, p).is_file() for ds in deps.values() for p in ds if p.startswith("toolret/"))


def test_a_method_package_is_a_dep_of_its_own_stages_only():
    """Adding or editing a method must not rerun other methods' stages (e.g. retrain dense-ft)."""
    deps = _deps()
    for stage in ("catalog", "clean", "index", "evaluate", "finetune", "index_ft", "evaluate_ft"):
        assert not [p for p in deps[stage] if p.startswith("toolret/methods/reinvoke/")], stage
    for stage in ("synth_queries", "intents", "evaluate_reinvoke"):
        assert "toolret/methods/reinvoke/__init__.py" in deps[stage], stage
    # baselines register the components the core stages build, so they stay deps of those
    assert "toolret/methods/baselines/__init__.py" in deps["evaluate"]


def test_a_stage_with_only_if_exists_only_where_its_param_is_non_empty():
    import yaml as _yaml

    params = load_params(ROOT / "params.yaml")
    assert params.toolrerank.train_datasets, "the project trains a reranker somewhere"
    with_it = _yaml.safe_load(render_dvc_yaml(params))["stages"]
    none = params.replace(toolrerank={**params.toolrerank.model_dump(), "train_datasets": []})
    without = _yaml.safe_load(render_dvc_yaml(none))["stages"]
    assert "toolrerank_train" in with_it and "toolrerank_train" not in without
    assert set(with_it) - set(without) == {"toolrerank_train"}


def test_a_reranker_is_trained_per_training_catalog_and_train_dataset_picks_the_one_read():
    """toolrerank_train@<catalog> for each of toolrerank.train_datasets (the 2,479-API and the 46,879-API
    training catalogs); `train_dataset` only chooses which artifact the pipelines read, so changing it
    retrains nothing."""
    params = load_params(ROOT / "params.yaml")
    stage = yaml.safe_load(render_dvc_yaml(params))["stages"]["toolrerank_train"]
    assert list(stage["foreach"]) == params.toolrerank.train_datasets
    body = stage["do"]
    assert "--catalog data/curated/${key}" in body["cmd"] and "--out data/models/${key}/toolrerank" in body["cmd"]
    assert "--set toolrerank.train_dataset=${key}" in body["cmd"]
    assert {"data/curated/${key}", "${item.src0}"} <= set(body["deps"])
    assert "toolrerank.train_dataset" not in body["params"] and "toolrerank.max_length" in body["params"]
    assert params.toolrerank.train_dataset in params.toolrerank.train_datasets
    assert {"toolbench-synthetic", "toolbench-env-synthetic"} <= set(params.toolrerank.train_datasets)
    for name in params.toolrerank.train_datasets:  # each reads a dense-ft a stage trains
        assert params.trained_on.get(name, name) in params.finetune_datasets


def test_a_reranker_trained_on_a_filtered_catalog_mines_with_the_dense_ft_its_trained_on_entry_names():
    """A training catalog whose `trained_on` entry names another (the filtered catalog -> the unfiltered
    one) depends on that one's dense-ft -- the model its first stage reads -- and gets no dense-ft evaluation
    of its own (it has no test split); the evaluations' deps follow the evaluated datasets' first stage."""
    params = load_params(ROOT / "params.yaml").replace(
        toolrerank_datasets=["toolbench-g1-tool"],
        trained_on={"toolbench-g1-tool": "toolbench-synthetic", "toolbench-synthetic-filtered": "toolbench-synthetic",
                    "toolbench-synthetic-composed-multidev": "toolbench-synthetic"})
    unfiltered = params.synthetic["toolbench-synthetic"].model_dump()
    params = params.replace(synthetic={**{k: v.model_dump() for k, v in params.synthetic.items()},
                                       "toolbench-synthetic-filtered": {**unfiltered, "filter": "bm25"}})
    params = params.replace(toolrerank={**params.toolrerank.model_dump(), "train_dataset": "toolbench-synthetic-filtered",
                                        "train_datasets": ["toolbench-synthetic-filtered", "toolbench-env-synthetic"]})
    stages = yaml.safe_load(render_dvc_yaml(params))["stages"]
    train = stages["toolrerank_train"]["foreach"]
    assert train["toolbench-synthetic-filtered"]["src0"] == "data/models/toolbench-synthetic/dense-ft"
    assert train["toolbench-env-synthetic"]["src0"] == "data/models/toolbench-env-synthetic/dense-ft"
    assert stages["index_ft"]["foreach"] == stages["evaluate_ft"]["foreach"] == {
        "toolbench-g1-tool": "toolbench-synthetic", "toolbench-synthetic-composed-multidev": "toolbench-synthetic"}
    for name in ("toolrerank_ablations", "index_toolrerank"):
        deps = stages[name]["do"]["deps"]
        assert "data/models/toolbench-synthetic/dense-ft" in deps, name
        assert not any("toolbench-synthetic-filtered/dense-ft" in d for d in deps), name
    assert params.toolrerank.dev_selection_dataset == "toolbench-synthetic-composed-multidev"
    assert "data/models/toolbench-synthetic/dense-ft" in stages["toolrerank_dev_selection"]["deps"]


def test_a_grid_row_naming_an_ablation_artifact_depends_on_that_folder():
    """A row setting `toolrerank.artifact` (a reranker retrained with other settings on the same catalog) makes
    the grid depend on that folder; a row setting only `toolrerank.train_dataset` on that catalog's artifact."""
    params = load_params(ROOT / "params.yaml")
    rows = {"toolrerank": {"method": "toolrerank"},
            "mixed": {"method": "toolrerank", "set": {"toolrerank.mix_datasets": ["toollens"],
                                                      "toolrerank.artifact": "data/models/ablations/x/toolrerank"}},
            "other": {"method": "toolrerank", "set": {"toolrerank.train_dataset": "toollens"}}}
    params = params.replace(toolrerank={**params.toolrerank.model_dump(), "ablations": rows})
    deps = yaml.safe_load(render_dvc_yaml(params))["stages"]["toolrerank_ablations"]["do"]["deps"]
    assert {"data/models/ablations/x/toolrerank", "data/models/toollens/toolrerank"} <= set(deps)
    assert not any(d.startswith("data/models/ablations/x/") and d != "data/models/ablations/x/toolrerank" for d in deps)


def test_dense_ft_is_trained_per_training_catalog_and_evaluated_per_benchmark():
    """finetune runs once per training catalog; index_ft / evaluate_ft once per `trained_on` entry, each
    reading the dense-ft of the catalog it maps to (a test-only benchmark -> its synthetic catalog)."""
    params = load_params(ROOT / "params.yaml").replace(
        finetune_datasets=["toollens", "toolbench-synthetic"],
        trained_on={"toollens": "toollens", "toolbench-g1-tool": "toolbench-synthetic"})
    stages = yaml.safe_load(render_dvc_yaml(params))["stages"]
    assert stages["finetune"]["foreach"] == "${finetune_datasets}"
    assert stages["index_ft"]["foreach"] == stages["evaluate_ft"]["foreach"] == params.trained_on
    index = stages["index_ft"]["do"]
    assert "--catalog data/curated/${key}" in index["cmd"] and "--model data/models/${item}/dense-ft" in index["cmd"]
    assert {"data/curated/${key}", "data/models/${item}/dense-ft"} <= set(index["deps"])
    assert stages["evaluate_ft"]["do"]["outs"] == ["data/runs/${key}/dense-ft"]


def test_trained_on_must_name_a_dataset_dense_ft_is_trained_on():
    from toolret.errors import CatalogError

    params = load_params(ROOT / "params.yaml")
    with pytest.raises((ValueError, CatalogError), match="toolbench-g1-tool.*finetune_datasets"):
        params.replace(finetune_datasets=["toollens"], trained_on={"toolbench-g1-tool": "toolbench-synthetic"})
    # a folder (an ablation's catalog) is not a stage output: allowed
    params.replace(trained_on={"toolbench-g1-tool": "data/curated/ablations/toolbench-synthetic-single"})


def test_the_core_cleaning_stage_reads_no_retrievers_section():
    """`clean` counts document lengths in its own `cleanup.tokenizer`, so a change to the dense retriever's
    model no longer reruns every catalog's cleaning (and the core CLI reads no method's section)."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert stages["clean"]["do"]["params"] == ["cleanup"]
    assert load_params(ROOT / "params.yaml").cleanup.tokenizer


def test_a_synthetic_catalog_reads_a_built_dataset_or_a_corpus_from_its_sources():
    """A synthetic source among `datasets` is read as its curated catalog; another named dataset (a corpus too
    large to evaluate in `make run`, e.g. the 46,879-API environment) from its own source folders. Of the
    committed generations it depends on its generators' shard folders only: a shard another generator writes
    (a larger model's, an adapted catalog's) must not make a costly training catalog stale."""
    params = load_params(ROOT / "params.yaml")
    small = "data/generations/qwen2.5-coder-0.5b-instruct"
    params = params.replace(synthetic={**params.model_dump()["synthetic"], "syn": {"source": "toolbench-g1-instruction"},
                                       "env-syn": {"source": "toolbench-env-g1-instruction", "sample_tools": 50},
                                       "big": {"source": "toolbench-g1-instruction", "multi_tool_groups": 3,
                                               "llm_model": "qwen2.5-coder-1.5b-instruct"}})
    stage = yaml.safe_load(render_dvc_yaml(params))["stages"]["synthesize"]
    n = len([d for d in stage["do"]["deps"] if d.startswith("${item.")])
    deps = {name: {item[f"src{i}"] for i in range(n)} for name, item in stage["foreach"].items()}
    assert deps["syn"] == {"data/curated/toolbench-g1-instruction", small}
    assert deps["env-syn"] == {"${source.root}/toolbench-stabletoolbench", "${source.root}/toolbench-toolenv", small}
    assert deps["big"] == {"data/curated/toolbench-g1-instruction", "data/generations/qwen2.5-coder-1.5b-instruct",
                           small}  # the multi-API requests: Re-Invoke's generator unless multi_llm_model says
    assert "data/generations" not in stage["do"]["deps"]
    assert "--catalog" not in stage["do"]["cmd"] and {"synthetic", "source", "cleanup"} <= set(stage["do"]["params"])


def test_a_stage_reading_another_catalogs_dense_ft_depends_on_that_catalog():
    """Loading a dense-ft trained on another catalog (a `trained_on` entry) checks the artifact's key against
    that catalog's train split, so every stage that builds it lists `data/curated/<training catalog>` too:
    without it `dvc repro -s` of the env composed reranker failed on a machine lacking the env catalog."""
    params = load_params(ROOT / "params.yaml")
    stages = yaml.safe_load(render_dvc_yaml(params))["stages"]
    train = stages["toolrerank_train"]
    for name, sources in train["foreach"].items():
        training = params.trained_on.get(name, name)
        if training != name:
            assert f"data/curated/{training}" in sources.values(), name
    assert f"data/curated/{params.trained_on['toolbench-env-synthetic-composed']}" in \
        train["foreach"]["toolbench-env-synthetic-composed"].values()
    assert set(train["do"]["deps"]) >= {f"${{item.{s}}}" for s in train["foreach"]["toolbench-synthetic"]}
    assert "data/curated/${item}" in stages["index_ft"]["do"]["deps"]
    first_stage_training = {params.trained_on[d] for d in params.toolrerank_datasets}
    for name in ("index_toolrerank", "toolrerank_ablations"):
        assert {f"data/curated/{t}" for t in first_stage_training} <= set(stages[name]["do"]["deps"]), name
    selection = params.trained_on[params.toolrerank.dev_selection_dataset]
    assert f"data/curated/{selection}" in stages["toolrerank_dev_selection"]["deps"]


def test_a_stage_building_hybrid_depends_on_its_dev_catalog():
    """`hybrid.dev_dataset` makes every stage that builds `hybrid` / `hybrid-ft` load that catalog (its weight is
    selected on its dev split), so each lists `data/curated/<dev_dataset>`; no other stage's deps change."""
    from toolret.config import apply_overrides
    from toolret.registry import stage_templates
    from toolret.stages import stage_components

    base = load_params(ROOT / "params.yaml")
    assert base.hybrid.dev_dataset is None
    params = apply_overrides(base, {"hybrid.dev_dataset": "toolbench-synthetic"})
    before = yaml.safe_load(render_dvc_yaml(base))["stages"]
    after = yaml.safe_load(render_dvc_yaml(params))["stages"]
    building = {t.name for t in stage_templates() if t.name in after
                and {"hybrid", "hybrid-ft"} & set(stage_components(t, params))}
    assert {"index", "toolrerank_ablations"} <= building, building
    for name, stage in after.items():
        deps, old = stage.get("do", stage)["deps"], before[name].get("do", before[name])["deps"]
        assert set(deps) == set(old) | ({"data/curated/toolbench-synthetic"} if name in building else set()), name
