"""Fine-tuning the bi-encoder: train pairs only from the train split, a saved model that retrieves better."""

from __future__ import annotations

import json

import pytest

from toolret.catalog.loaders.beir import load_beir
from toolret.errors import CatalogError
from toolret.catalog.datasets import carve_dev_split
from toolret.evaluation import rank_split, score_ranking
from toolret.retrieval.dense import DenseConfig, DenseRetriever
from toolret.retrieval.finetune import FinetuneConfig, finetune, training_pairs

pytestmark = pytest.mark.slow


def test_training_pairs_never_touch_test_or_dev(fixture_catalog_dir):
    catalog = carve_dev_split(load_beir(fixture_catalog_dir), 0.25, seed=0)
    pairs = training_pairs(catalog, "train", "original", 0, seed=0)
    train_texts = {q.text for q in catalog.split("train")}
    assert {q for q, _ in pairs} <= train_texts
    assert len(pairs) == sum(len(catalog.gold(q.id)) for q in catalog.split("train"))
    assert len(training_pairs(catalog, "train", "original", 5, seed=0)) == 5
    catalog_no_train = load_beir(fixture_catalog_dir)
    for q in catalog_no_train.queries:
        q.split = "test"
    with pytest.raises(CatalogError, match="no 'train' split"):
        training_pairs(catalog_no_train, "train", "original", 0, seed=0)


def test_finetune_saves_a_model_that_fits_its_training_queries(fixture_catalog_dir, tmp_path):
    catalog = carve_dev_split(load_beir(fixture_catalog_dir), 0.2, seed=0)
    config = FinetuneConfig(epochs=2, batch_size=8, lr=3e-4, max_seq_length=32, max_train_pairs=0)
    report = finetune(catalog, tmp_path / "ft", config)
    assert json.loads((tmp_path / "ft" / "finetune.json").read_text())["n_train_pairs"] == report["n_train_pairs"]
    assert report["dev"]["n_queries"] == len(catalog.split("dev"))
    assert not (tmp_path / "ft" / "checkpoints").exists()

    def train_ndcg(model: str) -> float:
        r = DenseRetriever(DenseConfig(model=model, max_seq_length=32))
        r.index(catalog.tool_ids, catalog.docs("original"))
        scores, _ = score_ranking(rank_split(r, catalog, "train", 5), catalog, [5], bootstrap_samples=10)
        return scores["metrics"]["ndcg@5"]  # recall@5 is ~0.97 zero-shot on the fixture: ndcg has room

    assert train_ndcg(str(tmp_path / "ft" / "model")) > train_ndcg("all-MiniLM-L6-v2")


