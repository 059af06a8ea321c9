import time

import pytest

from toolret.llm.models import ensure_local_model, model_revision


def test_conversion_is_cached(model_folder):
    t0 = time.perf_counter()
    again = ensure_local_model()
    assert time.perf_counter() - t0 < 2.0
    assert again == model_folder
    assert (model_folder / "config.json").is_file()
    assert (model_folder / "model.safetensors").is_file()
    cfg = (model_folder / "config.json").read_text()
    assert "quantization_config" not in cfg


def test_local_folder_passes_through(model_folder):
    assert ensure_local_model(str(model_folder)) == model_folder


def test_unknown_model_rejected(tmp_path):
    with pytest.raises(ValueError):
        ensure_local_model("no-such-model", models_dir=tmp_path)


def test_revision_is_stable_and_short(model_folder):
    r1, r2 = model_revision(model_folder), model_revision(model_folder)
    assert r1 == r2 and len(r1) == 12
    int(r1, 16)
