"""``toolret evaluate --method toolrerank`` from nothing on the fixture catalog: the artifact is trained
(cross-encoder, classifier, seen APIs, dev-selected setting), the pipeline ranks, saves and loads."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from toolret.cli import main

pytestmark = pytest.mark.slow

SMALL = {
    "catalog": {"dev_fraction": 0.25, "seed": 13},
    "dense": {"embedding_cache": "off"},
    "toolrerank": {"max_length": 32, "train_queries": 12, "hard_negatives": 2, "hard_negative_depth": 5,
                   "random_negatives": 1, "batch_size": 16, "lr": 1e-4, "candidates": 6,
                   "grid": {"m_s": [3, 6], "m_u": [3, 6], "tau_s": [0.6, 0.9], "tau_m": [0.7], "n": [2, 3],
                            "ce_weight": [1.0, 0.5, 0.0]}},
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One training run shared by the tests of this module (the expensive part)."""
    from make_fixture import write_fixture_catalog

    root = tmp_path_factory.mktemp("toolrerank")
    catalog_dir = write_fixture_catalog(root / "fixture_catalog", n_test=10)
    params = root / "params.yaml"
    small = {**SMALL, "toolrerank": {**SMALL["toolrerank"], "score_cache": str(root / "ce_scores")}}
    params.write_text(yaml.safe_dump(small), encoding="utf-8")
    mp = pytest.MonkeyPatch()
    mp.setenv("TOOLRET_PROJECT_DIR", str(root))
    out = root / "r.json"
    assert main(["--params", str(params), "evaluate", "--dataset", str(catalog_dir), "--method", "toolrerank",
                 "--output", str(out)]) == 0
    yield {"root": root, "catalog": catalog_dir, "params": params, "result": json.loads(out.read_text()),
           "artifact": root / "data" / "models" / "fixture_catalog" / "toolrerank", "mp": mp}
    mp.undo()


def _train_gold_apis(catalog_dir: Path, train: set[str]) -> set[tuple[str, str]]:
    """(tool, API) of every gold API of the ``train`` query ids, from the raw files."""
    meta = {}
    for line in (catalog_dir / "corpus.jsonl").read_text().splitlines():
        row = json.loads(line)
        # the BEIR loader names an API by its title, else its id (the fixture's titles are empty)
        meta[row["_id"]] = (row["metadata"]["tool_name"].casefold(), (row["title"] or row["_id"]).casefold())
    with open(catalog_dir / "qrels" / "train.tsv") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return {meta[r["corpus-id"]] for r in rows if r["query-id"] in train}


def test_artifact_is_trained_with_its_selection_recorded(trained):
    art = trained["artifact"]
    assert (art / "model" / "config.json").is_file() and (art / "classifier.json").is_file()
    report = json.loads((art / "toolrerank.json").read_text())
    sel = report["selected"]
    assert sel["m_s"] in (3, 6) and sel["m_u"] in (3, 6) and sel["tau_s"] in (0.6, 0.9) and sel["n"] in (2, 3)
    assert report["n_dev_queries"] == 10 and report["n_train_split"] == 30  # 40 train -> 30 + 10 dev
    assert report["n_train_queries"] == 12
    assert report["cross_encoder"]["n_positive"] > 0
    # seen = the gold APIs of the training queries (dev queries excluded), identified by (tool, API) names
    from toolret.catalog.datasets import load_dataset

    cat = load_dataset(str(trained["catalog"]), dev_fraction=0.25, seed=13)
    from toolret.methods.toolrerank.training import sample_queries

    train = {q.id for q in sample_queries(cat.split("train"), 12, 13)}  # the 12 sampled training queries
    seen = {tuple(a) for a in json.loads((art / "seen.json").read_text())["apis"]}
    assert seen == _train_gold_apis(trained["catalog"], train)
    assert len(seen) < 30  # 12 queries do not cover the 30 APIs: some are unseen


def test_evaluation_result(trained):
    r = trained["result"]
    assert r["n_queries"] == 10 and r["method"] == "toolrerank"
    assert 0.0 <= r["metrics"]["recall@5"] <= 1.0
    stats = r["components"]["toolrerank-ce"]
    assert stats["queries"] >= 10 and stats["cross_encoder"]["pairs_scored"] > 0
    assert stats["setting"]["m_s"] in (3, 6)


