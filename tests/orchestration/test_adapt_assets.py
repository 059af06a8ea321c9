"""`toolret adapt` in Dagster: an asset per user catalog (source.beir), kept out of `make run`'s job; the
sensor and the schedule request only catalogs whose tools changed since their last adapt."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))

pytestmark = pytest.mark.integration


def _project(tmp_path: Path) -> tuple[Path, Path]:
    from make_fixture import write_fixture_catalog

    project = tmp_path / "p"
    project.mkdir()
    catalog = write_fixture_catalog(project / "mine" / "shop", n_tools=12, n_train=4, n_test=4, seed=1)
    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"noop": {"cmd": "true"}}}))
    (project / "params.yaml").write_text(yaml.safe_dump({"source": {"beir": {"shop": "mine/shop"}}}))
    return project, catalog


def _card(project: Path, fingerprint: str) -> None:
    champion = project / "data" / "adapt" / "shop" / "champion"
    champion.mkdir(parents=True, exist_ok=True)
    (champion / "model_card.json").write_text(json.dumps({"catalog": {"fingerprint": fingerprint}}))


def test_adapt_asset_sensor_and_schedule(tmp_path: Path) -> None:
    from dagster_project.adapt_assets import adapt_key, moved
    from dagster_project.definitions import ALL_JOB, RUN_JOB, build_definitions
    from toolret.adapt import catalog_fingerprint, load_tools

    project, catalog = _project(tmp_path)
    defs = build_definitions(project)
    graph = defs.resolve_asset_graph()
    assert adapt_key("shop") in graph.get_all_asset_keys()
    assert adapt_key("shop") not in defs.resolve_job_def(RUN_JOB).asset_layer.executable_asset_keys  # not make run's
    assert adapt_key("shop") not in defs.resolve_job_def(ALL_JOB).asset_layer.executable_asset_keys  # nor paper's
    assert adapt_key("shop") in defs.resolve_job_def("adapt_job").asset_layer.executable_asset_keys
    sensor = defs.get_sensor_def("adapt_catalog_changed")
    schedule = defs.get_schedule_def("weekly_adapt")
    fp = catalog_fingerprint(load_tools(catalog))

    def run_keys() -> list[str]:
        with dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(), definitions=defs) as ctx:
            result = sensor.evaluate_tick(ctx)
        return [r.run_key for r in result.run_requests or []]

    assert run_keys() == [f"shop-{fp[:16]}"]  # never adapted
    _card(project, fp)
    assert run_keys() == [] and moved(project) == {}
    with dg.build_schedule_context(instance=dg.DagsterInstance.ephemeral()) as ctx:
        assert not schedule.evaluate_tick(ctx).run_requests
    # a tool's document changes: the catalog moved, the sensor and the schedule ask for it
    lines = (catalog / "corpus.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["text"] += " Now also returns the pollen count."
    (catalog / "corpus.jsonl").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    new = catalog_fingerprint(load_tools(catalog))
    assert new != fp and run_keys() == [f"shop-{new[:16]}"]
    with dg.build_schedule_context(instance=dg.DagsterInstance.ephemeral()) as ctx:
        reqs = schedule.evaluate_tick(ctx).run_requests
    assert [r.asset_selection for r in reqs] == [[adapt_key("shop")]]
    shutil.rmtree(project / "data")
