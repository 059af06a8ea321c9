"""``toolrerank.method: lora``: the cross-encoder artifact is a small LoRA adapter plus the new head, it names its
base encoder portably, reloads to the very scores it had when trained, and it learns."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolret.errors import CrossEncoderCollapsed
from toolret.methods.toolrerank.crossencoder import load_cross_encoder, score_spread, train_cross_encoder
from toolret.retrieval.models import LoraSettings

pytestmark = pytest.mark.slow

TOPICS = [("weather", "forecast temperature rain for a city"), ("flights", "search airline tickets between airports"),
          ("stocks", "share price quotes of a ticker symbol"), ("recipes", "cooking recipes by ingredient"),
          ("translation", "translate text between languages"), ("music", "song lyrics and artist albums"),
          ("maps", "driving directions and distance between places"), ("news", "latest headlines by topic")]


def _rows():
    rows = []
    for i, (name, doc) in enumerate(TOPICS):
        other = TOPICS[(i + 3) % len(TOPICS)]
        for q in (f"I need {name} information", f"find me {name} data please"):
            rows.append((q, f"{name} API: {doc}", f"{other[0]} API: {other[1]}"))
    return rows


def test_lora_cross_encoder_is_small_reloads_exactly_and_learns(tmp_path):
    rows = _rows()
    lora = LoraSettings(method="lora", lora_r=8)
    report = train_cross_encoder(rows, tmp_path / "ce", base_model="all-MiniLM-L6-v2", max_length=32, epochs=4,
                                 batch_size=4, lr=2e-3, warmup_ratio=0.1, seed=0, loss="in_batch",
                                 in_batch_negatives=2, lora=lora)
    folder = tmp_path / "ce"
    size_mb = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
    assert size_mb < 6 and not list(folder.rglob("model.safetensors")), size_mb
    assert json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"] == "all-MiniLM-L6-v2"
    assert report["steps"] > 0

    model = load_cross_encoder(folder, 32)
    pos = model.predict([(q, p) for q, p, _ in rows])
    neg = model.predict([(q, n) for q, _, n in rows])
    again = load_cross_encoder(folder, 32).predict([(q, p) for q, p, _ in rows])
    np.testing.assert_allclose(pos, again, rtol=1e-5)  # the trained head is in the adapter, not re-drawn
    assert (pos > neg).mean() >= 0.9, (pos, neg)

    # loading folds the adapter into the base weights: the same scores as the adapter kept apart
    from peft.tuners.tuners_utils import BaseTunerLayer

    apart = load_cross_encoder("all-MiniLM-L6-v2", 32, new_head=True)
    apart.load_adapter(str(folder))
    assert not any(m.merged for m in apart.modules() if isinstance(m, BaseTunerLayer))
    assert all(m.merged for m in model.modules() if isinstance(m, BaseTunerLayer))
    np.testing.assert_allclose(apart.predict([(q, p) for q, p, _ in rows]), pos, rtol=1e-4, atol=1e-5)


def test_full_method_trains_no_adapter(tmp_path):
    rows = _rows()[:4]
    train_cross_encoder(rows, tmp_path / "ce", base_model="all-MiniLM-L6-v2", max_length=16, epochs=1, batch_size=4,
                        lr=1e-4, warmup_ratio=0.1, seed=0, loss="in_batch", in_batch_negatives=1,
                        lora=LoraSettings(method="full"))
    assert not (tmp_path / "ce" / "adapter_config.json").exists()
    assert list((tmp_path / "ce").rglob("*.safetensors"))


def test_a_relative_score_cache_lives_in_the_project_not_the_working_directory(tmp_path, monkeypatch):
    """A saved pipeline stores its score cache project-relative (``ce_scores``); loaded and run from another
    working directory it must still write under the project (it once wrote ./ce_scores into the repo)."""
    from toolret.methods.toolrerank.crossencoder import CrossEncoderScorer

    project, elsewhere, model = tmp_path / "project", tmp_path / "elsewhere", tmp_path / "model"
    for d in (project, elsewhere, model):
        d.mkdir()
    (model / "weights.bin").write_bytes(b"not a real model: only its hash is read")
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(project))
    monkeypatch.chdir(elsewhere)
    store = CrossEncoderScorer(model, 64, cache="ce_scores").store
    assert store.folder.parent == project / "ce_scores"


def test_a_training_that_collapses_to_one_score_fails_and_writes_nothing(tmp_path):
    # the failure of a real run (docs/RESULTS.md fifteenth session): at too high a rate the in-batch loss drove every
    # logit into the sigmoid's flat tail, each pair scored 0.9994, the loss sat at ln(candidates) and the reranker
    # was saved and scored as if trained. Here lr 0.05 does the same to the fixture rows (loss at ln 4 from step 9).
    with pytest.raises(CrossEncoderCollapsed, match=r"collapsed.*toolrerank\.lr"):
        train_cross_encoder(_rows(), tmp_path / "ce", base_model="all-MiniLM-L6-v2", max_length=32, epochs=4,
                            batch_size=4, lr=0.05, warmup_ratio=0.1, seed=0, loss="in_batch", in_batch_negatives=2,
                            lora=LoraSettings(method="lora", lora_r=8))
    assert not (tmp_path / "ce").exists()


def test_the_collapse_check_tells_a_saturated_head_from_a_fresh_one():
    import torch

    pairs = [(q, doc) for q, *docs in _rows() for doc in docs]
    model = load_cross_encoder("all-MiniLM-L6-v2", 32, new_head=True)
    assert score_spread(model, pairs) > 1e-3  # an untrained head still orders pairs
    with torch.no_grad():
        model.model.classifier.weight.zero_()
        model.model.classifier.bias.fill_(8.0)  # what the collapsed run's head did: one logit for every pair
    assert score_spread(model, pairs) < 1e-3


# the trainings the kill / resume tests interrupt (3 epochs of 3 steps: checkpoints at steps 3 and 6 before the end)
RESUMED = dict(base_model="all-MiniLM-L6-v2", max_length=32, epochs=3, batch_size=4, lr=2e-3, warmup_ratio=0.1,
               seed=0, loss="in_batch", in_batch_negatives=2)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The model an uninterrupted run of :data:`RESUMED` makes (what both resumed runs must end with)."""
    out = tmp_path_factory.mktemp("reference") / "ref"
    report = train_cross_encoder(_rows(), out, lora=LoraSettings(method="lora", lora_r=8), **RESUMED)
    assert report["resumed_from"] is None
    return out, report


