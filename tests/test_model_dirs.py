"""Where a component trained on a catalog keeps its artifact: one rule for dense-ft and ToolRerank."""

from __future__ import annotations

from toolret.catalog.model import Catalog, Query, Tool
from toolret.config import load_params
from toolret.paths import data_dir, model_dir
from toolret.registry import BuildContext, build_component


def test_a_named_catalog_or_a_curated_folder_maps_to_its_models_folder():
    models = data_dir() / "models"
    assert model_dir("toolbench-synthetic", "dense-ft") == models / "toolbench-synthetic" / "dense-ft"
    assert model_dir("data/curated/toolbench-synthetic", "dense-ft") == models / "toolbench-synthetic" / "dense-ft"
    # an ablation's catalog keeps its sub-folder: data/curated/ablations/x -> data/models/ablations/x
    assert (model_dir("data/curated/ablations/toolbench-synthetic-single", "dense-ft")
            == models / "ablations" / "toolbench-synthetic-single" / "dense-ft")
    assert (model_dir(str(data_dir() / "curated" / "ablations" / "x"), "toolrerank")
            == models / "ablations" / "x" / "toolrerank")
    # a folder outside data/curated: by its name
    assert model_dir("/elsewhere/my-train", "toolrerank") == models / "my-train" / "toolrerank"


def test_dense_ft_and_toolrerank_read_an_ablation_catalogs_models_where_they_were_trained():
    tools = [Tool("t1", "Weather", {"original": "Weather: forecast for a city."})]
    catalog = Catalog("toolbench-g1-tool", tools, [Query("q1", "rain in Rome?", "test")], {"q1": {"t1": 1}})
    ablation = "data/curated/ablations/toolbench-synthetic-filtered"
    params = load_params().replace(trained_on={"toolbench-g1-tool": ablation})
    params = params.model_copy(update={"toolrerank": params.toolrerank.model_copy(update={"train_dataset": ablation})})
    ctx = BuildContext(catalog, params)
    assert build_component("dense-ft", ctx).artifact == model_dir(ablation, "dense-ft")
    assert model_dir(ablation, "dense-ft").parent == data_dir() / "models" / "ablations" / "toolbench-synthetic-filtered"
    from toolret.methods.toolrerank import artifact_dir

    assert artifact_dir(ctx) == data_dir() / "models" / "ablations" / "toolbench-synthetic-filtered" / "toolrerank"
