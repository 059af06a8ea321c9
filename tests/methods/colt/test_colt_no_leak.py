"""No dev / test edge enters any COLT graph: graphs come from train qrels alone, and changing anything of
the test split (its gold sets, its texts) changes neither the graphs nor the learned model."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from toolret.catalog.model import Query
from toolret.errors import CatalogError
from toolret.methods.colt.graphs import build_train_graphs

pytestmark = pytest.mark.slow


def _pairs(matrix, rows, cols):
    m = matrix.tocoo()
    return {(rows[i], cols[j]) for i, j in zip(m.row, m.col)}


def _perturbed(catalog):
    """The same catalog with every test query's gold set and text changed, and a new test query whose
    gold set is a bundle no train query has."""
    other = copy.deepcopy(catalog)
    tools = other.tool_ids
    for i, q in enumerate(other.split("test")):
        q.text = f"completely different request number {i}"
        other.qrels[q.id] = {tools[(3 * i) % len(tools)]: 1, tools[(3 * i + 7) % len(tools)]: 1}
    other.queries.append(Query("q-new-test", "a bundle never seen in training", "test"))
    other.qrels["q-new-test"] = {tools[0]: 1, tools[1]: 1, tools[2]: 1, tools[29]: 1}
    return other


def test_graphs_hold_train_edges_only(colt_project):
    _, catalog, _, _ = colt_project
    g = build_train_graphs(catalog)
    train = [q.id for q in catalog.split("train")]
    held_out = {q.id for q in catalog.queries if q.split in ("dev", "test")}
    assert g.query_ids == train and not held_out & set(g.query_ids)
    assert catalog.split("dev") and catalog.split("test")  # there was something to leak
    # Q-T edges are exactly the train qrels
    expected = {(q, t) for q in train for t in catalog.gold(q)}
    assert _pairs(g.qt, g.query_ids, g.tool_ids) == expected
    # scenes are exactly the distinct train gold sets; Q-S links each train query to its own; S-T is the set
    train_sets = {tuple(sorted(catalog.gold(q))) for q in train}
    assert {tuple(g.tool_ids[t] for t in s) for s in g.scenes} == train_sets
    for row, q in enumerate(g.query_ids):
        (scene,) = g.qs.getrow(row).indices
        assert tuple(g.tool_ids[t] for t in g.scenes[scene]) == tuple(sorted(catalog.gold(q)))
    assert g.st.nnz == sum(len(s) for s in train_sets)


def test_test_split_changes_nothing_in_the_graphs(colt_project):
    _, catalog, _, _ = colt_project
    a, b = build_train_graphs(catalog), build_train_graphs(_perturbed(catalog))
    assert a.query_ids == b.query_ids and a.scenes == b.scenes
    for m in ("qt", "qs", "st"):
        assert (getattr(a, m) != getattr(b, m)).nnz == 0


def test_test_split_changes_nothing_in_the_learned_model(colt_project, tmp_path):
    """Trained twice (real frozen MiniLM, same seed): once with the test split perturbed -- identical model."""
    from toolret.pipeline import build_pipeline

    _, catalog, _, params = colt_project
    models = []
    for i, cat in enumerate((catalog, _perturbed(catalog))):
        p = build_pipeline("colt", cat, params, model=str(tmp_path / f"colt{i}"))
        p.fit(cat)
        models.append(np.load(tmp_path / f"colt{i}" / "tools.npy"))
    np.testing.assert_array_equal(models[0], models[1])
    # the whole artifact is deterministic (timings live in the run-info sidecar): same bytes
    assert (tmp_path / "colt0" / "colt.json").read_bytes() == (tmp_path / "colt1" / "colt.json").read_bytes()


def test_a_query_at_search_time_is_an_isolated_node(colt_project, tmp_path):
    """A test query's representation is its semantic embedding: score = 2 cos(e_q, t) in both views."""
    from toolret.pipeline import build_pipeline
    from toolret.roles import Corpus

    _, catalog, _, params = colt_project
    pipe = build_pipeline("colt", catalog, params, model=str(tmp_path / "colt"))
    pipe.fit(catalog)
    pipe.index(Corpus.from_catalog(catalog))
    texts = [q.text for q in catalog.split("test")]
    ranking = pipe.search(texts, k=5)
    tools = np.load(tmp_path / "colt" / "tools.npy")
    tools = tools / np.linalg.norm(tools, axis=1, keepdims=True)
    emb = pipe.retriever.encoder.encode(texts)
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    expected = 2 * emb @ tools.T
    for row in range(len(texts)):
        np.testing.assert_allclose(ranking.scores[row], expected[row, ranking.indices[row]], atol=1e-5)
        assert list(ranking.indices[row]) == list(np.argsort(-expected[row], kind="stable")[:5])
    # and the learned tools are not the semantic tool embeddings (the collaborative stage did something)
    sem = pipe.retriever.encoder.encode(catalog.docs("original"))
    assert not np.allclose(tools, sem / np.linalg.norm(sem, axis=1, keepdims=True), atol=1e-3)


def test_no_train_split_is_a_clear_error(colt_project):
    _, catalog, _, _ = colt_project
    other = copy.deepcopy(catalog)
    for q in other.queries:
        if q.split == "train":
            q.split = "test"
    with pytest.raises(CatalogError, match="no judged queries in split 'train'"):
        build_train_graphs(other)
