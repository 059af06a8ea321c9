"""QTA trained on synthetic requests (``qta.synthetic``, pipeline ``qta-syn``): its settings, where its adapter
comes from on a benchmark and on its training catalog, and end to end with a tiny REAL causal LM: the
adapter trains on the training catalog's train split only and is evaluated, frozen, on every test query of
the benchmark (no fold: no labelled query of the benchmark is read)."""

from __future__ import annotations

import json

import pytest

from toolret.config import validate_params
from toolret.errors import ConfigError


def _params(extra_set=None, **qta):
    return validate_params({"qta": {
        "m": 10, "pair_rule": "rewrites_only", "docs": {"bench": "human"},
        "synthetic": {"runs": {"bench": {"catalog": "bench-synthetic", "docs": "human"}},
                      "set": {"m": 1, "bf16": True, **(extra_set or {})}}, **qta}})


def test_synthetic_settings_follow_qta_with_their_own_rounds_and_keep_older_adapter_keys():
    params = _params()
    cfg = params.qta.synthetic_config()
    assert (cfg.m, cfg.train_m, cfg.pair_rule, cfg.bf16) == (1, [1], "rewrites_only", True)
    assert cfg.training_key(1)["bf16"] is True and cfg.training_key(1)["m"] == 1
    plain = params.qta.component_config()
    assert plain.train_m == [10] and "bf16" not in plain.training_key(10)  # committed adapters keep their key
    assert params.qta.synthetic.training_catalog("bench") == "bench-synthetic"
    assert params.qta.synthetic.benchmark_of("bench-synthetic") == "bench"
    assert params.qta.synthetic.benchmark_of("bench") is None


def test_a_bad_synthetic_setting_names_its_key_when_params_load():
    with pytest.raises(ValueError, match=r"qta\.synthetic\.set.*no_such_key"):
        _params({"no_such_key": 3})
    with pytest.raises(ValueError, match=r"qta\.synthetic\.set.*m"):
        _params({"m": 0})


def _catalog(name, n_train=0, n_test=3):
    from toolret.catalog.model import Catalog, Query, Tool

    tools = [Tool(f"t{i}", f"t{i}", {"original": f"doc {i}", "human": f"human doc {i}"}) for i in range(4)]
    qs = [Query(f"q{i}", f"query {i}", "test") for i in range(n_test)]
    qs += [Query(f"r{i}", f"train {i}", "train") for i in range(n_train)]
    return Catalog(name, tools, qs, {q.id: {"t0": 1} for q in qs})


def test_qta_syn_uses_the_training_catalogs_adapter_frozen_and_trains_only_on_that_catalog(tmp_path,
                                                                                             monkeypatch):
    from toolret.catalog.folds import kfold_split
    from toolret.registry import BuildContext, build_component

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    params = _params()
    on_bench = build_component("qta-syn", BuildContext(_catalog("bench"), params))
    assert on_bench.frozen and on_bench.docs == "human" and on_bench.documents[0] == "human doc 0"
    assert on_bench.adapter_root.relative_to(tmp_path).as_posix() == "data/models/bench-synthetic/qta"
    assert on_bench.adapter_dir().name == "m1-rewrites_only"
    on_fold = build_component("qta-syn", BuildContext(kfold_split(_catalog("bench", n_test=18), 9, 2, 13), params))
    assert on_fold.adapter_root == on_bench.adapter_root  # a fold of the benchmark: the same adapter

    on_training = build_component("qta-syn", BuildContext(_catalog("bench-synthetic", n_train=2), params,
                                                          model=str(tmp_path / "out" / "qta")))
    assert not on_training.frozen and on_training.docs == "human"  # the benchmark's document variant
    assert on_training.adapter_root == tmp_path / "out" / "qta"
    assert on_training.preferences.relative_to(tmp_path).as_posix() == "data/qta/bench-synthetic/preferences.jsonl"

    with pytest.raises(ConfigError, match=r"'other'.*qta\.synthetic\.runs names \['bench'\]"):
        build_component("qta-syn", BuildContext(_catalog("other"), params))


