"""QTA end to end on the fixture catalog with a tiny REAL causal LM: preference pairs follow the eq. 4
reward, a tiny LoRA adapter trains by DPO in seconds, save / load round-trips it, and
``toolret evaluate --method qta`` trains what is absent on a k-fold of a catalog without a train split."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolret.catalog.datasets import load_dataset
from toolret.methods.qta.components import QTARewriter
from toolret.methods.qta.config import QTAConfig
from toolret.methods.qta.generation import QTALLM
from toolret.methods.qta.preferences import dpo_pairs
from toolret.methods.qta.reward import rank_score
from toolret.retrieval.dense import DenseRetriever

pytestmark = pytest.mark.slow


def _cfg(tiny_lm, tmp_path, **kw):
    base = dict(m=2, s=3, doc_chars=60, max_new_tokens=12, train_queries=4, lora_r=2, lora_alpha=4, batch_size=8,
                max_length=1024, save_steps=1, mlflow=False, llm_model=str(tiny_lm), llm_batch_size=8,
                llm_num_threads=1, cache_dir=str(tmp_path / "llm_cache"))
    return QTAConfig(**{**base, **kw})


def _bow_ranks(encoder, text, docs, gold):
    """Independent ranks: every tool scoring strictly higher is ahead (best case) / ties included (worst case)."""
    q = encoder.encode([text])[0]
    s = encoder.encode(list(docs)) @ q
    return [(int((s > s[g]).sum()) + 1, int((s >= s[g]).sum())) for g in gold]


def test_pairs_follow_the_reward_and_a_tiny_adapter_trains_and_round_trips(tmp_path, fixture_catalog_dir, tiny_lm,
                                                                          bow_encoder):
    cat = load_dataset(str(fixture_catalog_dir))
    cfg = _cfg(tiny_lm, tmp_path)
    docs = cat.docs("original")
    rw = QTARewriter(cfg, documents=docs, tool_ids=cat.tool_ids, adapter_root=tmp_path / "models" / "qta",
                     preferences=tmp_path / "prefs" / "preferences.jsonl",
                     retriever=DenseRetriever(encoder=bow_encoder), model_folder=tiny_lm)
    rw.fit(cat)

    records = [json.loads(line) for line in (tmp_path / "prefs" / "preferences.jsonl").read_text().splitlines()]
    assert len(records) == 4 * 2 and {r["round"] for r in records} == {0, 1}
    pairs = 0
    for r in records:
        gold = [cat.tool_position(t) for t in r["gold"]]
        rewards = [c["reward"] for c in r["candidates"]]
        for c in r["candidates"]:
            bounds = _bow_ranks(bow_encoder, c["text"], docs, gold)
            assert all(lo <= rank <= hi for rank, (lo, hi) in zip(c["ranks"], bounds)), (c, bounds)
            assert c["reward"] == pytest.approx(sum(rank_score(k, 10) for k in c["ranks"]))
        assert r["candidates"][0]["source"] == "query" and r["candidates"][0]["text"] == r["query"]
        if r["chosen"] is None:
            assert r["skip"] == "tie"
            continue
        pairs += 1
        assert rewards[r["chosen"]] == max(rewards) > min(rewards) == rewards[r["rejected"]]
    rows = dpo_pairs(records, cfg.m)
    assert len(rows) == pairs >= 2
    assert rows[0]["prompt"][-1]["content"].endswith("Rewritten query:")

    adapter = rw.adapter_dir(2)
    assert adapter.name == "m2-tiny-llama"  # a non-default LLM is part of the adapter name
    report = json.loads((adapter / "qta.json").read_text())
    assert report["steps"] == 1 and report["n_pairs"] == pairs and report["training"]["m"] == 2
    assert {"loss", "rewards/margins", "rewards/accuracies"} <= set(report["history"][0])
    from safetensors.numpy import load_file

    weights = load_file(str(adapter / "adapter_model.safetensors"))
    assert any("lora_B" in k and np.abs(v).max() > 0 for k, v in weights.items())  # B starts at 0: it moved
    assert {v.dtype for v in weights.values()} == {np.dtype("float16")}  # stored at half the bytes for git
    # portable: the base LLM by name, no absolute path of this machine anywhere in the artifact
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == cfg.llm_model
    assert not any(str(tmp_path) in f.read_text(errors="ignore") or "/.cache/" in f.read_text(errors="ignore")
                   for f in adapter.iterdir() if f.suffix in (".json", ".md"))

    # the adapter changes the model, and generations are keyed on it
    base, tuned = QTALLM(cfg), QTALLM(cfg, adapter)
    assert tuned.generator.model_id.startswith(base.generator.model_id + "+qta-lora-")
    import torch

    ids = torch.tensor([base.engine.tokenize("get the weather forecast")])
    with torch.no_grad():
        assert not torch.allclose(base.engine.model(ids).logits, tuned.engine.model(ids).logits)

    # save / load round-trips: stored rewrites, and new queries rewritten by the reloaded adapter
    queries = [q.text for q in cat.split("test")[:3]]
    first = rw.rewrite(queries)
    assert all(len(g) == 1 and g[0] for g in first)
    rw.save(tmp_path / "saved")
    loaded = QTARewriter.load(tmp_path / "saved")
    assert loaded.rewrite(queries) == first
    fresh = cat.split("test")[3].text
    loaded._llm_factory = lambda a: QTALLM(loaded.config, a, cache_path=tmp_path / "other_cache.jsonl")
    assert loaded.rewrite([fresh]) == rw.rewrite([fresh])
    assert loaded.llm.generator.model_id == rw.llm.generator.model_id  # the same adapter weights

    # an adapter trained with other settings is never silently reused
    other = QTARewriter(cfg.replace(lr=0.5), documents=docs, tool_ids=cat.tool_ids,
                        adapter_root=tmp_path / "models" / "qta")
    with pytest.raises(Exception, match="trained with other settings"):
        other.fit(cat)


def test_cli_evaluate_trains_what_is_absent_on_a_fold(tmp_path, monkeypatch, tiny_lm):
    """A catalog without a train split: ``toolret evaluate --method qta`` folds it (auto_folds), samples the
    preference data, trains the adapter, and evaluates on the fold's test queries only."""
    from make_fixture import write_fixture_catalog

    from toolret.cli import main

    src = write_fixture_catalog(tmp_path / "notrain", n_train=0, n_test=20)
    proj = tmp_path / "proj"
    proj.mkdir()
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(proj))
    (proj / "params.yaml").write_text(json.dumps({
        "catalog": {"auto_folds": 4},
        "evaluation": {"ks": [1, 5], "k_max": 10, "bootstrap_samples": 20},
        "qta": {**_cfg(tiny_lm, tmp_path, m=1, train_queries=0).to_dict()},
    }))
    out = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(src), "--method", "qta", "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["dataset"] == "notrain-fold0of4" and result["n_queries"] == 15
    assert result["components"]["qta-rewriter"]["llm_outputs"] == 15
    adapter = proj / "data" / "models" / "notrain-fold0of4" / "qta" / "m1-tiny-llama"
    assert (adapter / "adapter_model.safetensors").is_file()
    # a non-default generator (tiny-llama) keeps its generated artifacts under its own slug
    prefs = proj / "data" / "qta" / "notrain-fold0of4" / "tiny-llama" / "preferences.jsonl"
    train_ids = {json.loads(line)["query_id"] for line in prefs.read_text().splitlines()}
    tested = {json.loads(line)["query_id"] for line in out.with_name("r.per_query.jsonl").read_text().splitlines()}
    assert len(train_ids) == 5 and not train_ids & tested  # never tested on a training query


