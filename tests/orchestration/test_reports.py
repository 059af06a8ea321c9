"""Report assets on a small hand-written DVC project shaped like the real one.

The stages write evaluation results with tiny scripts (no retrieval): ``evaluate@fx-{bm25,dense}``,
``finetune@fx`` (a fake model folder under ``data/models``) -> ``evaluate_ft@fx``, and a Re-Invoke-like
``evaluate_reinvoke@fx`` whose ``reinvoke-ablations/`` folder also holds a ``summary.json`` that is not
an evaluation result. ``dvc repro`` runs once per module; each test logs into its own MLflow store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from orch_helpers import BIN, make_dvc_project, sh

from dagster_project.definitions import ALL_JOB, build_definitions

pytestmark = pytest.mark.integration

K = dg.AssetKey

WRITE = r'''
import json, sys
from pathlib import Path
from typing import Any
out, method, level = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
name = sys.argv[4] if len(sys.argv) > 4 else "original"
out.mkdir(parents=True, exist_ok=True)
rows = []
for i in range(12):
    hit = float((i * 7 % 12) / 12 < level)
    rows.append({"query_id": f"q{i}", "query": f"find the weather in city {i} \u2014 caf\u00e9", "recall@1": hit / 2,
                 "recall@3": hit, "recall@5": hit, "recall@10": hit, "mrr": hit / 2,
                 "ranked": ["t1", "t2", "t3"], "gold": ["t1"], "gold_names": ["SkyCast/Current Weather"],
                 "top5_names": ["SkyCast/Current Weather", "SkyCast/5 Day Forecast"]})
metrics = {m: sum(r[m] for r in rows) / len(rows) for m in ("recall@1", "recall@3", "recall@5", "recall@10", "mrr")}
result = {"dataset": "fx", "method": method, "docs": "original", "split": "test", "n_queries": len(rows),
          "metrics": metrics, "ci95": {m: [max(0.0, v - .1), min(1.0, v + .1)] for m, v in metrics.items()},
          "provenance": {"dataset_checksums": {}, "dataset_source": "fixture", "artifact_versions": {}}}
(out / f"{name}.json").write_text(json.dumps(result))
(out / f"{name}.per_query.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
'''

REINVOKE = r'''
import json, subprocess, sys
from pathlib import Path
from typing import Any
root = Path(sys.argv[1])
subprocess.run([sys.executable, "write_result.py", str(root / "reinvoke"), "reinvoke", "0.9"], check=True)
subprocess.run([sys.executable, "write_result.py", str(root / "reinvoke-ablations"), "reinvoke[baseline]", "0.6",
                "baseline"], check=True)
(root / "reinvoke-ablations" / "summary.json").write_text(json.dumps(
    {"dataset": "fx", "split": "test", "methods": {}, "ablations": {"baseline": {"metrics": {"recall@5": 0.5}}}}))
'''

DVC_YAML = {"stages": {
    "evaluate": {"matrix": {"dataset": ["fx"], "method": ["bm25", "dense"]},
                 "desc": "Scores the ${item.method} ranking of ${item.dataset} on the test queries.",
                 "cmd": "python write_result.py data/runs/${item.dataset}/${item.method} ${item.method} 0.5",
                 "deps": ["write_result.py"], "params": ["evaluation", "${item.method}"],
                 "outs": ["data/runs/${item.dataset}/${item.method}"]},
    "finetune": {"foreach": ["fx"], "do": {
        "cmd": "mkdir -p data/models/${item}/dense-ft && cp weights.bin data/models/${item}/dense-ft/",
        "deps": ["weights.bin"], "params": ["finetune"], "outs": ["data/models/${item}/dense-ft"]}},
    "evaluate_ft": {"foreach": ["fx"], "do": {
        "cmd": "python write_result.py data/runs/${item}/dense-ft dense-ft 0.7",
        "deps": ["write_result.py", "data/models/${item}/dense-ft"], "params": ["evaluation"],
        "outs": ["data/runs/${item}/dense-ft"]}},
    "evaluate_reinvoke": {"foreach": ["fx"], "do": {
        "cmd": "python write_reinvoke.py data/runs/${item}",
        "deps": ["write_result.py", "write_reinvoke.py"], "params": ["reinvoke", "evaluation"],
        "outs": ["data/runs/${item}/reinvoke", "data/runs/${item}/reinvoke-ablations"]}},
}}
PARAMS = {"datasets": ["fx"], "evaluation": {"ks": [1, 3, 5, 10]}, "bm25": {"k1": 1.2}, "dense": {"model": "m"},
          "finetune": {"epochs": 1}, "reinvoke": {"n_queries": 10}}
# what the report must log: one evaluation run per (method, docs); summary.json is not a result
EXPECTED_EVALUATIONS = {("bm25", "original"), ("dense", "original"), ("dense-ft", "original"),
                        ("reinvoke", "original"), ("reinvoke[baseline]", "original")}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = make_dvc_project(tmp_path_factory.mktemp("reports") / "p", DVC_YAML, PARAMS, copy_code=False)
    (path / "write_result.py").write_text(WRITE)
    (path / "write_reinvoke.py").write_text(REINVOKE)
    (path / "weights.bin").write_bytes(b"\x00weights v1")
    sh([str(BIN / "dvc"), "repro", "-q"], path)
    return path


@pytest.fixture
def mlflow_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def _report_keys(defs: dg.Definitions, dataset: str) -> list[dg.AssetKey]:
    return sorted(k for k in defs.resolve_asset_graph().get_all_asset_keys()
                  if k.path[0] == "report" and k.path[-1].startswith(f"{dataset}."))


def _materialize(defs: dg.Definitions, keys, instance: dg.DagsterInstance | None = None):
    return defs.resolve_job_def(ALL_JOB).execute_in_process(
        instance=instance or dg.DagsterInstance.ephemeral(), asset_selection=list(keys), raise_on_error=False)


def _failures(result) -> list[str]:
    return [str(e.event_specific_data.error) for e in result.all_events if e.event_type_value == "STEP_FAILURE"]


def _runs(uri: str, kind: str) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("toolret-comparisons" if kind == "comparison" else "toolret")
    return [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("toolret.kind") == kind]


def test_report_twice_skips_non_results_and_logs_each_evaluation_once(project: Path, mlflow_uri: str) -> None:
    defs = build_definitions(project)
    keys = _report_keys(defs, "fx")
    assert keys
    for _ in range(2):
        result = _materialize(defs, keys)
        assert result.success, _failures(result)
    evals = _runs(mlflow_uri, "evaluation")
    pairs = [(r.data.tags["toolret.method"], r.data.tags["toolret.docs"]) for r in evals]
    assert sorted(pairs) == sorted(EXPECTED_EVALUATIONS)  # once each: no duplicate, no summary.json
    assert len(_runs(mlflow_uri, "comparison")) == 1


def _materializations(result) -> dict[dg.AssetKey, Any]:
    return {e.asset_key: e.materialization for e in result.get_asset_materialization_events()}


def test_report_metadata_links_runs_and_registered_models(project: Path, mlflow_uri: str) -> None:
    from mlflow import MlflowClient

    defs = build_definitions(project)
    result = _materialize(defs, _report_keys(defs, "fx"))
    assert result.success, _failures(result)
    mats = _materializations(result)
    client = MlflowClient(mlflow_uri)
    exp = client.get_experiment_by_name("toolret")
    ft = {(r.data.tags["toolret.method"]): r for r in _runs(mlflow_uri, "evaluation")}["dense-ft"]

    md = mats[K(["report", "fx.dense-ft"])].metadata
    assert md["dataset"].value == "fx"
    link = md["mlflow/run/dense-ft/original"]
    assert isinstance(link, dg.UrlMetadataValue)
    assert link.url == (f"http://127.0.0.1:5000/#/experiments/{exp.experiment_id}/runs/{ft.info.run_id}"
                        "?workflowType=machine_learning")  # the classic run page, not the GenAI one
    comparison = _runs(mlflow_uri, "comparison")[0]
    assert md["mlflow/comparison_run"].url.endswith(f"/runs/{comparison.info.run_id}?workflowType=machine_learning")

    # the fine-tuned model: registered with the md5 dvc.lock records for its folder, linked both ways
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    md5 = lock["stages"]["finetune@fx"]["outs"][0]["md5"]
    (version,) = client.search_model_versions("name='fx.dense-ft'")
    assert version.tags["dvc_md5"] == md5 and version.tags["dvc_stage"] == "finetune@fx"
    assert version.source == "data/models/fx/dense-ft" and version.run_id == ft.info.run_id
    assert str(client.get_model_version_by_alias("fx.dense-ft", "current").version) == str(version.version)
    assert ft.data.tags["toolret.model.fx.dense-ft"] == f"models:/fx.dense-ft/{version.version}"
    assert md["mlflow/model/fx.dense-ft"].url.endswith(f"/#/models/fx.dense-ft/versions/{version.version}"
                                                      "?workflowType=machine_learning")
    assert "mlflow/model/fx.dense-ft" not in mats[K(["report", "fx.bm25"])].metadata  # bm25 used no model
    bm25 = {(r.data.tags["toolret.method"]): r for r in _runs(mlflow_uri, "evaluation")}["bm25"]
    assert not any(k.startswith("toolret.model.") for k in bm25.data.tags)
    # only the params the bm25 stage declared (evaluation + bm25), not the dense/finetune/reinvoke sections
    declared = {k for k in bm25.data.params if "." in k and k != "dvc.stages"}
    assert declared == {"evaluation.ks", "bm25.k1"}

    again = _materialize(defs, _report_keys(defs, "fx"))
    assert again.success
    assert len(client.search_model_versions("name='fx.dense-ft'")) == 1  # same md5: no new version


def test_quick_run_reports_ask_for_no_unmaterialized_upstream(project: Path, mlflow_uri: str) -> None:
    """A bm25/dense run with its reports: no report depends on an asset the run did not ask for.

    The Dagster UI's *Materialize* asks "are you sure?" about every dependency of the selected assets
    that is outside the selection and has never been materialized; reproduce that rule here."""
    defs = build_definitions(project)
    graph = defs.resolve_asset_graph()
    instance = dg.DagsterInstance.ephemeral()
    quick = [K(["evaluate", "fx.bm25"]), K(["evaluate", "fx.dense"])]
    assert _materialize(defs, quick, instance).success
    reports = [k for k in _report_keys(defs, "fx") if graph.get(k).parent_keys & set(quick)]
    assert sorted(reports) == [K(["report", "fx.bm25"]), K(["report", "fx.dense"])]
    selection = set(quick) | set(reports)
    never = {p for k in reports for p in graph.get(k).parent_keys - selection
             if graph.get(p).is_materializable and instance.get_latest_materialization_event(p) is None}
    assert never == set()
    result = _materialize(defs, reports, instance)
    assert result.success, _failures(result)
    assert {k for k in _materializations(result)} == set(reports)


def test_descriptions_come_from_dvc_yaml_desc(project: Path) -> None:
    graph = build_definitions(project).resolve_asset_graph()
    bm25 = graph.get(K(["evaluate", "fx.bm25"]))
    # the desc of dvc.yaml, interpolated by DVC; the command stays visible
    assert bm25.description.startswith("[fx] Scores the bm25 ranking of fx on the test queries.")
    assert bm25.metadata["dvc/cmd"].value == "python write_result.py data/runs/fx/bm25 bm25 0.5"
    assert bm25.metadata["dataset"] == "fx" and bm25.metadata["method"] == "bm25"
    finetune = graph.get(K(["finetune", "fx.dense-ft"]))  # no desc: the stage and its command, led by the dataset
    assert finetune.description.startswith("[fx] ")
    assert "finetune@fx" in finetune.description and "cp weights.bin" in finetune.description
    report = graph.get(K(["report", "fx.bm25"]))
    assert "fx" in report.description.splitlines()[0] and report.metadata["dataset"] == "fx"


def test_make_run_job_defers_the_reports_of_deferred_evaluations(tmp_path: Path) -> None:
    """`toolret_run` leaves out a costly stage whose output is absent and what depends on it: the
    report asset of its evaluation too (else the job would select a report with nothing to report)."""
    from dagster_project.definitions import RUN_JOB

    stages = {k: v for k, v in DVC_YAML["stages"].items() if k in ("evaluate", "finetune", "evaluate_ft")}
    stages["finetune"] = {"foreach": ["fx"], "do": {**stages["finetune"]["do"], "meta": {"costly": True}}}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    defs = build_definitions(tmp_path)  # nothing materialized: data/models/fx/dense-ft is absent
    job = defs.resolve_job_def(RUN_JOB)
    selected = job.asset_layer.selected_asset_keys
    assert {K(["evaluate", "fx.bm25"]), K(["report", "fx.bm25"]), K(["report", "fx.dense"])} <= selected
    deferred = {K(["finetune", "fx.dense-ft"]), K(["evaluate_ft", "fx.dense-ft"]), K(["report", "fx.dense-ft"])}
    assert not selected & deferred
    # the description names every deferred asset (and counts them as the selection does) with its command
    everything = defs.resolve_asset_graph().get_all_asset_keys()
    assert everything - selected == deferred
    assert f"{len(deferred)} of {len(everything)} assets" in job.description
    lines = job.description.splitlines()
    for key, command in [("finetune/fx.dense-ft", "`dvc repro finetune@fx`"),
                         ("evaluate_ft/fx.dense-ft", "`dvc repro evaluate_ft@fx`"),
                         ("report/fx.dense-ft", "`dvc repro evaluate_ft@fx`")]:
        assert any(f"`{key}`" in line and command in line for line in lines), key
    assert "`make paper`" in job.description


def test_deferred_assets_say_on_their_own_page_why_and_how_to_build_them(tmp_path: Path) -> None:
    """A deferred asset's page shows its description and definition metadata, not the job's: both say why
    `make run` leaves it out and the command that builds it; an asset `make run` builds says nothing of it."""
    stages = {k: v for k, v in DVC_YAML["stages"].items() if k in ("evaluate", "finetune", "evaluate_ft")}
    stages["finetune"] = {"foreach": ["fx"], "do": {**stages["finetune"]["do"], "meta": {"costly": True}}}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    graph = build_definitions(tmp_path).resolve_asset_graph()  # data/models/fx/dense-ft is absent

    finetune = graph.get(K(["finetune", "fx.dense-ft"]))
    head = finetune.description.split("\n\n")[0]
    assert head.startswith("**Deferred**: `make run` (the `toolret_run` job) leaves it out: a costly stage")
    assert "outputs were absent" in head and "`dvc repro finetune@fx`" in head and "`make paper`" in head
    assert "finetune@fx" in finetune.description.split("\n\n", 1)[1]  # the stage's own description follows
    assert finetune.metadata["toolret/build_command"] == "dvc repro finetune@fx"
    assert "costly" in finetune.metadata["toolret/deferred"]

    evaluate_ft = graph.get(K(["evaluate_ft", "fx.dense-ft"]))
    assert "downstream of the deferred costly stage `finetune@fx`" in evaluate_ft.description
    assert "`dvc repro evaluate_ft@fx`" in evaluate_ft.description
    report = graph.get(K(["report", "fx.dense-ft"]))
    assert "reports the deferred evaluation `evaluate_ft@fx`" in report.description
    assert "`dvc repro evaluate_ft@fx` (then materialize this asset)" in report.description

    for key in (K(["evaluate", "fx.bm25"]), K(["report", "fx.bm25"])):
        node = graph.get(key)
        assert "Deferred" not in (node.description or "") and "toolret/deferred" not in node.metadata


def test_report_keys_name_dataset_and_method_and_never_collide() -> None:
    from dagster_project.dvc_assets import StageItem
    from dagster_project.reports import report_keys

    def item(name: str, key_path: tuple[str, ...], method: str) -> StageItem:
        return StageItem(name, key_path[0], key_path, {"dataset": "ds", "method": method}, "c", (), (),
                         (f"data/runs/ds/{method}",))

    items = [item("evaluate@ds-bm25", ("evaluate", "ds.bm25"), "bm25"),
             item("evaluate@ds-reinvoke", ("evaluate", "ds.reinvoke"), "reinvoke"),
             item("evaluate_reinvoke@ds-reinvoke", ("evaluate_reinvoke", "ds.reinvoke"), "reinvoke"),
             item("evaluate_ft@ds", ("evaluate_ft", "ds.dense-ft"), "dense-ft")]
    keys = report_keys("ds", items)
    assert keys["evaluate@ds-bm25"] == K(["report", "ds.bm25"])
    assert keys["evaluate_ft@ds"] == K(["report", "ds.dense-ft"])
    # two stages evaluating a "reinvoke": the stage name keeps them apart, the label still names both
    assert keys["evaluate@ds-reinvoke"] == K(["report", "evaluate", "ds.reinvoke"])
    assert keys["evaluate_reinvoke@ds-reinvoke"] == K(["report", "evaluate_reinvoke", "ds.reinvoke"])


def test_the_reproduction_matrix_asset_logs_each_cell_and_fails_on_a_drifted_record(tmp_path: Path,
                                                                                   mlflow_uri: str) -> None:
    """`report/reproduction_matrix` (in `make run`): every cell read from its record, one MLflow run per cell;
    a record off its expected score fails the step naming the cell."""
    import json

    from dagster_project.definitions import RUN_JOB
    from dagster_project.reproduction_assets import KEY

    stages = {k: v for k, v in DVC_YAML["stages"].items() if k == "evaluate"}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    (tmp_path / "results" / "matrix").mkdir(parents=True)
    record = tmp_path / "results" / "r.json"
    record.write_text(json.dumps({"fx": {"bm25": {"metrics": {"recall@5": 0.5}, "ci95": {"recall@5": [0.4, 0.6]}}}}))
    (tmp_path / "results" / "matrix" / "m.yaml").write_text(
        "method: M\nrecord: results/r.json\ncommand: 'true'\ncells:\n"
        "  - {dataset: fx, condition: bm25, metric: recall@5, at: fx/bm25, expected: 0.5}\n")
    defs = build_definitions(tmp_path)
    assert KEY in defs.resolve_job_def(RUN_JOB).asset_layer.selected_asset_keys
    assert defs.resolve_job_def(ALL_JOB).execute_in_process(
        instance=dg.DagsterInstance.ephemeral(), asset_selection=[KEY]).success
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("toolret-reproduction").experiment_id])
    assert [(r.data.tags["toolret.cell"], r.data.metrics["value"]) for r in runs] == [("M | fx | bm25 | recall@5", 0.5)]
    record.write_text(json.dumps({"fx": {"bm25": {"metrics": {"recall@5": 0.45}}}}))
    result = _materialize(build_definitions(tmp_path), [KEY])
    assert not result.success
    assert any("1 of 1 cells" in f for f in _failures(result))
