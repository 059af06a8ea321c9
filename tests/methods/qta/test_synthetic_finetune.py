"""The synthetic rewriter trained further on a fold's labelled queries (``qta.synthetic.finetune``, pipeline
``qta-syn-ft``): where its adapters come from and go, its stages, and with a tiny REAL causal LM an adapter
trained on top of another: DPO's reference is the first adapter, the saved folder carries a copy of it, and
inference merges both in order."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from toolret.config import validate_params
from toolret.errors import ConfigError


def _params(finetune_set=None):
    return validate_params({"qta": {
        "m": 10, "pair_rule": "rewrites_only", "epochs": 4, "docs": {"bench": "human"},
        "runs": {"bench-fold0of9": {"dataset": "bench", "fold": 0, "docs": "human", "selection": True},
                 "plain-fold1of9": {"dataset": "plain", "fold": 1}},
        "synthetic": {"runs": {"bench": {"catalog": "bench-synthetic", "docs": "human"}},
                      "set": {"m": 1, "bf16": True},
                      "finetune": {"set": {"bf16": True, "epochs": 2, **(finetune_set or {})},
                                   "grid": {"dense": {"method": "dense"}}}}}})


def test_qta_syn_ft_trains_on_the_folds_pairs_on_top_of_the_synthetic_adapter(tmp_path, monkeypatch):
    from tests.methods.qta.test_synthetic import _catalog
    from toolret.catalog.folds import kfold_split
    from toolret.registry import BuildContext, build_component

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    params = _params()
    fold = kfold_split(_catalog("bench", n_test=18), 9, 2, 13)
    rw = build_component("qta-syn-ft", BuildContext(fold, params))
    rel = lambda p: p.relative_to(tmp_path).as_posix()  # noqa: E731
    assert rel(rw.init_adapter) == "data/models/bench-synthetic/qta/m1-rewrites_only"  # qta.synthetic.set's adapter
    assert rel(rw.adapter_root) == "data/models/bench-fold2of9/qta-syn-ft"
    assert rel(rw.preferences) == "data/qta/bench-fold2of9/preferences.jsonl"  # the fold's labelled pairs (qta's)
    # its checkpoints travel through git beside the fold's data, apart from qta's own adapter of the same name
    assert rel(rw.committed_checkpoint(10)) == "data/qta/bench-fold2of9/checkpoints/qta-syn-ft/m10-rewrites_only"
    assert (rw.config.m, rw.config.epochs, rw.config.bf16, rw.config.pair_rule) == (10, 2, True, "rewrites_only")
    assert not rw.frozen and rw.docs == "human" and rw.documents[0] == "human doc 0"
    # refused before any cost: no preference data sampled, no rewriter converted (that took 2 minutes)
    with pytest.raises(Exception, match="no adapter at .*m1-rewrites_only to train on top of"):
        rw._adapter_ready = lambda m: False
        rw.fit(fold)
    assert not (tmp_path / "data" / "qta" / "bench-fold2of9").exists()
    with pytest.raises(ConfigError, match=r"qta-syn-ft: dataset 'plain'.*names \['bench'\]"):
        build_component("qta-syn-ft", BuildContext(kfold_split(_catalog("plain", n_test=18), 9, 1, 13), params))
    with pytest.raises(ValueError, match=r"qta\.synthetic\.finetune\.set.*no_such_key"):
        _params({"no_such_key": 1})


def test_its_stages_run_on_the_folds_of_benchmarks_with_a_synthetic_catalog_only():
    from toolret.stages import render_dvc_yaml

    stages = yaml.safe_load(render_dvc_yaml(_params()))["stages"]
    for name in ("qta_syn_ft", "qta_syn_ft_evaluate"):
        assert list(stages[name]["foreach"]) == ["bench-fold0of9"], name  # not plain's fold
        assert "data/models/bench-synthetic/qta" in stages[name]["do"]["deps"], name  # what it trains on top of
    assert stages["qta_syn_ft"]["do"]["outs"] == [{"data/models/${key}/qta-syn-ft": {"cache": False}}]
    assert "--grid qta.synthetic.finetune.grid" in stages["qta_syn_ft_evaluate"]["do"]["cmd"]


@pytest.mark.slow
def test_an_adapter_trained_on_top_of_another(tmp_path, tiny_lm):
    import torch
    from safetensors.numpy import load_file

    from tests.methods.qta.test_training import _cfg
    from toolret.methods.qta.components import QTARewriter
    from toolret.methods.qta.generation import QTALLM, adapter_sha
    from toolret.methods.qta.training import train_adapter

    cfg = _cfg(tiny_lm, tmp_path, lr=5e-2)

    def pairs(chosen, rejected):
        return [{"prompt": [{"role": "user", "content": f"weather in city {i}"}],
                 "chosen": [{"role": "assistant", "content": chosen}],
                 "rejected": [{"role": "assistant", "content": rejected}]} for i in range(2)]

    first = tmp_path / "models" / "syn" / "qta" / "m2"
    train_adapter(pairs("get the weather forecast", "buy shoes"), cfg, 2, first, model_folder=tiny_lm, progress=False)
    plain_bytes = (first / "adapter_model.safetensors").read_bytes()
    assert adapter_sha(first) == hashlib.sha256(plain_bytes).hexdigest()[:12]  # a plain adapter: its own weights

    second = tmp_path / "models" / "fold" / "qta-syn-ft" / cfg.adapter_name(2)  # where the rewriter looks
    report = train_adapter(pairs("weather forecast of a city", "get the weather forecast"), cfg, 2, second,
                           model_folder=tiny_lm, progress=False, init_adapter=first)
    # DPO's policy and reference start from the first adapter: before the first update they are equal, and the
    # completions' log-probabilities are not the base LLM's (the same pairs trained from the base: other values)
    step = report["history"][0]
    assert abs(step["rewards/chosen"]) < 1e-4 and abs(step["rewards/rejected"]) < 1e-4, step
    from_base = train_adapter(pairs("weather forecast of a city", "get the weather forecast"), cfg, 2,
                              tmp_path / "models" / "base" / "qta" / "m2", model_folder=tiny_lm, progress=False)
    assert abs(from_base["history"][0]["logps/chosen"] - step["logps/chosen"]) > 1e-3
    # the saved folder is self-contained: a copy of the first adapter; its identity covers both
    assert (second / "init" / "adapter_model.safetensors").read_bytes() == plain_bytes
    assert report["training"]["init"] == adapter_sha(first) != adapter_sha(second)
    own = hashlib.sha256((second / "adapter_model.safetensors").read_bytes()).hexdigest()[:12]
    assert adapter_sha(second) != own
    assert not any(str(tmp_path) in f.read_text(errors="ignore") for f in second.rglob("*.json"))
    assert any(abs(v).max() > 0 for k, v in load_file(str(second / "adapter_model.safetensors")).items()
               if "lora_B" in k)

    # inference merges the first adapter, then the second: unlike either alone
    ids = None
    logits = {}
    for name, adapter in (("first", first), ("both", second)):
        llm = QTALLM(cfg, adapter)
        if ids is None:
            ids = torch.tensor([llm.engine.tokenize("weather in city 0")])
        with torch.no_grad():
            logits[name] = llm.engine.model(ids).logits
    alone = tmp_path / "alone"
    alone.mkdir()
    for f in second.iterdir():
        if f.is_file():
            (alone / f.name).write_bytes(f.read_bytes())
    with torch.no_grad():
        logits["second alone"] = QTALLM(cfg, alone).engine.model(ids).logits
    assert not torch.allclose(logits["both"], logits["first"])
    assert not torch.allclose(logits["both"], logits["second alone"])

    # the rewriter reuses the adapter trained on top of the same first adapter, and refuses it over another
    rw = QTARewriter(cfg, adapter_root=second.parent, init_adapter=first)
    assert rw._adapter_ready(2)
    assert QTARewriter(cfg, adapter_root=second.parent)._adapter_ready(2)  # a saved copy: its own init/
    report_file = second / "qta.json"
    made = json.loads(report_file.read_text())
    made["training"]["init"] = "0" * 12
    report_file.write_text(json.dumps(made))
    with pytest.raises(Exception, match=r"trained with other settings \(\['init'\]\)"):
        rw._adapter_ready(2)


def test_qta_syn_large_is_the_synthetic_training_again_with_the_larger_rewriter(tmp_path, monkeypatch):
    from tests.methods.qta.test_synthetic import _catalog
    from toolret.registry import BuildContext, build_component
    from toolret.stages import render_dvc_yaml

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    plain = _params()
    assert "qta_syn_large" not in yaml.safe_load(render_dvc_yaml(plain))["stages"]  # no larger rewriter named
    params = validate_params({"qta": {**plain.qta.model_dump(), "synthetic": {
        **plain.qta.synthetic.model_dump(), "larger": {"set": {"llm_model": "big-llm"},
                                                       "grid": {"dense": {"method": "dense"}}}}}})
    rel = lambda p: p.relative_to(tmp_path).as_posix()  # noqa: E731
    training = build_component("qta-syn-large", BuildContext(_catalog("bench-synthetic", n_train=2), params))
    assert (training.config.llm_model, training.config.m, training.config.bf16) == ("big-llm", 1, True)
    assert not training.frozen and rel(training.adapter_root) == "data/models/bench-synthetic/qta-large"
    assert rel(training.preferences) == "data/qta/bench-synthetic/big-llm/preferences.jsonl"  # its own samples
    assert rel(training.committed_checkpoint(1)) == \
        "data/qta/bench-synthetic/big-llm/checkpoints/qta-large/m1-rewrites_only-big-llm"
    on_bench = build_component("qta-syn-large", BuildContext(_catalog("bench"), params))
    assert on_bench.frozen and on_bench.adapter_dir() == training.adapter_dir()
    small = build_component("qta-syn", BuildContext(_catalog("bench"), params))
    assert small.config.llm_model != "big-llm" and rel(small.adapter_root) == "data/models/bench-synthetic/qta"
    with pytest.raises(ConfigError, match=r"qta-syn-large: dataset 'other'.*names \['bench'\]"):
        build_component("qta-syn-large", BuildContext(_catalog("other"), params))

    stages = yaml.safe_load(render_dvc_yaml(params))["stages"]
    train = stages["qta_syn_large"]["do"]
    assert "--record-generations qta-preferences" in train["cmd"]  # its samples are committed as they come
    assert {"data/qta/${item.catalog}/${qta.synthetic.larger.set.llm_model}/preferences.jsonl": {"cache": False}} \
        in train["outs"]
    assert "data/models/${item.catalog}/qta-large" in stages["qta_syn_large_evaluate"]["do"]["deps"]
    evaluate = stages["qta_syn_large_evaluate"]["do"]  # and its test rewrites, beside its own preference data
    assert "toolret rewrite --component qta-syn-large" in evaluate["cmd"]
    assert "--record-generations qta-rewrites" in evaluate["cmd"]  # a clone's rerun reads its rewrites from git
    assert {"data/qta/${item.catalog}/${qta.synthetic.larger.set.llm_model}/${key}.test-rewrites.jsonl":
            {"cache": False}} in evaluate["outs"]
