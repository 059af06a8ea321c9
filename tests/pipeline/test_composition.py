"""Any registered ``[rewriter] -> retriever -> [reranker ...]`` is built, evaluated by the one
``toolret evaluate`` path, saved and loaded: composed here from bm25 and a rewriter and a reranker
written for the test (registered like any method)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from toolret.errors import CatalogError
from toolret.cli import main
from toolret.pipeline import Pipeline, build_pipeline
from toolret.registry import Component, Method, parse_spec, register_method, write_component_meta
from toolret.retrieval.bm25 import BM25Retriever
from toolret.roles import Corpus, Ranking

pytestmark = pytest.mark.slow


class TwiceRewriter:
    """Each query -> two rewrites (the query, and the query repeated); ``fuse`` keeps the first row."""

    name = "test-twice"

    def __init__(self) -> None:
        self.calls = 0

    def fit(self, catalog) -> None:
        pass

    def rewrite(self, queries):
        self.calls += 1
        return [[q, f"{q} {q}"] for q in queries]

    def fuse(self, groups, ranking, k, query_ids):
        rows = np.cumsum([0] + [len(g) for g in groups[:-1]])
        return Ranking(list(query_ids), ranking.tool_ids, ranking.indices[rows, :k], ranking.scores[rows, :k])

    def save(self, path):
        Path(path).mkdir(parents=True)
        write_component_meta(Path(path), self.name)

    @classmethod
    def load(cls, path):
        return cls()


class ReverseReranker:
    """Reverses the first-stage list and appends the corpus' first tool when it is missing."""

    name = "test-reverse"

    def fit(self, catalog) -> None:
        pass

    def index(self, corpus: Corpus) -> None:
        self.first_tool = 0

    def rerank(self, queries, ranking, k):
        idx = np.full((len(queries), k + 1), -1, dtype=np.int64)
        for r in range(len(queries)):
            row = [i for i in ranking.indices[r][::-1] if i >= 0]
            if self.first_tool not in row:
                row.append(self.first_tool)
            idx[r, : len(row)] = row
        return Ranking(ranking.query_ids, ranking.tool_ids, idx, -np.arange(k + 1, dtype=np.float32)[None].repeat(len(queries), 0))

    def save(self, path):
        Path(path).mkdir(parents=True)
        write_component_meta(Path(path), self.name)

    @classmethod
    def load(cls, path):
        r = cls()
        r.first_tool = 0
        return r


register_method(Method("test-composition", components=(
    Component("test-twice", "rewriter", lambda ctx: TwiceRewriter(), TwiceRewriter.load),
    Component("test-reverse", "reranker", lambda ctx: ReverseReranker(), ReverseReranker.load),
)))
SPEC = "test-twice+bm25+test-reverse"


def _expected(catalog, k):
    """By hand: bm25's top-k of the query itself, reversed, plus tool 0 when absent."""
    bm25 = BM25Retriever()
    bm25.index(catalog.tool_ids, catalog.docs("original"))
    queries = catalog.split("test")
    plain = bm25.search([q.text for q in queries], k, [q.id for q in queries])
    out = {}
    for r, q in enumerate(queries):
        ids = plain.ranked_ids(r)[::-1]
        if catalog.tool_ids[0] not in ids:
            ids.append(catalog.tool_ids[0])
        out[q.id] = ids
    return out


def test_spec_roles_are_checked():
    from toolret.config import load_params

    params = load_params()
    spec = parse_spec(SPEC, params)
    assert (spec.rewriter, spec.retriever, spec.rerankers) == ("test-twice", "bm25", ("test-reverse",))
    with pytest.raises(CatalogError, match="rerankers"):
        parse_spec("bm25+test-twice", params)
    with pytest.raises(CatalogError, match="retriever"):
        parse_spec("test-twice+test-reverse", params)
    with pytest.raises(CatalogError, match="unknown component"):
        parse_spec("bm25+nope", params)


