"""The fused candidate ``hybrid-exp-ft`` (BM25 over expanded documents + the LoRA-trained encoder): built,
trained, saved and loaded back as the served champion would be, on the fixture catalog."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_hybrid_exp_ft_fuses_the_expanded_bm25_with_the_trained_encoder(tmp_path: Path) -> None:
    from make_fixture import write_fixture_catalog

    from toolret.adapt.candidates import candidates
    from toolret.catalog.io import load_catalog
    from toolret.config import load_params
    from toolret.pipeline import Pipeline
    from toolret.roles import Corpus

    catalog = load_catalog(write_fixture_catalog(tmp_path / "fixture", n_tools=30, n_train=40, n_test=20, seed=0))
    per_tool = [[q.text for q in catalog.split("train") if catalog.gold(q.id) == {t.id}][:2] for t in catalog.tools]
    pool = {c.name: c for c in candidates(catalog, load_params(), tmp_path / "work", "fast", 2,
                                          {"epochs": 1, "max_train_pairs": 32})}
    cand = pool["hybrid-exp-ft"]
    assert cand.kind == "expansion"  # rebuilt with every request for the served index
    pipe = cand.build(per_tool)
    pipe.fit(catalog)
    pipe.index(Corpus.from_catalog(catalog))
    lexical, semantic = pipe.retriever.sides
    # one copy per request (a tool without any keeps its document), so more copies than tools
    assert lexical.n_copies == sum(max(1, len(qs)) for qs in per_tool) > len(catalog.tools)
    assert (tmp_path / "work" / "dense-ft" / "model").is_dir()  # the adapter dense-ft trains, shared
    queries = [q.text for q in catalog.split("test")]
    before = pipe.search(queries, 5)
    pipe.save(tmp_path / "served")
    after = Pipeline.load(tmp_path / "served").search(queries, 5)
    assert [before.ranked_ids(i) for i in range(len(queries))] == [after.ranked_ids(i) for i in range(len(queries))]


def test_a_served_fused_expansion_keeps_the_weight_chosen_on_dev(tmp_path: Path) -> None:
    """Rebuilt for serving with every request, hybrid-exp-ft keeps its dev-phase weight: refitted, the dev
    requests inside the documents would pick the weight (on MTRB-MetaTool it fell to the expanded BM25 alone)."""
    from make_fixture import write_fixture_catalog

    from toolret.adapt.candidates import candidates
    from toolret.adapt.run import served_expansion
    from toolret.catalog.io import load_catalog
    from toolret.config import load_params
    from toolret.roles import Corpus

    catalog = load_catalog(write_fixture_catalog(tmp_path / "fixture", n_tools=30, n_train=40, n_test=20, seed=0))
    train_only = [[q.text for q in catalog.split("train") if catalog.gold(q.id) == {t.id}][:1] for t in catalog.tools]
    every = [[q.text for q in catalog.split("train") if catalog.gold(q.id) == {t.id}][:2] for t in catalog.tools]
    cand = {c.name: c for c in candidates(catalog, load_params(), tmp_path / "work", "fast", 2,
                                          {"epochs": 1, "max_train_pairs": 32})}["hybrid-exp-ft"]
    dev_pipe = cand.build(train_only)
    dev_pipe.fit(catalog)
    dev_pipe.index(Corpus.from_catalog(catalog))
    dev_pipe.retriever.weight = 0.3  # as if dev had chosen it (a refit on this catalog would take 0.5)
    served = served_expansion(cand, dev_pipe, every, catalog, catalog)
    assert served.retriever.weight == 0.3
    assert served.retriever.sides[0].n_copies > dev_pipe.retriever.sides[0].n_copies  # every request expands


def test_a_fused_candidate_whose_side_read_the_requests_takes_hybrids_weight(tmp_path: Path) -> None:
    """Dev rewards a side that read the generator's requests (trained on them, or expanded with them): such a
    fused candidate is fused at the untrained hybrid's dev-chosen weight and selects none of its own."""
    from make_fixture import write_fixture_catalog

    from toolret.adapt.candidates import candidates, with_weight_of
    from toolret.catalog.io import load_catalog
    from toolret.config import load_params

    catalog = load_catalog(write_fixture_catalog(tmp_path / "fixture", n_tools=30, n_train=40, n_test=20, seed=0))
    pool = {c.name: c for c in candidates(catalog, load_params(), tmp_path / "work", "fast", 2)}
    assert {n: c.weight_from for n, c in pool.items() if c.weight_from} == {
        "hybrid-ft": "hybrid", "hybrid-exp": "hybrid", "hybrid-exp-ft": "hybrid"}
    per_tool = [[q.text for q in catalog.split("train") if catalog.gold(q.id) == {t.id}][:1] for t in catalog.tools]
    hybrid = pool["hybrid"].build(per_tool)
    hybrid.retriever.weight = 0.9  # as if dev had chosen it
    fused = pool["hybrid-exp"].build(per_tool)
    with_weight_of(fused, hybrid)
    fused.fit(catalog)  # the fixture has a dev split: a candidate selecting its own weight would pick one here
    assert fused.retriever.weight == 0.9
    assert "dev_curve" not in fused.retriever.stats and "hybrid" in fused.retriever.stats["weight_source"]