@pytest.mark.slow
def test_cli_trains_on_the_synthetic_catalog_and_evaluates_every_benchmark_query(tmp_path, monkeypatch, tiny_lm):
    from make_fixture import write_fixture_catalog

    from tests.methods.qta.test_training import _cfg
    from toolret.cli import main

    bench = write_fixture_catalog(tmp_path / "bench", n_train=0, n_test=12)
    training = write_fixture_catalog(tmp_path / "bench-synthetic", n_train=6, n_test=2, seed=1)
    proj = tmp_path / "proj"
    proj.mkdir()
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(proj))
    qta = _cfg(tiny_lm, tmp_path, m=3, train_queries=0).to_dict()
    (proj / "params.yaml").write_text(json.dumps({
        "evaluation": {"ks": [1, 5], "k_max": 10, "bootstrap_samples": 20},
        "qta": {**qta, "synthetic": {"runs": {"bench": {"catalog": "bench-synthetic"}}, "set": {"m": 1}}},
    }))
    adapters = proj / "data" / "models" / "bench-synthetic" / "qta"
    assert main(["fit", "--component", "qta-syn", "--catalog", str(training), "--out", str(adapters)]) == 0
    prefs = proj / "data" / "qta" / "bench-synthetic" / "tiny-llama" / "preferences.jsonl"
    records = [json.loads(line) for line in prefs.read_text().splitlines()]
    assert {r["round"] for r in records} == {0} and len(records) == 6  # m = 1 round per synthetic request
    assert {r["query_id"] for r in records} <= {json.loads(line)["_id"] for line in
                                                 (training / "queries.jsonl").read_text().splitlines()}
    report = json.loads((adapters / "m1-tiny-llama" / "qta.json").read_text())
    assert report["training"]["m"] == 1 and report["dataset"] == "bench-synthetic"

    out = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(bench), "--method", "qta-syn", "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["dataset"] == "bench" and result["n_queries"] == 12  # not folded: every test query
    assert result["components"]["qta-syn"]["llm_outputs"] == 12
    assert not (proj / "data" / "models" / "bench" / "qta").exists()  # nothing trained on the benchmark


def test_a_training_catalog_two_benchmarks_share_is_trained_by_one_stage_only():
    import yaml

    from toolret.stages import render_dvc_yaml

    params = validate_params({"qta": {"synthetic": {"runs": {"bench": {"catalog": "bench-synthetic", "docs": "human"},
                                                             "other": {"catalog": "bench-synthetic"}},
                                                    "set": {"m": 1}}}})
    stages = yaml.safe_load(render_dvc_yaml(params))["stages"]
    assert stages["qta_synthetic"]["foreach"] == {"bench": {"catalog": "bench-synthetic", "docs": "human"}}
    assert stages["qta_synthetic_evaluate"]["foreach"] == "${qta.synthetic.runs}"  # both benchmarks evaluated


def test_search_settings_are_chosen_on_the_training_catalogs_dev_split_once_per_catalog():
    """Stage ``qta_syn_dev``: ``qta.synthetic.dev_grid`` on the dev split of each training catalog (with the
    document variant of the benchmark that trains it), never on a benchmark's test queries; absent without a
    dev grid."""
    import yaml

    from toolret.stages import render_dvc_yaml

    runs = {"bench": {"catalog": "bench-synthetic", "docs": "human"}, "other": {"catalog": "bench-synthetic"}}
    grid = {"dense": {"method": "dense"}, "r4": {"method": "qta-syn", "set": {"qta.rewrites": 4}, "baseline": "dense"}}
    params = validate_params({"qta": {"synthetic": {"runs": runs, "set": {"m": 1}, "dev_grid": grid}}})
    dev = yaml.safe_load(render_dvc_yaml(params))["stages"]["qta_syn_dev"]
    assert dev["foreach"] == {"bench": {"catalog": "bench-synthetic", "docs": "human"}}
    cmd = dev["do"]["cmd"]
    assert "--catalog data/curated/${item.catalog} --split dev --grid qta.synthetic.dev_grid" in cmd
    assert "--record-generations qta-rewrites" in cmd and "data/curated/${key}" not in cmd
    assert params.qta.synthetic.dev_grid["r4"].set == {"qta.rewrites": 4}
    without = validate_params({"qta": {"synthetic": {"runs": runs, "set": {"m": 1}}}})
    assert "qta_syn_dev" not in yaml.safe_load(render_dvc_yaml(without))["stages"]
