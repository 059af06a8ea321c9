"""`make run`'s job defers costly stages (training, LLM generation) whose outputs are absent, and
everything downstream of them; once the outputs are there (trained, or restored by `dvc pull`) they run."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagster_project.definitions import deferred_items
from dagster_project.dvc_assets import StageItem

pytestmark = pytest.mark.integration


def _item(name, outs, upstream=(), costly=False):
    return StageItem(name, name.split("@")[0], (name,), {}, "cmd", (), (), tuple(outs), tuple(upstream), costly)


def test_costly_stages_without_outputs_are_deferred_with_their_downstream(tmp_path: Path) -> None:
    items = [_item("clean@a", ["data/curated/a"]),
             _item("finetune@a", ["data/models/a/dense-ft"], ["clean@a"], costly=True),
             _item("index_ft@a", ["data/indexes/a/dense-ft"], ["finetune@a"]),
             _item("evaluate_ft@a", ["data/runs/a/dense-ft"], ["index_ft@a"]),
             _item("index@a-bm25", ["data/indexes/a/bm25"], ["clean@a"])]
    assert [i.name for i in deferred_items(items, tmp_path)] == ["evaluate_ft@a", "finetune@a", "index_ft@a"]
    (tmp_path / "data/models/a/dense-ft").mkdir(parents=True)  # e.g. restored by `dvc pull`
    assert deferred_items(items, tmp_path) == []