def test_composed_pipeline_ranks_as_composed_and_round_trips(fixture_catalog_dir, tmp_path):
    from toolret.catalog.datasets import load_dataset
    from toolret.config import validate_params

    catalog = load_dataset(str(fixture_catalog_dir))
    pipe = build_pipeline(SPEC, catalog, validate_params({}))
    pipe.fit(catalog)
    pipe.index(Corpus.from_catalog(catalog))
    queries = catalog.split("test")
    got = pipe.search([q.text for q in queries], 5, [q.id for q in queries]).as_lists()
    assert got == _expected(catalog, 5)
    assert pipe.rewriter.calls == 1
    pipe.save(tmp_path / "saved")
    loaded = Pipeline.load(tmp_path / "saved")
    assert [c.name for c in loaded.components] == ["test-twice", "bm25", "test-reverse"]
    assert loaded.search([q.text for q in queries], 5, [q.id for q in queries]).as_lists() == got


def test_one_evaluate_path_for_composed_and_plain(fixture_catalog_dir, tmp_path, capsys):
    from toolret.catalog.datasets import load_dataset

    outs = {}
    for method in ("bm25", SPEC):
        out = tmp_path / f"{method}.json"
        assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", method, "--k", "1,5",
                     "--output", str(out)]) == 0
        outs[method] = json.loads(out.read_text())
    assert set(outs[SPEC]) == set(outs["bm25"])  # the same JSON schema
    assert outs[SPEC]["method"] == SPEC and outs[SPEC]["n_queries"] == outs["bm25"]["n_queries"]
    catalog = load_dataset(str(fixture_catalog_dir))
    expected = _expected(catalog, 100)
    rows = [json.loads(line) for line in (tmp_path / f"{SPEC}.per_query.jsonl").read_text().splitlines()]
    assert {r["query_id"]: r["ranked"] for r in rows} == {q: ids[:10] for q, ids in expected.items()}
    assert all(r["query"] and len(r["top5_names"]) == min(5, len(r["ranked"])) for r in rows)
    assert any(len(r["ranked"]) < 10 for r in rows)  # bm25 ranks only documents sharing a query term


def test_a_registered_pipeline_may_name_its_first_stage_by_a_params_key():
    from toolret.config import apply_overrides, load_params
    from toolret.registry import parse_spec, pipelines

    params = load_params()
    assert parse_spec("toolrerank", params=params).retriever == params.toolrerank.first_stage
    hybrid = apply_overrides(params, {"toolrerank.first_stage": "hybrid"})
    assert parse_spec("toolrerank", params=hybrid).components == ["hybrid", "toolrerank-ce"]
    assert parse_spec("rerank-30", params=hybrid).components == ["hybrid", "ce-top30"]
    assert pipelines(hybrid)["toolrerank"][0].retriever == "hybrid"
    wrong = apply_overrides(params, {"toolrerank.first_stage": "ce-top10"})
    with pytest.raises(CatalogError, match="roles"):
        parse_spec("toolrerank", params=wrong)


def test_rewrite_stores_any_rewriter_s_outputs_through_the_protocol(fixture_catalog_dir, tmp_path, capsys):
    """``toolret rewrite`` goes through ``roles.write_rewrites``: a rewriter without a ``write_artifact`` of its
    own (this test's) gets the generic JSONL of its rewrites of every judged query."""
    from toolret.catalog.datasets import load_dataset

    out = tmp_path / "rewrites.jsonl"
    assert main(["rewrite", "--dataset", str(fixture_catalog_dir), "--component", "test-twice", "--out", str(out)]) == 0
    catalog = load_dataset(str(fixture_catalog_dir))
    judged = [q for q in catalog.split("test") if catalog.gold(q.id)]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows == [{"query_id": q.id, "text": q.text, "rewrites": [q.text, f"{q.text} {q.text}"]} for q in judged]
    meta = json.loads(out.with_name("rewrites.meta.json").read_text(encoding="utf-8"))
    assert meta["component"] == "test-twice" and meta["counts"] == {"n": len(judged)}
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["counts"] == {"n": len(judged)}
