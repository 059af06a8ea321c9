"""``hybrid``: per-side document variants, dev-selected weight, registry build, save/load round trip."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.catalog.model import Catalog, Query, Tool
from toolret.errors import CatalogError
from toolret.retrieval.bm25 import BM25Retriever
from toolret.retrieval.hybrid import HybridConfig, HybridRetriever, HybridSide
from toolret.roles import Corpus

# "original" docs describe the tool; "human" docs describe the next tool: a side on them misleads
TOPICS = ["weather forecast rain", "movie title search", "currency exchange rate", "recipe ingredient cooking",
          "translate language text", "stock price market", "hotel room booking", "flight ticket airline"]
NOISE = TOPICS[1:] + TOPICS[:1]


def _catalog() -> Catalog:
    tools = [Tool(id=f"t{i}", name=f"t{i}", docs={"original": TOPICS[i], "human": NOISE[i]}) for i in range(len(TOPICS))]
    words = [t.split() for t in TOPICS]
    queries, qrels = [], {}
    for i, w in enumerate(words):
        for j, (split, text) in enumerate([("dev", f"{w[0]} please"), ("dev", f"need {w[1]}"), ("test", f"{w[2]} now")]):
            qid = f"q{i}-{j}"
            queries.append(Query(qid, text, split))
            qrels[qid] = {f"t{i}": 1}
    return Catalog("hybrid-fixture", tools, queries, qrels)


def _two_bm25(docs: tuple[str | None, str | None], **config) -> HybridRetriever:
    sides = [HybridSide(component="bm25", docs=docs[0]), HybridSide(component="bm25", docs=docs[1])]
    return HybridRetriever([BM25Retriever(), BM25Retriever()], HybridConfig(sides=sides, depth=8, **config))


def test_each_side_indexes_its_own_document_variant():
    catalog = _catalog()
    lexical_only = _two_bm25(("original", "human"), weight=0.0, select_on_dev=False)
    lexical_only.index_corpus(Corpus.from_catalog(catalog, "human"))  # the pipeline's docs are not side 0's
    assert lexical_only.stats["side_docs"] == ["original", "human"]
    assert lexical_only.search(["rain"], k=1).ranked_ids(0) == ["t0"]
    noise_only = _two_bm25(("original", "human"), weight=1.0, select_on_dev=False)
    noise_only.index_corpus(Corpus.from_catalog(catalog, "original"))
    assert noise_only.search(["rain"], k=1).ranked_ids(0) == ["t7"]  # side 0 (weight 0) adds no candidates


def test_a_side_whose_variant_is_missing_indexes_the_pipeline_documents():
    catalog = _catalog()
    h = _two_bm25(("cleaned", "original"), select_on_dev=False)
    h.index_corpus(Corpus.from_catalog(catalog, "human"))
    assert h.stats["side_docs"] == ["pipeline", "original"]


def test_weight_is_selected_on_dev_and_moves_away_from_a_useless_side():
    catalog = _catalog()
    h = _two_bm25(("original", "human"), fusion="minmax", dev_metric_k=1)
    h.fit(catalog)
    curve = h.stats["dev_curve"]
    assert h.stats["weight_source"] == "dev" and h.stats["dev_queries"] == 16
    assert curve["0"] == 1.0 and curve["1"] == 0.0  # the misleading side alone finds nothing
    assert h.weight < 0.5 and curve[f"{h.weight:g}"] == max(curve.values())


def test_without_a_dev_split_the_configured_weight_is_kept():
    catalog = _catalog()
    for q in catalog.queries:
        q.split = "test"
    h = _two_bm25(("original", "human"), weight=0.3)
    h.fit(catalog)
    assert h.weight == 0.3 and h.stats["weight_source"] == "config"


def test_config_rejects_a_third_side_and_bad_weights():
    with pytest.raises(ValueError, match="exactly two"):
        HybridConfig(sides=[HybridSide(component="bm25")] * 3)
    with pytest.raises(ValueError, match="weight_grid"):
        HybridConfig(weight_grid=[0.5, 1.5])
    with pytest.raises(ValueError, match="unknown document variant"):
        HybridSide(component="bm25", docs="summary")


def test_registered_hybrid_fuses_bm25_and_dense_and_round_trips(fixture_catalog_dir, tmp_path):
    from toolret.catalog.cleanup import clean_catalog
    from toolret.catalog.datasets import load_dataset
    from toolret.config import load_params
    from toolret.pipeline import Pipeline, build_pipeline

    catalog, _ = clean_catalog(load_dataset(str(fixture_catalog_dir)))
    params = load_params()
    pipeline = build_pipeline("hybrid", catalog, params)
    pipeline.fit(catalog)
    pipeline.index(Corpus.from_catalog(catalog, "original"))
    retriever = pipeline.retriever
    assert [s.name for s in retriever.sides] == ["bm25", "dense"]
    assert retriever.stats["side_docs"] == ["pipeline", "cleaned"]
    assert retriever.stats["weight_source"] == "dev"
    queries = [q.text for q in catalog.split("test")]
    ranking = pipeline.search(queries, k=5)
    # every fused result comes from one of the two sides' top lists
    sides = [s.search(queries, k=len(catalog.tools)) for s in retriever.sides]
    assert all(set(ranking.ranked_ids(i)) <= set(sides[0].ranked_ids(i)) | set(sides[1].ranked_ids(i))
               for i in range(len(queries)))
    pipeline.save(tmp_path / "p")
    loaded = Pipeline.load(tmp_path / "p")
    again = loaded.search(queries, k=5)
    np.testing.assert_array_equal(again.indices, ranking.indices)
    assert loaded.retriever.weight == retriever.weight


def test_loading_a_hybrid_without_its_sides_names_the_folder(tmp_path):
    h = _two_bm25((None, None), select_on_dev=False)
    h.index(["a", "b"], ["weather", "movies"])
    h.save(tmp_path / "h")
    import shutil

    shutil.rmtree(tmp_path / "h" / "side1-bm25")
    with pytest.raises(CatalogError, match="side1-bm25"):
        HybridRetriever.load(tmp_path / "h")


def test_the_weight_may_be_selected_on_another_catalogs_dev_split():
    catalog = _catalog()
    test_only = _catalog()
    for q in test_only.queries:
        q.split = "test"
    sides = [HybridSide(component="bm25", docs="original"), HybridSide(component="bm25", docs="human")]
    h = HybridRetriever([BM25Retriever(), BM25Retriever()], HybridConfig(sides=sides, depth=8, dev_metric_k=1),
                        dev_catalog=catalog)
    h.fit(test_only)
    assert h.stats["weight_source"] == "dev" and h.stats["dev_dataset"] == "hybrid-fixture" and h.weight < 0.5


def test_hybrid_ft_swaps_the_dense_side_for_the_training_catalogs_dense_ft(fixture_catalog_dir):
    """``hybrid-ft``: the hybrid's sides and document variants, its dense side the dense-ft of the
    catalog's ``trained_on`` training catalog (built, not trained here)."""
    from toolret.catalog.datasets import load_dataset
    from toolret.config import load_params
    from toolret.paths import data_dir
    from toolret.registry import BuildContext, build_component
    from toolret.retrieval.finetuned import FinetunedDenseRetriever

    catalog = load_dataset(str(fixture_catalog_dir))
    params = load_params().replace(finetune_datasets=["elsewhere"], trained_on={catalog.name: "elsewhere"})
    h = build_component("hybrid-ft", BuildContext(catalog, params))
    assert isinstance(h.sides[0], BM25Retriever) and isinstance(h.sides[1], FinetunedDenseRetriever)
    assert [s.component for s in h.config.sides] == ["bm25", "dense-ft"]
    assert [s.docs for s in h.config.sides] == [s.docs for s in params.hybrid.sides]
    assert h.sides[1].artifact == data_dir() / "models" / "elsewhere" / "dense-ft"
    plain = build_component("hybrid", BuildContext(catalog, params))
    assert [s.name for s in plain.sides] == ["bm25", "dense"]