def test_training_resumes_from_its_last_checkpoint(tmp_path, tiny_lm, monkeypatch):
    """A training killed after its last checkpoint resumes there: the work folder beside the adapter is kept
    until the adapter is written, and a rerun picks up its newest complete checkpoint."""
    import shutil

    from toolret.evaluation import load_run_info
    from toolret.methods.qta import training

    cfg = _cfg(tiny_lm, tmp_path, batch_size=1, save_steps=1)
    pairs = [{"prompt": [{"role": "user", "content": f"weather in city {i}"}],
              "chosen": [{"role": "assistant", "content": "get the weather forecast"}],
              "rejected": [{"role": "assistant", "content": "buy shoes"}]} for i in range(2)]
    out = tmp_path / "models" / "ds" / "qta" / "m2"
    monkeypatch.setattr(training.shutil, "rmtree", lambda *a, **k: None)  # "killed" before cleaning up
    training.train_adapter(pairs, cfg, 2, out, model_folder=tiny_lm, progress=False)
    work = training.work_dir(out, cfg, 2, pairs)
    assert (work / "checkpoint-2" / "trainer_state.json").is_file() and work.parent == out.parent.parent
    shutil.rmtree(out)  # the adapter was never written
    monkeypatch.undo()
    report = training.train_adapter(pairs, cfg, 2, out, model_folder=tiny_lm, progress=False)
    assert report["steps"] == 2 and load_run_info(out / "qta.json")["resumed_from"] == "checkpoint-2"
    assert (out / "adapter_model.safetensors").is_file() and not work.exists()


def test_a_training_resumes_in_another_session_from_its_committed_checkpoint(tmp_path, tiny_lm, monkeypatch):
    """Only git lasts between sessions: each checkpoint is exported to a committed folder (optimizer moments
    kept), a run on a new work tree (no work folder) resumes from it, and it goes once the adapter is saved."""
    import shutil

    from toolret.evaluation import load_run_info
    from toolret.methods.qta import training

    cfg = _cfg(tiny_lm, tmp_path, batch_size=1, save_steps=1)
    pairs = [{"prompt": [{"role": "user", "content": f"weather in city {i}"}],
              "chosen": [{"role": "assistant", "content": "get the weather forecast"}],
              "rejected": [{"role": "assistant", "content": "buy shoes"}]} for i in range(3)]
    out = tmp_path / "models" / "ds" / "qta" / "m2"
    committed = tmp_path / "qta" / "ds" / "checkpoints" / "qta" / "m2"
    monkeypatch.setattr(training, "discard_checkpoint", lambda *a, **k: None)  # as if killed after the last save
    training.train_adapter(pairs, cfg, 2, out, model_folder=tiny_lm, progress=False, committed=committed)
    monkeypatch.undo()
    manifest = json.loads((committed / "progress.json").read_text())
    assert manifest["latest"] == "checkpoint-3" and manifest["optimizer_moments"] == "kept"
    exported = committed / "checkpoint-3"
    assert (exported / "optimizer.pt").is_file() and (exported / "adapter_model.safetensors").is_file()
    assert json.loads((exported / "adapter_config.json").read_text())["base_model_name_or_path"] == cfg.llm_model
    # a new session: the work tree's ignored folders are gone (the work folder was), the committed checkpoint is not
    assert not training.work_dir(out, cfg, 2, pairs).exists()
    shutil.rmtree(out)
    report = training.train_adapter(pairs, cfg, 2, out, model_folder=tiny_lm, progress=False, committed=committed)
    info = load_run_info(out / "qta.json")
    assert info["resumed_from"] == "checkpoint-3" and info["resumed_from_committed"] is True
    assert report["steps"] == 3 and (out / "adapter_model.safetensors").is_file()
    assert not committed.exists()  # the adapter is saved: its progress folder goes
