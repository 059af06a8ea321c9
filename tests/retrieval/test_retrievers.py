"""BM25 and dense retrievers: same rankings as the raw libraries, save/load round trip, protocol."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.roles import Retriever
from toolret.retrieval.bm25 import BM25Retriever

DOCS = [
    "Get the current weather forecast for a city: temperature, wind and rain.",
    "Search movies by title and return release dates and ratings.",
    "Convert an amount of money between two currencies using live exchange rates.",
    "Find recipes that use a given ingredient, with cooking time.",
    "Translate text from one language into another language.",
    "Look up stock prices and market capitalisation of a company.",
]
IDS = [f"t{i}" for i in range(len(DOCS))]
QUERIES = ["will it rain in Paris tomorrow", "search movies by title", "convert 100 dollars to euros",
           "recipes with salmon as ingredient", "say hello in Japanese", "Apple share price"]


def test_bm25_matches_raw_bm25s_and_finds_obvious_tools(tmp_path):
    import bm25s

    r = BM25Retriever()
    assert isinstance(r, Retriever)
    r.index(IDS, DOCS)
    ranking = r.search(QUERIES, k=3, query_ids=[f"q{i}" for i in range(len(QUERIES))])
    raw = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    raw.index(bm25s.tokenize(DOCS, stopwords="en", show_progress=False), show_progress=False)
    idx, scores = raw.retrieve(bm25s.tokenize(QUERIES, stopwords="en", show_progress=False), k=3, show_progress=False)
    matched = scores > 0  # the raw library pads with zero-score documents; toolret leaves those out (-1)
    np.testing.assert_allclose(ranking.scores[matched], scores[matched], rtol=1e-6)
    np.testing.assert_array_equal(ranking.indices[matched], idx[matched])
    assert (ranking.indices[~matched] == -1).all() and (~matched).any()
    top1 = [ranking.ranked_ids(i)[0] for i in range(4)]
    assert top1 == ["t0", "t1", "t2", "t3"]
    r.save(tmp_path / "bm25")
    again = BM25Retriever.load(tmp_path / "bm25").search(QUERIES, k=3)
    np.testing.assert_array_equal(again.indices, ranking.indices)


@pytest.fixture(scope="module")
def encoder():
    from toolret.retrieval.models import load_sentence_transformer

    return load_sentence_transformer("all-MiniLM-L6-v2")


def test_dense_matches_sentence_transformers_cosine(encoder, tmp_path):
    from toolret.retrieval.dense import DenseRetriever

    r = DenseRetriever(encoder=encoder)
    r.index(IDS, DOCS)
    ranking = r.search(QUERIES, k=len(DOCS))
    d = encoder.encode(DOCS, normalize_embeddings=True)
    q = encoder.encode(QUERIES, normalize_embeddings=True)
    sim = q @ d.T
    np.testing.assert_array_equal(ranking.indices, np.argsort(-sim, axis=1, kind="stable"))
    np.testing.assert_allclose(ranking.scores, -np.sort(-sim, axis=1), atol=1e-5)
    assert [ranking.ranked_ids(i)[0] for i in range(6)] == IDS
    r.save(tmp_path / "dense")
    loaded = DenseRetriever.load(tmp_path / "dense", encoder=encoder)
    np.testing.assert_array_equal(loaded.search(QUERIES, k=3).indices, ranking.indices[:, :3])


def test_ranking_run_has_scores_per_tool():
    r = BM25Retriever()
    r.index(IDS, DOCS)
    run = r.search(["weather and movies"], k=3, query_ids=["q"]).as_run()
    assert list(run) == ["q"] and set(run["q"]) == {"t0", "t1"} and all(s > 0 for s in run["q"].values())


def test_bm25_never_ranks_documents_that_share_no_term_with_the_query():
    r = BM25Retriever()
    r.index(["w", "m", "b"], ["weather forecast for a city", "movie search by title", "book a hotel room"])
    ranking = r.search(["weather tomorrow", "quantum chromodynamics", "the of and"], k=3)
    assert ranking.ranked_ids(0) == ["w"]  # the two zero-score documents are not results
    assert ranking.ranked_ids(1) == [] and ranking.ranked_ids(2) == []  # no match / only stopwords
    assert ranking.as_run()["1"] == {}


def test_a_saved_pipeline_over_a_project_model_survives_moving_the_project(tmp_path, monkeypatch):
    """Saved indexes name project files project-relative: a copied (or re-cloned) data/ still loads."""
    import json
    import shutil

    from toolret.retrieval.dense import DenseConfig, DenseRetriever
    from toolret.retrieval.models import resolve_encoder

    old = tmp_path / "old"
    model = old / "data" / "models" / "fixture" / "dense-ft" / "model"
    model.parent.mkdir(parents=True)
    model.symlink_to(resolve_encoder("all-MiniLM-L6-v2"), target_is_directory=True)
    (old / "params.yaml").write_text("{}\n")
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(old))
    r = DenseRetriever(DenseConfig(model=str(model), embedding_cache="off"))
    r.index(IDS, DOCS)
    r.save(old / "data" / "indexes" / "dense-ft")
    meta = json.loads((old / "data" / "indexes" / "dense-ft" / "component.json").read_text())
    assert meta["config"]["model"] == "data/models/fixture/dense-ft/model"  # no absolute path of the checkout
    new = tmp_path / "new"
    shutil.copytree(old, new, symlinks=True)
    shutil.rmtree(old)
    monkeypatch.setenv("TOOLRET_PROJECT_DIR", str(new))
    loaded = DenseRetriever.load(new / "data" / "indexes" / "dense-ft")
    assert loaded.search(QUERIES, k=1).ranked_ids(1) == ["t1"]