def _finetune_process(catalog_dir, out, config: FinetuneConfig):
    """``finetune`` of the fixture catalog (dev carved from train) in a process of its own, to be killed."""
    import subprocess
    import sys

    code = ("import sys; from toolret.catalog.loaders.beir import load_beir; "
            "from toolret.catalog.datasets import carve_dev_split; "
            "from toolret.retrieval.finetune import FinetuneConfig, finetune; "
            f"finetune(carve_dev_split(load_beir(sys.argv[1]), 0.2, seed=0), sys.argv[2], FinetuneConfig(**{config.model_dump()!r}))")
    return subprocess.Popen([sys.executable, "-c", code, str(catalog_dir), str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_finetune_selects_on_dev_and_resumes_after_kill(fixture_catalog_dir, tmp_path):
    """eval_steps > 0: dev recall@5 every n steps, the best step is the saved model, kill -9 resumes."""
    import signal
    import time

    from toolret.retrieval.committed_checkpoint import last_complete_checkpoint

    config = FinetuneConfig(epochs=2, batch_size=8, lr=3e-4, max_seq_length=32, max_train_pairs=0, eval_steps=7)
    out = tmp_path / "ft"
    proc = _finetune_process(fixture_catalog_dir, out, config)
    work_dirs = lambda: list(tmp_path.glob(".ft.work-*"))  # noqa: E731
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if work_dirs() and last_complete_checkpoint(work_dirs()[0]):
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    assert proc.wait() == -signal.SIGKILL, "training ended before its first checkpoint could be interrupted"
    assert not out.exists(), "a killed run must not leave a half-written model"
    checkpoint = last_complete_checkpoint(work_dirs()[0])

    catalog = carve_dev_split(load_beir(fixture_catalog_dir), 0.2, seed=0)
    report = finetune(catalog, out, config)
    from toolret.evaluation import load_run_info

    # how the run went lives in the run-info sidecar, not in the DVC output (whose md5 must not depend on it)
    assert load_run_info(out / "finetune.json")["resumed_from"] == checkpoint.rsplit("/", 1)[1]
    assert "resumed_from" not in report
    steps_per_epoch = -(-report["n_train_pairs"] // config.batch_size)
    assert report["steps"] == config.epochs * steps_per_epoch
    history = report["dev_history"]
    assert report["steps"] % config.eval_steps == 0  # (the last step is scored too: here it is on the grid)
    assert [h["step"] for h in history] == list(range(config.eval_steps, report["steps"] + 1, config.eval_steps))
    best = max(history, key=lambda h: h["dev_recall@5"])  # first maximum: later ties do not replace it
    assert report["selected_step"] == best["step"]
    # the saved model is the selected checkpoint: its dev recall (toolret.metrics) equals the evaluator's
    assert report["dev"]["recall@5"] == pytest.approx(best["dev_recall@5"], abs=1e-6)
    assert not work_dirs() and not (out / "checkpoints").exists()


def test_evaluate_dense_ft_refuses_a_model_trained_with_other_finetune_params(fixture_catalog_dir, tmp_path, monkeypatch):
    """A finetune parameter changes after training: `toolret evaluate --method dense-ft` must not reuse the
    old model; it refuses with a message naming the parameter and how to retrain."""
    from toolret.cli import main

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    (tmp_path / "params.yaml").write_text("finetune: {epochs: 1, batch_size: 8, max_seq_length: 32, eval_steps: 0}\n")
    args = ["--params", str(tmp_path / "params.yaml"), "evaluate", "--dataset", str(fixture_catalog_dir),
            "--method", "dense-ft", "--k", "5"]
    assert main([*args, "--output", str(tmp_path / "a.json")]) == 0
    model = tmp_path / "data" / "models" / "fixture_catalog" / "dense-ft"
    weights = sorted(model.rglob("*.safetensors"))[0]
    before = weights.stat().st_mtime_ns
    assert main([*args, "--output", str(tmp_path / "b.json")]) == 0  # same inputs: reused
    assert json.loads((tmp_path / "a.json").read_text())["metrics"] == json.loads((tmp_path / "b.json").read_text())["metrics"]

    with pytest.raises(CatalogError, match=r"config\.lr: 0\.0002 -> 0\.001.*Retrain it"):
        from toolret.config import load_params
        from toolret.registry import BuildContext, build_component

        params = load_params(tmp_path / "params.yaml", ["finetune.lr=0.001"])
        catalog = carve_dev_split(load_beir(fixture_catalog_dir), params.catalog.dev_fraction, params.catalog.seed)
        build_component("dense-ft", BuildContext(catalog, params)).fit(catalog)
    assert main([*args, "--set", "finetune.lr=0.001", "--output", str(tmp_path / "c.json")]) == 2
    assert not (tmp_path / "c.json").exists() and weights.stat().st_mtime_ns == before


def test_lora_finetune_is_a_small_adapter_that_loads_over_its_base_and_learns(fixture_catalog_dir, tmp_path):
    """finetune.method = lora: the artifact holds only the adapter (MBs, not the 90 MB encoder), names its
    base encoder by its packaged name, loads through the usual encoder path, and fits its training queries."""
    catalog = carve_dev_split(load_beir(fixture_catalog_dir), 0.2, seed=0)
    config = FinetuneConfig(method="lora", epochs=3, batch_size=8, lr=1e-3, max_seq_length=32, eval_steps=4, lora_r=8)
    report = finetune(catalog, tmp_path / "ft", config)
    model = tmp_path / "ft" / "model"
    size_mb = sum(p.stat().st_size for p in model.rglob("*") if p.is_file()) / 2**20
    assert size_mb < 5 and not list(model.rglob("model.safetensors")), size_mb
    assert json.loads((model / "adapter_config.json").read_text())["base_model_name_or_path"] == "all-MiniLM-L6-v2"
    assert report["selected_step"] is not None and json.loads((tmp_path / "ft" / "artifact_key.json").read_text())[
        "config"]["method"] == "lora"

    def train_ndcg(name: str) -> float:
        r = DenseRetriever(DenseConfig(model=name, max_seq_length=32, embedding_cache="off"))
        r.index(catalog.tool_ids, catalog.docs("original"))
        scores, _ = score_ranking(rank_split(r, catalog, "train", 5), catalog, [5], bootstrap_samples=10)
        return scores["metrics"]["ndcg@5"]

    assert train_ndcg(str(model)) > train_ndcg("all-MiniLM-L6-v2")


def test_a_test_only_dataset_trains_dense_ft_on_the_dataset_trained_on_maps_it_to(fixture_catalog_dir, tmp_path,
                                                                                  monkeypatch):
    """``trained_on: {bench: train_dir}``: dense-ft for a benchmark without a train split trains on the other
    catalog, stores the model under its name, is not k-folded, and never reads the benchmark's queries."""
    import shutil

    from toolret.cli import main

    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(tmp_path))
    bench = tmp_path / "bench"
    shutil.copytree(fixture_catalog_dir, bench)
    (bench / "qrels" / "train.tsv").unlink()  # test-only: its train queries vanish with their qrels
    (tmp_path / "params.yaml").write_text(
        f"finetune: {{epochs: 1, batch_size: 8, max_seq_length: 32, eval_steps: 0}}\n"
        f"trained_on: {{bench: {fixture_catalog_dir}}}\n")
    args = ["--params", str(tmp_path / "params.yaml"), "evaluate", "--dataset", str(bench), "--method", "dense-ft",
            "--k", "5", "--output", str(tmp_path / "r.json")]
    assert main(args) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["n_queries"] == 20  # every test query: not k-folded
    report = json.loads((tmp_path / "data" / "models" / fixture_catalog_dir.name / "dense-ft" / "finetune.json").read_text())
    assert report["n_train_pairs"] > 0
    assert not (tmp_path / "data" / "models" / "bench").exists()


def test_the_same_lora_finetune_twice_gives_the_same_adapter(fixture_catalog_dir, tmp_path):
    """Seeded fine-tuning is reproducible: the LoRA matrices are initialised from ``finetune.seed``, not from the
    process's random state at the time (the trainer seeds itself only after the model exists)."""
    import torch
    from safetensors.torch import load_file

    catalog = carve_dev_split(load_beir(fixture_catalog_dir), 0.2, seed=0)
    config = FinetuneConfig(method="lora", epochs=1, batch_size=8, lr=1e-3, max_seq_length=32, eval_steps=0, lora_r=4)
    weights = []
    for run, noise in enumerate((1, 2)):
        torch.manual_seed(noise)  # a different process state before each run
        finetune(catalog, tmp_path / f"ft{run}", config)
        weights.append(load_file(tmp_path / f"ft{run}" / "model" / "adapter_model.safetensors"))
    assert weights[0].keys() == weights[1].keys() and len(weights[0]) > 0
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_a_full_finetune_resumes_on_another_machine_from_its_committed_checkpoint(fixture_catalog_dir, tmp_path):
    """A full fine-tune exports each checkpoint beside its artifact (git-sized, no optimizer moments); a run
    that has that folder and nothing else (a fresh clone: no work folder) resumes from it and completes."""
    import shutil
    import signal
    import time

    import torch

    from toolret.evaluation import load_run_info
    from toolret.registry import MAX_GIT_FILE_MB
    from toolret.retrieval.committed_checkpoint import MANIFEST, checkpoint_dir

    config = FinetuneConfig(method="full", epochs=2, batch_size=8, lr=3e-4, max_seq_length=32, max_train_pairs=0,
                            eval_steps=7)
    out = tmp_path / "machine-a" / "ft"
    proc = _finetune_process(fixture_catalog_dir, out, config)
    committed = checkpoint_dir(out)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if (committed / MANIFEST).is_file():
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    assert proc.wait() == -signal.SIGKILL, "training ended before its first checkpoint was exported"
    manifest = json.loads((committed / MANIFEST).read_text())
    files = [f for f in committed.rglob("*") if f.is_file()]
    assert max(f.stat().st_size for f in files) <= MAX_GIT_FILE_MB * 2**20
    optimizer = torch.load(committed / manifest["latest"] / "optimizer.pt", weights_only=True)
    assert optimizer["state"] == {} and optimizer["param_groups"], "the moments stay out of git, the groups stay"

    # another machine: only what git carries (the committed checkpoint), no work folder
    other = tmp_path / "machine-b"
    other.mkdir()
    shutil.copytree(committed, checkpoint_dir(other / "ft"))
    catalog = carve_dev_split(load_beir(fixture_catalog_dir), 0.2, seed=0)
    report = finetune(catalog, other / "ft", config)
    info = load_run_info(other / "ft" / "finetune.json")
    assert info["resumed_from"] == manifest["latest"] and info["resumed_from_committed"] is True
    steps_per_epoch = -(-report["n_train_pairs"] // config.batch_size)
    assert report["steps"] == config.epochs * steps_per_epoch
    # the dev history before the resume came with the checkpoint: every scored step is there
    assert report["steps"] % config.eval_steps == 0
    assert [h["step"] for h in report["dev_history"]] == list(range(config.eval_steps, report["steps"] + 1,
                                                                     config.eval_steps))
    assert not checkpoint_dir(other / "ft").exists(), "the committed checkpoint goes once the model is saved"
    assert (other / "ft" / "model" / "model.safetensors.index.json").is_file()


def test_a_committed_checkpoint_of_other_settings_is_not_resumed(tmp_path):
    from toolret.atomic import write_json
    from toolret.retrieval.committed_checkpoint import MANIFEST, import_checkpoint

    src = tmp_path / "ft.checkpoint"
    (src / "checkpoint-8").mkdir(parents=True)
    (src / "checkpoint-8" / "trainer_state.json").write_text("{}")
    write_json(src / MANIFEST, {"format": 1, "work": ".ft.work-aaaaaaaaaaaa", "latest": "checkpoint-8", "step": 8,
                                "checkpoints": ["checkpoint-8"]})
    assert import_checkpoint(src, tmp_path / ".ft.work-bbbbbbbbbbbb") is None
    assert not (tmp_path / ".ft.work-bbbbbbbbbbbb").exists()
    # the right work folder, already further on its own: its own checkpoint wins
    work = tmp_path / ".ft.work-aaaaaaaaaaaa"
    (work / "checkpoint-12").mkdir(parents=True)
    (work / "checkpoint-12" / "trainer_state.json").write_text("{}")
    assert import_checkpoint(src, work) is None
    assert sorted(p.name for p in work.iterdir()) == ["checkpoint-12"]
    # a finished training of other settings leaves it in place; its own training's end removes it
    from toolret.retrieval.committed_checkpoint import discard_checkpoint

    assert not discard_checkpoint(src, tmp_path / ".ft.work-cccccccccccc") and src.is_dir()
    # behind the committed one: imported, the trainer's best-checkpoint path pointed at this work folder
    (work / "checkpoint-12" / "trainer_state.json").unlink()
    (src / "checkpoint-8" / "trainer_state.json").write_text(json.dumps(
        {"best_model_checkpoint": "/elsewhere/.ft.work-aaaaaaaaaaaa/checkpoint-8"}))
    assert import_checkpoint(src, work) == str(work / "checkpoint-8")
    state = json.loads((work / "checkpoint-8" / "trainer_state.json").read_text())
    assert state["best_model_checkpoint"] == str(work / "checkpoint-8")
    assert discard_checkpoint(src, work) and not src.exists()