def test_a_killed_training_resumes_from_its_last_checkpoint_to_the_uninterrupted_model(tmp_path, uninterrupted):
    """``checkpoint_dir``: every ``save_steps`` steps the trainer state is written there; after a kill -9 the same call
    resumes from the last complete checkpoint (not from step 0) and ends with the model an uninterrupted run makes;
    the checkpoints are removed once the model is saved. What makes a training longer than a session possible."""
    import signal
    import subprocess
    import sys
    import time

    from toolret.retrieval.committed_checkpoint import last_complete_checkpoint

    kwargs = RESUMED
    work, out = tmp_path / "work", tmp_path / "ce"
    code = ("import sys, ast; from toolret.methods.toolrerank.crossencoder import train_cross_encoder; "
            "from toolret.retrieval.models import LoraSettings; "
            "train_cross_encoder(ast.literal_eval(sys.argv[1]), sys.argv[2], checkpoint_dir=sys.argv[3], save_steps=3, "
            f"lora=LoraSettings(method='lora', lora_r=8), **{kwargs!r})")
    proc = subprocess.Popen([sys.executable, "-c", code, repr(_rows()), str(out), str(work)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if last_complete_checkpoint(work):
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    assert proc.wait() == -signal.SIGKILL, "training ended before its first checkpoint could be interrupted"
    assert not out.exists(), "a killed run must not leave a half-written model"
    checkpoint = last_complete_checkpoint(work)

    lora = LoraSettings(method="lora", lora_r=8)
    report = train_cross_encoder(_rows(), out, checkpoint_dir=work, save_steps=3, lora=lora, **kwargs)
    steps = kwargs["epochs"] * -(-len(_rows()) // kwargs["batch_size"])
    assert report["resumed_from"] == checkpoint.rsplit("/", 1)[1] and report["steps"] == steps
    assert not work.exists()

    reference, ref_report = uninterrupted
    assert ref_report["steps"] == steps
    pairs = [(q, doc) for q, *docs in _rows() for doc in docs]
    np.testing.assert_allclose(load_cross_encoder(out, 32).predict(pairs),
                               load_cross_encoder(reference, 32).predict(pairs), rtol=1e-4, atol=1e-5)


def test_a_training_resumes_on_another_machine_from_its_committed_checkpoint_alone(tmp_path, uninterrupted):
    """``committed``: each checkpoint is exported as the trainer wrote it (adapter, head, optimizer moments: a few MB
    for git); machine B has that folder and no work folder, resumes from it, and ends with the model an
    uninterrupted run makes; the folder is removed once the model is saved. A checkpoint of another training
    (other key: settings or data) is not resumed."""
    import shutil
    import signal
    import subprocess
    import sys
    import time

    from toolret.retrieval.committed_checkpoint import _manifest

    kwargs = RESUMED
    work, committed = tmp_path / "a" / "work", tmp_path / "git" / "ce.checkpoint"
    code = ("import sys, ast; from toolret.methods.toolrerank.crossencoder import train_cross_encoder; "
            "from toolret.retrieval.models import LoraSettings; "
            "train_cross_encoder(ast.literal_eval(sys.argv[1]), sys.argv[2], checkpoint_dir=sys.argv[3], save_steps=3, "
            f"committed=sys.argv[4], key='k1', lora=LoraSettings(method='lora', lora_r=8), **{kwargs!r})")
    proc = subprocess.Popen([sys.executable, "-c", code, repr(_rows()), str(tmp_path / "a" / "ce"), str(work),
                             str(committed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if (committed / "progress.json").is_file():
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    assert proc.wait() == -signal.SIGKILL, "training ended before its first export could be interrupted"
    manifest = _manifest(committed)
    assert manifest["key"] == "k1" and manifest["optimizer_moments"] == "kept" and manifest["step"] >= 3
    assert (committed / manifest["latest"] / "optimizer.pt").is_file()
    adapter = json.loads((committed / manifest["latest"] / "adapter_config.json").read_text(encoding="utf-8"))
    assert adapter["base_model_name_or_path"] == "all-MiniLM-L6-v2"  # portable: no path of machine A

    lora = LoraSettings(method="lora", lora_r=8)
    other = tmp_path / "b" / "other"  # another training's (key k2) never resumes from it
    report = train_cross_encoder(_rows(), other, checkpoint_dir=tmp_path / "b" / "w2", save_steps=100,
                                 committed=committed, key="k2", lora=lora, **{**kwargs, "epochs": 1})
    assert report["resumed_from"] is None and committed.is_dir()

    out = tmp_path / "b" / "ce"  # machine B: the committed folder only
    report = train_cross_encoder(_rows(), out, checkpoint_dir=tmp_path / "b" / "work", save_steps=3,
                                 committed=committed, key="k1", lora=lora, **kwargs)
    steps = kwargs["epochs"] * -(-len(_rows()) // kwargs["batch_size"])
    assert report["resumed_from"] == manifest["latest"] and report["steps"] == steps
    assert not committed.exists() and not (tmp_path / "b" / "work").exists()

    reference, ref_report = uninterrupted
    assert ref_report["steps"] == steps
    pairs = [(q, doc) for q, *docs in _rows() for doc in docs]
    np.testing.assert_allclose(load_cross_encoder(out, 32).predict(pairs),
                               load_cross_encoder(reference, 32).predict(pairs), rtol=1e-4, atol=1e-5)
    shutil.rmtree(tmp_path / "a", ignore_errors=True)