def test_saved_pipeline_ranks_like_the_built_one_and_rerank_m_reorders_only_the_top_m(trained):
    from toolret.catalog.datasets import load_dataset
    from toolret.config import load_params
    from toolret.pipeline import Pipeline, build_pipeline
    from toolret.roles import Corpus

    params = load_params(trained["params"])
    cat = load_dataset(str(trained["catalog"]), dev_fraction=0.25, seed=13)
    texts = [q.text for q in cat.split("test")][:6]  # scores of these pairs are in the score cache already
    built = build_pipeline("toolrerank", cat, params)
    built.index(Corpus.from_catalog(cat))
    a = built.search(texts, k=5)
    assert a.indices.shape == (6, 5)
    assert built.rerankers[0].stats["cross_encoder"]["pairs_scored"] == 0  # all from the persistent cache
    built.save(trained["root"] / "saved")
    b = Pipeline.load(trained["root"] / "saved").search(texts, k=5)
    assert np.array_equal(a.indices, b.indices)

    r10 = build_pipeline("rerank-10", cat, params)
    r10.index(Corpus.from_catalog(cat))
    base = r10.retriever.search(texts, k=12)  # its first stage alone
    out = r10.search(texts, k=12)
    for row in range(6):  # the top 10 are the first stage's top 10 in another order; 11 and 12 stay put
        assert sorted(out.indices[row, :10].tolist()) == sorted(base.indices[row, :10].tolist())
        assert out.indices[row, 10:].tolist() == base.indices[row, 10:].tolist()


def test_ce_weight_fuses_the_reranked_order_with_the_first_stage(trained):
    """``toolrerank.ce_weight``: 1 is the reranked order, 0 the first stage's, between them weighted RRF."""
    from toolret.catalog.datasets import load_dataset
    from toolret.config import apply_overrides, load_params
    from toolret.pipeline import build_pipeline
    from toolret.retrieval.fusion import weighted_rrf
    from toolret.roles import Corpus

    params = load_params(trained["params"])
    cat = load_dataset(str(trained["catalog"]), dev_fraction=0.25, seed=13)
    texts = [q.text for q in cat.split("test")][:6]

    def run(weight):
        p = build_pipeline("rerank-10", cat, apply_overrides(params, {"toolrerank.ce_weight": weight}))
        p.index(Corpus.from_catalog(cat))
        return p, p.search(texts, k=10)

    p1, pure = run(1.0)
    first = p1.retriever.search(texts, k=10)
    _, none = run(0.0)
    _, half = run(0.4)
    assert none.indices.tolist() == first.indices.tolist()
    assert pure.indices.tolist() != first.indices.tolist()  # the cross-encoder reorders something
    expected = weighted_rrf([pure, first], [0.4, 0.6], 10)
    assert half.indices.tolist() == expected.indices.tolist()


def test_unset_ce_weight_is_the_artifacts_dev_selected_one(trained):
    """The training report records the dev metric of every grid.ce_weight and selects the best; a run with
    ``toolrerank.ce_weight`` unset ranks exactly as one given that weight."""
    from toolret.catalog.datasets import load_dataset
    from toolret.config import apply_overrides, load_params
    from toolret.pipeline import build_pipeline
    from toolret.roles import Corpus

    report = json.loads((trained["artifact"] / "toolrerank.json").read_text())
    table = report["grid"]["ce_weight"]["by_weight"]
    assert [row["ce_weight"] for row in table] == [1.0, 0.5, 0.0]
    best = max(row["recall@5"] for row in table)
    chosen = report["selected"]["ce_weight"]
    assert next(row["recall@5"] for row in table if row["ce_weight"] == chosen) == best
    params = load_params(trained["params"])
    cat = load_dataset(str(trained["catalog"]), dev_fraction=0.25, seed=13)
    texts = [q.text for q in cat.split("test")][:6]

    def run(overrides):
        p = build_pipeline("toolrerank", cat, apply_overrides(params, overrides))
        p.index(Corpus.from_catalog(cat))
        return p.search(texts, k=10).indices.tolist()

    assert params.toolrerank.ce_weight is None
    assert run({}) == run({"toolrerank.ce_weight": chosen})


def test_a_missing_artifact_without_trainer_is_a_clear_error(trained, tmp_path):
    from toolret.errors import CatalogError
    from toolret.config import load_params
    from toolret.methods.toolrerank.components import ToolRerankReranker

    cfg = load_params(trained["params"]).toolrerank.component_config()
    r = ToolRerankReranker(cfg, tmp_path / "nothing")
    with pytest.raises(CatalogError, match="not a trained ToolRerank artifact"):
        r.fit(None)


