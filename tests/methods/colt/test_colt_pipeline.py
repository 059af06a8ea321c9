"""COLT on the common method shape, on the fixture catalog with the real packaged MiniLM: fit -> index ->
evaluate through the CLI, save / load, artifact checks, the ablation grid, `toolret evaluate` training
what is absent (dense-ft included), list sampling and the dev selection rule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolret.errors import CatalogError

pytestmark = pytest.mark.slow


def test_fit_index_evaluate_and_round_trip(colt_project, cli):
    from toolret.config import load_params
    from toolret.pipeline import Pipeline, build_pipeline
    from toolret.roles import Corpus

    proj, catalog, curated, _ = colt_project
    model = proj / "data" / "models" / catalog.name / "colt"
    assert cli(proj, "fit", "--component", "colt", "--catalog", str(curated), "--out", str(model)) == 0
    meta = json.loads((model / "colt.json").read_text())
    report = meta["training"]
    assert meta["settings"]["encoder"] == "dense" and meta["tool_ids"] == catalog.tool_ids
    assert report["graphs"]["train_queries"] == len(catalog.split("train"))
    assert report["dev_queries"] == len(catalog.split("dev")) > 0
    assert report["curve"][0]["epoch"] == 0 and 1 <= report["epochs_run"] <= 8
    assert np.load(model / "tools.npy").shape == (len(catalog.tools), 384)

    index = proj / "data" / "indexes" / catalog.name / "colt"
    assert cli(proj, "index", "--catalog", str(curated), "--method", "colt", "--model", str(model),
               "--docs", "original", "--out", str(index)) == 0
    runs = proj / "data" / "runs" / catalog.name / "colt"
    assert cli(proj, "evaluate-index", "--catalog", str(curated), "--index", str(index), "--out", str(runs)) == 0
    result = json.loads((runs / "original.json").read_text())
    assert result["method"] == "colt" and result["n_queries"] == len(catalog.split("test"))
    assert {"recall@5", "ndcg@5", "comp@5"} <= set(result["metrics"])
    assert result["components"]["colt"]["best_epoch"] == report["best"]["epoch"]

    # the saved pipeline ranks exactly as a freshly built one over the same artifact
    texts = [q.text for q in catalog.split("test")]
    loaded = Pipeline.load(index / "original").search(texts, 5)
    fresh = build_pipeline("colt", catalog, load_params(proj / "params.yaml"), model=str(model))
    fresh.fit(catalog)
    fresh.index(Corpus.from_catalog(catalog))
    again = fresh.search(texts, 5)
    np.testing.assert_array_equal(loaded.indices, again.indices)
    np.testing.assert_allclose(loaded.scores, again.scores, atol=1e-6)


def test_artifact_mismatch_and_wrong_documents_are_clear_errors(colt_project):
    from toolret.config import apply_overrides
    from toolret.pipeline import build_pipeline

    proj, catalog, _, params = colt_project
    model = str(proj / "m")
    p = build_pipeline("colt", catalog, params, model=model)
    p.fit(catalog)
    other = build_pipeline("colt", catalog, apply_overrides(params, {"colt.num_layers": 2}), model=model)
    with pytest.raises(CatalogError, match=r"learned with other \['settings'\]"):
        other.fit(catalog)
    with pytest.raises(CatalogError, match="learned on the 'original' documents"):
        p.retriever.index(catalog.tool_ids, [d + " changed" for d in catalog.docs("original")])
    unfitted = build_pipeline("colt", catalog, params, model=str(proj / "absent"))
    with pytest.raises(CatalogError, match="not fitted"):
        unfitted.retriever.index(catalog.tool_ids, catalog.docs("original"))


def test_ablation_grid_trains_each_row_and_pairs_it(colt_project, cli):
    proj, catalog, curated, _ = colt_project
    import yaml

    raw = yaml.safe_load((proj / "params.yaml").read_text())
    raw["colt"]["ablations"] = {
        "dense": {"method": "dense"},
        "colt": {"method": "colt", "baseline": "dense"},
        "tool_view": {"method": "colt", "set": {"colt.views": "tool", "colt.model_name": "colt-ablations/tool_view"},
                      "baseline": "colt"},
        "layers0": {"method": "colt", "set": {"colt.num_layers": 0, "colt.model_name": "colt-ablations/layers0"},
                    "baseline": "colt"},
    }
    (proj / "params.yaml").write_text(yaml.safe_dump(raw))
    out = proj / "data" / "runs" / catalog.name / "colt-ablations"
    assert cli(proj, "evaluate-grid", "--catalog", str(curated), "--grid", "colt.ablations", "--out", str(out)) == 0
    summary = json.loads((out / "summary.json").read_text())
    v = summary["variants"]
    assert set(v) == {"dense", "colt", "tool_view", "layers0"}
    assert v["colt"]["vs_baseline"]["comp@5"]["baseline"] == "dense"
    assert 0 <= v["tool_view"]["vs_baseline"]["comp@5"]["p_value"] <= 1
    assert v["tool_view"]["vs_baseline"]["comp@5"]["n"] == len(catalog.split("test"))
    models = proj / "data" / "models" / catalog.name
    for name, views, layers in (("colt", "both", 1), ("colt-ablations/tool_view", "tool", 1),
                                ("colt-ablations/layers0", "both", 0)):
        settings = json.loads((models / name / "colt.json").read_text())["settings"]
        assert (settings["views"], settings["num_layers"]) == (views, layers)


def test_evaluate_trains_what_is_absent_including_dense_ft(colt_project, cli, tmp_path):
    """`toolret evaluate --method colt` on a fresh project: dense-ft (tiny) is fine-tuned, then COLT over it."""
    proj, catalog, _, _ = colt_project
    source = str(tmp_path / "fixture")  # the BEIR folder the fixture was written to (colt_project)
    out = tmp_path / "r.json"
    assert cli(proj, "evaluate", "--dataset", source, "--method", "colt", "--output", str(out),
               "--set", "colt.encoder=dense-ft", "--set", "finetune.epochs=1", "--set", "finetune.batch_size=16",
               "--set", "finetune.max_train_pairs=32", "--set", "finetune.eval_steps=0",
               "--set", "finetune.max_seq_length=32", "--set", "catalog.dev_fraction=0.2") == 0
    models = proj / "data" / "models" / catalog.name
    assert (models / "dense-ft" / "model").is_dir()
    meta = json.loads((models / "colt" / "colt.json").read_text())
    assert meta["encoder_model"] == f"data/models/{catalog.name}/dense-ft/model"  # project-relative
    assert json.loads(out.read_text())["metrics"]["comp@5"] >= 0


def test_sample_lists():
    from toolret.methods.colt.train import sample_lists

    gold = [(0, 3), (5,), (1, 2, 4)]
    cand, labels = sample_lists(gold, n_tools=12, list_size=6, rng=np.random.default_rng(0))
    assert cand.shape == labels.shape == (3, 6)
    for row, g in enumerate(gold):
        assert tuple(cand[row, :len(g)]) == g and labels[row, :len(g)].tolist() == [1.0] * len(g)
        assert labels[row, len(g):].sum() == 0 and not set(cand[row, len(g):]) & set(g)
        assert len(set(cand[row])) == 6
    with pytest.raises(CatalogError, match="list_size=3 must exceed"):
        sample_lists([(0, 1, 2)], n_tools=12, list_size=3, rng=np.random.default_rng(0))


def test_selection_follows_the_both_improve_rule(colt_project):
    """The kept epoch is the last one whose dev Recall@k AND COMP@k both beat the best so far (epoch 0 included);
    training stops after `patience` epochs without a new best."""
    from toolret.config import apply_overrides
    from toolret.pipeline import build_pipeline

    proj, catalog, _, params = colt_project
    params = apply_overrides(params, {"colt.max_epochs": 12, "colt.patience": 3, "colt.lr": 0.02})
    p = build_pipeline("colt", catalog, params, model=str(proj / "sel"))
    p.fit(catalog)
    report = json.loads((proj / "sel" / "colt.json").read_text())["training"]
    best, since = report["curve"][0], 0
    for row in report["curve"][1:]:
        if row["recall@3"] > best["recall@3"] and row["comp@3"] > best["comp@3"]:
            best, since = row, 0
        else:
            since += 1
    assert report["best"]["epoch"] == best["epoch"]
    assert report["epochs_run"] == 12 or since == 3