def test_separation_diagnostic_scores_gold_hard_and_random_dev_pairs(trained, capsys):
    from toolret.catalog.datasets import load_dataset
    from toolret.methods.toolrerank.training import sample_queries

    cat = load_dataset(str(trained["catalog"]), dev_fraction=0.25, seed=13)
    dev = sample_queries(cat.split("dev"), 6, 1)
    capsys.readouterr()
    assert main(["--params", str(trained["params"]), "reranker-separation", "--dataset", str(trained["catalog"]),
                 "--artifact", str(trained["artifact"]), "--queries", "6", "--seed", "1"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # 30 APIs, first-stage depth 30: every dev query has >= 3 hard and >= 3 random non-gold APIs
    assert out["n_pairs"] == {"gold": sum(len(cat.gold(q.id)) for q in dev), "hard": 18, "random": 18}
    for auc in (*out["cross_encoder"]["auc"].values(), *out["dense_cosine"]["auc"].values()):
        assert 0.0 <= auc <= 1.0


def test_grid_command_reselects_on_any_split_and_reproduces_the_artifacts_own_dev_selection(trained, capsys):
    """``toolrerank-grid`` on the artifact's own dev queries (all 10: dev_queries 200 > 10) selects what training
    selected; on another split it selects on those queries (routed by the artifact's classifier)."""
    report = json.loads((trained["artifact"] / "toolrerank.json").read_text())
    runs = {}
    for split in ("dev", "test"):
        capsys.readouterr()
        assert main(["--params", str(trained["params"]), "toolrerank-grid", "--dataset", str(trained["catalog"]),
                     "--artifact", str(trained["artifact"]), "--split", split, "--queries", "0"]) == 0
        runs[split] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    dev, test = runs["dev"], runs["test"]
    assert dev["selected"] == report["selected"] and dev["artifact_selected"] == report["selected"]
    assert dev["dev_recall@5"] == pytest.approx(report["grid"]["dev_recall@5"])
    assert dev["dev_baselines"] == pytest.approx(report["grid"]["dev_baselines"])
    assert test["n_queries"] == 10 and sum(test["modes"].values()) == 10 and test["split"] == "test"
    assert test["selected"]["m_s"] in (3, 6) and test["selected"]["ce_weight"] in (1.0, 0.5, 0.0)
    assert [row["ce_weight"] for row in test["ce_weight"]["by_weight"]] == [1.0, 0.5, 0.0]


def test_report_from_an_evaluation_grid_names_the_artifact_and_its_numbers(trained):
    """``report-ablations --method toolrerank`` on a grid over the fixture: the header carries the artifact's
    training record (regression: it read a key the trainer no longer writes and crashed) and the main table
    the grid's Recall@5."""
    root = trained["root"]
    small = yaml.safe_load(trained["params"].read_text())
    small["source"] = {"beir": {"fixture_catalog": str(trained["catalog"])}}
    small["toolrerank"]["train_dataset"] = "fixture_catalog"
    small["toolrerank"]["ablations"] = {"bm25": {"method": "bm25"}, "dense": {"method": "dense"},
                                        "toolrerank": {"method": "toolrerank", "baseline": "bm25"}}
    params = root / "params_report.yaml"
    params.write_text(yaml.safe_dump(small), encoding="utf-8")
    runs = root / "runs"
    assert main(["--params", str(params), "evaluate-grid", "--catalog", str(trained["catalog"]), "--grid",
                 "toolrerank.ablations", "--out", str(runs / "fixture_catalog" / "toolrerank-ablations")]) == 0
    out = root / "toolrerank_results.md"
    assert main(["--params", str(params), "report-ablations", "--method", "toolrerank", "--runs", str(runs),
                 "--datasets", "fixture_catalog", "--out", str(out)]) == 0
    text = out.read_text()
    record = json.loads((trained["artifact"] / "toolrerank.json").read_text())
    assert f"{record['cross_encoder']['n_examples']} training rows ({record['cross_encoder']['loss']} loss)" in text
    summary = json.loads((runs / "fixture_catalog" / "toolrerank-ablations" / "summary.json").read_text())
    main_row = next(line for line in text.splitlines() if line.startswith("| **ToolRerank** |"))
    variants = summary["variants"]["toolrerank"]["metrics"]
    assert f"{100 * variants['recall@5']:.1f}" in main_row


def test_a_trained_artifact_is_refused_after_its_training_params_or_first_stage_change(trained, tmp_path, capsys):
    """Artifacts know their inputs: another lr or another first stage is never served by the old artifact."""
    before = (trained["artifact"] / "toolrerank.json").stat().st_mtime_ns
    for override, named in (("toolrerank.lr=0.001", r"config\.lr: 0\.0001 -> 0\.001"),
                            ("dense.max_seq_length=128", "first_stage:")):
        out = tmp_path / "r.json"
        code = main(["--params", str(trained["params"]), "evaluate", "--dataset", str(trained["catalog"]),
                     "--method", "toolrerank", "--set", override, "--output", str(out)])
        assert code == 2 and not out.exists(), override
        assert re.search(named, capsys.readouterr().err), override
    from toolret.artifact_key import differences, read_key
    from toolret.config import load_params
    from toolret.methods.toolrerank.training import artifact_key

    params = load_params(trained["params"], ["toolrerank.lr=0.001"])
    diff = differences(read_key(trained["artifact"]), artifact_key(params.toolrerank.component_config(), params,
                                                                    "fixture_catalog"))
    assert any(d.startswith("config.lr") for d in diff) and len(diff) == 1, diff
    assert (trained["artifact"] / "toolrerank.json").stat().st_mtime_ns == before  # never retrained in place


class _SplitRewriter:
    """A rewriter written for the test: each query -> its ' and '-separated parts (fuse: the first part's
    ranking), so a pipeline with it hands the reranker several texts per query."""

    name = "test-split"

    def fit(self, catalog) -> None:
        pass

    def rewrite(self, queries):
        return [[p.strip() for p in q.split(" and ") if p.strip()] or [q] for q in queries]

    def fuse(self, groups, ranking, k, query_ids):
        from toolret.roles import Ranking

        rows = np.cumsum([0] + [len(g) for g in groups[:-1]])
        return Ranking(list(query_ids), ranking.tool_ids, ranking.indices[rows, :k], ranking.scores[rows, :k])


def test_score_views_rewrites_scores_each_api_by_its_best_matching_rewrite(trained):
    """``toolrerank.score_views: rewrites``: Rerank-m's order of the top m is the order of max(CE(query, api),
    CE(rewrite, api)) over the rewriter's rewrites, computed here from the cross-encoder directly; with
    ``query`` (the paper) the rewrites are not read."""
    from toolret.catalog.datasets import load_dataset
    from toolret.config import apply_overrides, load_params
    from toolret.methods.toolrerank.crossencoder import CrossEncoderScorer
    from toolret.pipeline import Pipeline, build_pipeline
    from toolret.roles import Corpus

    params = load_params(trained["params"])
    cat = load_dataset(str(trained["catalog"]), dev_fraction=0.25, seed=13)
    tests = [q.text for q in cat.split("test")]
    texts = [f"{a} and {b}" for a, b in zip(tests[:5], tests[5:10])]  # two requests in one query
    corpus = Corpus.from_catalog(cat)

    def run(views):
        built = build_pipeline("rerank-10", cat, apply_overrides(params, {"toolrerank.score_views": views,
                                                                         "toolrerank.ce_weight": 1.0}))
        p = Pipeline(built.retriever, _SplitRewriter(), built.rerankers)
        p.index(corpus)
        return p, p.search(texts, k=10)

    p, multi = run("rewrites")
    _, plain = run("query")
    assert p.rerankers[0].reads_rewrites
    first = p._first_stage(texts, 10, [str(i) for i in range(5)])[0]
    cfg = params.toolrerank
    scorer = CrossEncoderScorer(trained["artifact"] / "model", cfg.max_length, 8, "cpu", "off")
    docs = dict(zip(corpus.tool_ids, corpus.documents))
    for row, q in enumerate(texts):
        top = [first.tool_ids[i] for i in first.indices[row, :10] if i >= 0]
        views = [q, *_SplitRewriter().rewrite([q])[0]]
        best = np.max([scorer.score_pairs([(v, docs[t]) for t in top]) for v in views], axis=0)
        plain_scores = scorer.score_pairs([(q, docs[t]) for t in top])
        for ranking, scores in ((multi, best), (plain, plain_scores)):
            # the order of these scores; near-ties may swap (another batch composition pads differently, 1e-6)
            got = [ranking.tool_ids[i] for i in ranking.indices[row, :len(top)]]
            score = dict(zip(top, np.asarray(scores, dtype=float)))
            assert sorted(got) == sorted(top)
            assert all(score[a] >= score[b] - 1e-4 for a, b in zip(got, got[1:])), (got, score)
    assert multi.indices.tolist() != plain.indices.tolist()  # the rewrites changed some order


def test_an_artifact_trained_on_a_catalog_folder_is_the_one_its_evaluation_accepts(trained, tmp_path):
    """`toolrerank.train_dataset` naming a catalog folder (an ablation's `data/curated/ablations/x`): `fit` writes
    the artifact to `data/models/ablations/x/toolrerank` recording the training data as the setting names it, so an
    evaluation with the same setting reads it instead of refusing it as trained on other inputs."""
    from toolret.paths import model_dir

    folder = trained["root"] / "data" / "curated" / "ablations" / "fixture-copy"
    assert main(["--params", str(trained["params"]), "catalog", "build", "--dataset", str(trained["catalog"]),
                 "--out", str(folder)]) == 0
    artifact = model_dir(folder, "toolrerank")
    assert artifact == trained["root"] / "data" / "models" / "ablations" / "fixture-copy" / "toolrerank"
    setting = f"toolrerank.train_dataset={folder}"
    assert main(["--params", str(trained["params"]), "fit", "--component", "toolrerank-ce", "--catalog", str(folder),
                 "--out", str(artifact), "--set", setting]) == 0
    out = tmp_path / "r.json"
    assert main(["--params", str(trained["params"]), "evaluate", "--dataset", str(trained["catalog"]), "--method",
                 "toolrerank", "--set", setting, "--output", str(out)]) == 0
    assert json.loads(out.read_text())["n_queries"] == trained["result"]["n_queries"]


def test_a_mixed_in_catalog_adds_its_training_rows_and_seen_apis_and_keys_the_artifact(trained, tmp_path, capsys):
    """`toolrerank.mix_datasets`: the sampled train queries of another catalog (own corpus, own first stage) are
    added to the cross-encoder's training rows and their gold APIs to the seen set; the artifact's key names the mix,
    so an evaluation without it refuses the mixed artifact, and the unmixed key has no mix fields (older artifacts)."""
    from make_fixture import write_fixture_catalog

    from toolret.artifact_key import read_key
    from toolret.catalog.datasets import load_dataset
    from toolret.methods.toolrerank.training import sample_queries

    raw = write_fixture_catalog(tmp_path / "other_catalog", n_tools=40, n_train=24, n_test=4, seed=5)
    other, primary = tmp_path / "curated" / "other_catalog", tmp_path / "curated" / "fixture_catalog"
    for source, folder in ((raw, other), (trained["catalog"], primary)):
        assert main(["--params", str(trained["params"]), "catalog", "build", "--dataset", str(source),
                     "--out", str(folder)]) == 0
    mixed = tmp_path / "mixed" / "toolrerank"
    settings = ["--set", f"toolrerank.mix_datasets=[{other}]", "--set", "toolrerank.mix_queries=8"]
    assert main(["--params", str(trained["params"]), "fit", "--component", "toolrerank-ce", "--catalog",
                 str(primary), "--out", str(mixed), "--set", "toolrerank.train_dataset=fixture_catalog",
                 *settings]) == 0
    report = json.loads((mixed / "toolrerank.json").read_text())
    base = json.loads((trained["artifact"] / "toolrerank.json").read_text())
    cat = load_dataset(str(raw), dev_fraction=0.25, seed=13)
    sampled = sample_queries(cat.split("train"), 8, 13)
    assert report["mixed"] == {cat.name: 8} and base["mixed"] == {}
    # one row per (query, gold API): the primary rows are the unmixed artifact's, plus the mixed queries' gold APIs
    n_gold = sum(len(cat.gold(q.id)) for q in sampled)
    assert report["cross_encoder"]["n_examples"] - base["cross_encoder"]["n_examples"] == n_gold
    seen = {tuple(a) for a in json.loads((mixed / "seen.json").read_text())["apis"]}
    base_seen = {tuple(a) for a in json.loads((trained["artifact"] / "seen.json").read_text())["apis"]}
    assert seen == base_seen | _train_gold_apis(raw, {q.id for q in sampled})
    assert read_key(mixed)["config"]["mix_datasets"] == [str(other)]
    assert "mix_datasets" not in read_key(trained["artifact"])["config"]
    out = tmp_path / "r.json"
    assert main(["--params", str(trained["params"]), "evaluate", "--dataset", str(trained["catalog"]), "--method",
                 "toolrerank", "--model", str(mixed), "--output", str(out)]) == 2
    assert "mix_datasets" in capsys.readouterr().err and not out.exists()
    # a grid row reaches it with the settings it was trained with and `toolrerank.artifact` naming where it is
    assert main(["--params", str(trained["params"]), "evaluate", "--dataset", str(trained["catalog"]), "--method",
                 "toolrerank", *settings, "--set", f"toolrerank.artifact={mixed}", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["n_queries"] == trained["result"]["n_queries"]
