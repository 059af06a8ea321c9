"""Synthetic training catalogs: held-out categories / tools, dev buckets, filtering, no test query read."""

from __future__ import annotations

import pytest

from toolret.catalog.model import Catalog, Query, Tool
from toolret.errors import CatalogError
from toolret.llm.synthetic_catalog import holdout_tools, synthesize
from toolret.config import SyntheticSpec

CATS = ["Weather", "Finance", "Movies", "Food", "Travel"]


def _source() -> Catalog:
    tools = []
    for c, cat in enumerate(CATS):
        for p in range(4):  # 4 parent tools of 3 APIs each per category: 60 APIs
            for a in range(3):
                tid = f"{cat}-{p}-{a}"
                tools.append(Tool(id=tid, name=f"api{a}", tool=f"{cat}-tool{p}", category=cat,
                                  docs={"original": f"{cat.lower()} service {p} endpoint {a} word{c}{p}{a}"}))
    queries = [Query("t1", "a test query that must never be read", "test")]
    return Catalog("src", tools, queries, {"t1": {tools[0].id: 1}})


def _per_tool(catalog: Catalog, n: int = 3) -> list[list[str]]:
    return [[f"use {t.docs['original']} please ({j})" for j in range(n)] for t in catalog.tools]


def test_held_out_categories_and_tools_get_only_dev_queries():
    src = _source()
    spec = SyntheticSpec(source="src", n=2, holdout_categories=0.2, holdout_tools=0.25, dev_fraction=0.0)
    cat = synthesize(src, _per_tool(src), spec, "syn")
    info = cat.provenance["synthetic"]
    assert len(info["held_out_categories"]) == 1  # round(5 * 0.2)
    assert len(info["held_out_tools"]) == 4  # round(16 remaining parent tools * 0.25)
    held_cat, held_tools = set(info["held_out_categories"]), set(info["held_out_tools"])
    by_id = {t.id: t for t in cat.tools}
    for q in cat.queries:
        (gold,) = cat.gold(q.id)
        unseen = by_id[gold].category in held_cat or by_id[gold].tool in held_tools
        assert q.split == ("dev" if unseen else "train"), q.id
    assert info["held_out_apis"] == 12 + 12 and info["dev_unseen"] == 24 * 2 and info["train"] == 36 * 2
    assert {q.split for q in cat.queries} == {"train", "dev"}  # the source's test query is not carried over
    assert all("never be read" not in q.text for q in cat.queries) and cat.provenance["purpose"] == "training"


def test_holdout_is_seeded_and_changes_with_the_seed():
    src = _source()
    a = holdout_tools(src, SyntheticSpec(source="src", seed=1, holdout_categories=0.4))
    assert a == holdout_tools(src, SyntheticSpec(source="src", seed=1, holdout_categories=0.4))
    others = [holdout_tools(src, SyntheticSpec(source="src", seed=s, holdout_categories=0.4)) for s in range(2, 8)]
    assert any(o[0] != a[0] for o in others)


def test_dev_fraction_of_seen_queries_and_first_n_samples_only():
    src = _source()
    spec = SyntheticSpec(source="src", n=2, holdout_categories=0.0, holdout_tools=0.0, dev_fraction=0.25)
    cat = synthesize(src, _per_tool(src, n=3), spec, "syn")
    info = cat.provenance["synthetic"]
    assert info["generated"] == 120 and info["dev_unseen"] == 0
    assert 15 <= info["dev_seen"] <= 45 and info["dev_seen"] + info["train"] == 120
    assert not any(q.text.endswith("(2)") for q in cat.queries)  # sample index 2 is beyond n = 2


def test_duplicate_texts_are_dropped_and_filtering_keeps_queries_bm25_finds():
    src = _source()
    per_tool = _per_tool(src, n=1)
    per_tool[1] = list(per_tool[0])  # the same text written for two APIs: one query, not two labels
    per_tool[2] = ["zzz qqq nothing in common"]  # BM25 cannot find its API
    spec = SyntheticSpec(source="src", n=1, holdout_categories=0.0, holdout_tools=0.0, dev_fraction=0.0,
                         filter="bm25", filter_depth=1)
    cat = synthesize(src, per_tool, spec, "syn")
    info = cat.provenance["synthetic"]
    assert info["duplicate_texts_dropped"] == 1 and info["filtered_out"] == 1
    assert "syn-Weather-0-2-0" not in {q.id for q in cat.queries}


def _plain_and_filtered():
    """The same generations synthesized unfiltered and BM25-filtered; every third API's queries share nothing with
    its document (BM25 misses them)."""
    src = _source()
    per_tool = _per_tool(src, n=3)
    for i in range(0, len(per_tool), 3):
        per_tool[i] = [f"zzz qqq unrelated request {i} ({j})" for j in range(3)]
    spec = dict(source="src", n=3, holdout_categories=0.2, holdout_tools=0.25, dev_fraction=0.3, filter_depth=1)
    return (synthesize(src, per_tool, SyntheticSpec(**spec), "plain"),
            synthesize(src, per_tool, SyntheticSpec(**spec, filter="bm25"), "filtered"))


def test_a_filtered_catalog_keeps_each_query_in_the_split_the_unfiltered_one_gives_it():
    """Filtering drops queries; it must not re-carve dev. Models trained on the unfiltered catalog (the first
    stage's dense-ft) and on the filtered one (the reranker) are selected on dev splits of each other's: a query
    that is train in one and dev in the other would put training queries into dev selection."""
    plain, filtered = _plain_and_filtered()
    assert filtered.provenance["synthetic"]["filtered_out"] >= 15  # training queries dropped
    split = {q.id: q.split for q in plain.queries}
    assert {q.id for q in filtered.queries} < set(split)
    assert {q.id: q.split for q in filtered.queries} == {q.id: split[q.id] for q in filtered.queries}
    assert {"train", "dev"} == {q.split for q in filtered.queries}


def test_the_filter_drops_training_queries_only_so_dev_is_drawn_like_test():
    """Consistency filtering is a training-data treatment. A dev split kept only where BM25 finds the source API
    is biased toward any first stage with BM25 in it (on ToolBench: first stage 0.975 R@5 on the filtered dev), and
    test queries are not filtered: the filtered catalog's dev split is the unfiltered one's, query for query."""
    plain, filtered = _plain_and_filtered()
    dev = {q.id: q.text for q in plain.split("dev")}
    assert {q.id: q.text for q in filtered.split("dev")} == dev
    assert {q.id: filtered.gold(q.id) for q in filtered.split("dev")} == {i: plain.gold(i) for i in dev}
    assert any(q.text.startswith("zzz") for q in filtered.split("dev"))  # a query BM25 misses stays in dev
    assert not any(q.text.startswith("zzz") for q in filtered.split("train"))  # ... and leaves training
    info = filtered.provenance["synthetic"]
    assert info["filtered_out"] == len(plain.split("train")) - len(filtered.split("train")) > 0


def test_tools_without_queries_are_counted_and_a_misaligned_job_is_refused():
    src = _source()
    per_tool = _per_tool(src, n=1)
    per_tool[5] = []
    cat = synthesize(src, per_tool, SyntheticSpec(source="src", n=1), "syn")
    assert cat.provenance["synthetic"]["tools_without_queries"] == 1
    with pytest.raises(CatalogError, match="one prompt per tool"):
        synthesize(src, per_tool[:-1], SyntheticSpec(source="src"), "syn")


def test_a_training_catalog_validates_for_a_train_split_not_a_test_split():
    from toolret.catalog.validation import validate_catalog

    src = _source()
    cat = synthesize(src, _per_tool(src), SyntheticSpec(source="src", holdout_categories=0.0, holdout_tools=0.0), "syn")
    report = validate_catalog(cat)
    assert report.success, report.message
    assert report.result("splits.train_present").success
    cat.queries = [q for q in cat.queries if q.split != "train"]
    failed = validate_catalog(cat)
    assert not failed.success and "no query is in the train split" in failed.result("splits.train_present").message


def test_a_saved_training_catalog_loads_without_a_test_split(tmp_path):
    from toolret.catalog.io import load_catalog, save_catalog

    src = _source()
    cat = synthesize(src, _per_tool(src), SyntheticSpec(source="src"), "syn")
    save_catalog(cat, tmp_path / "syn")
    again = load_catalog(tmp_path / "syn")
    assert again.name == "syn" and len(again.split("train")) == len(cat.split("train")) > 0
    assert not (tmp_path / "syn" / "qrels" / "test.tsv").exists()


def test_multi_api_groups_come_from_one_tool_or_one_category_and_are_seeded():
    from toolret.llm.synthetic_catalog import multi_api_groups

    src = _source()
    spec = SyntheticSpec(source="src", multi_tool_groups=20, multi_category_groups=20, seed=3)
    groups = multi_api_groups(src, spec)
    assert groups == multi_api_groups(src, spec)
    by_id = {t.id: t for t in src.tools}
    tool_groups = [g for g in groups if len({by_id[t].tool for t in g}) == 1]
    cat_groups = [g for g in groups if len({by_id[t].tool for t in g}) > 1]
    assert tool_groups and cat_groups and len(tool_groups) + len(cat_groups) == len(groups) <= 40
    assert all(2 <= len(g) <= 3 and len(set(g)) == len(g) for g in groups)
    assert all(len({by_id[t].category for t in g}) == 1 for g in cat_groups)  # one category, distinct tools
    assert all(len({by_id[t].tool for t in g}) == len(g) for g in cat_groups)
    assert len(set(groups)) == len(groups)


def test_multi_api_queries_have_every_group_api_as_gold_and_held_out_groups_stay_in_dev():
    from toolret.llm.synthetic_catalog import multi_api_groups

    src = _source()
    spec = SyntheticSpec(source="src", n=1, holdout_categories=0.2, holdout_tools=0.0, dev_fraction=0.0,
                         multi_tool_groups=15, multi_category_groups=15)
    groups = multi_api_groups(src, spec)
    per_group = [(g, [f"do {' and '.join(g)}"]) for g in groups]
    cat = synthesize(src, _per_tool(src, n=1), spec, "syn", per_group=per_group)
    info = cat.provenance["synthetic"]
    held = set(info["held_out_categories"])
    by_id = {t.id: t for t in src.tools}
    multi = [q for q in cat.queries if q.id.startswith("syn-multi")]
    assert len(multi) == len(groups) == info["multi_api"] == info["generated_multi_api"]
    for q in multi:
        gold = cat.gold(q.id)
        assert gold == set(groups[int(q.id.split("multi")[1].split("-")[0])])
        unseen = any(by_id[t].category in held for t in gold)
        assert q.split == ("dev" if unseen else "train"), q.id


def test_a_tool_sample_is_seeded_uniform_in_catalog_order_and_reads_no_query():
    from toolret.llm.synthetic_catalog import sample_tools

    src = _source()
    a = sample_tools(src, 10, seed=13)
    assert len(a.tools) == 10 and a.queries == [] and a.qrels == {}
    order = [t.id for t in src.tools]
    assert [order.index(t.id) for t in a.tools] == sorted(order.index(t.id) for t in a.tools)
    assert [t.id for t in sample_tools(src, 10, seed=13).tools] == [t.id for t in a.tools]
    assert any({t.id for t in sample_tools(src, 10, seed=s).tools} != {t.id for t in a.tools} for s in range(1, 6))
    # the same tools whatever the queries are (it must not look at them)
    no_queries = Catalog("src", list(src.tools), [], {})
    assert [t.id for t in sample_tools(no_queries, 10, seed=13).tools] == [t.id for t in a.tools]
    assert a.provenance["sample_tools"] == {"n": 10, "of": 60, "seed": 13}
    assert len(sample_tools(src, 100, seed=13).tools) == 60  # more than the corpus: every tool
    with pytest.raises(CatalogError, match="n must be >= 1"):
        sample_tools(src, 0, seed=13)
    # sampling over 20 seeds reaches every category: uniform over tools, not stuck in one part of the corpus
    seen = {t.category for s in range(20) for t in sample_tools(src, 5, seed=s).tools}
    assert seen == set(CATS)


def test_a_synthetic_spec_over_a_sample_builds_on_the_sampled_tools_only():
    from toolret.llm.synthetic_catalog import sample_tools

    src = _source()
    spec = SyntheticSpec(source="src", n=2, sample_tools=12, holdout_categories=0.0, holdout_tools=0.0,
                         dev_fraction=0.0)
    sampled = sample_tools(src, spec.sample_tools, spec.seed)
    cat = synthesize(sampled, _per_tool(sampled), spec, "syn")
    golds = {t for q in cat.queries for t in cat.gold(q.id)}
    assert golds == {t.id for t in sampled.tools} and len(cat.queries) == 12 * 2


def _composed(filter: str = "none"):
    src = _source()
    spec = SyntheticSpec(source="src", n=3, holdout_categories=0.2, holdout_tools=0.25, dev_fraction=0.2,
                         filter=filter, filter_depth=1, compose=1.0)
    per_tool = _per_tool(src, n=3)
    for i in range(0, len(per_tool), 3):  # BM25 misses every third API's queries
        per_tool[i] = [f"zzz qqq unrelated request {i} ({j})" for j in range(3)]
    return src, synthesize(src, per_tool, spec, "syn")


def test_composed_requests_join_queries_of_one_split_for_apis_of_one_tool_or_one_category():
    """ToolBench's instructions ask for 2-3 things in one message; a composed request joins 2-3 single-API queries
    of one split -- APIs of one parent tool, or of distinct tools of one category -- and its gold is exactly their
    APIs. Parts come from the request's own split only: no dev text in a training request, or the reverse."""
    src, cat = _composed()
    by_id = {t.id: t for t in src.tools}
    singles = {split: {q.text: next(iter(cat.gold(q.id))) for q in cat.split(split)
                       if not q.id.startswith("syn-composed")
                       and len(cat.gold(q.id)) == 1} for split in ("train", "dev")}
    info = cat.provenance["synthetic"]
    for split in ("train", "dev"):
        composed = [q for q in cat.split(split) if q.id.startswith("syn-composed")]
        assert len(composed) == info[f"composed_{split}"] > 0.8 * len(singles[split])  # compose 1.0, few duplicates
        kinds = set()
        for q in composed:
            gold = cat.gold(q.id)
            assert 2 <= len(gold) <= 3 and len({by_id[t].category for t in gold}) == 1, q.text
            tools = {by_id[t].tool for t in gold}
            kinds.add("tool" if len(tools) == 1 else "category")
            assert len(tools) in (1, len(gold)), q.text  # one tool, or one API per tool
            # every part is a query of this split written for one of the gold APIs (case of its first letter aside)
            found = {api for text, api in singles[split].items() if text[1:] in q.text}
            assert gold <= found, q.text
            other = "dev" if split == "train" else "train"
            assert not any(text[1:] in q.text for text in singles[other]), q.text
        assert kinds == {"tool", "category"}


def test_composition_is_seeded_and_leaves_a_filtered_catalog_s_dev_split_the_unfiltered_one_s():
    _, plain = _composed()
    _, again = _composed()
    _, filtered = _composed("bm25")
    assert [(q.id, q.text) for q in plain.queries] == [(q.id, q.text) for q in again.queries]
    dev = {q.id: (q.text, plain.gold(q.id)) for q in plain.split("dev")}
    assert {q.id: (q.text, filtered.gold(q.id)) for q in filtered.split("dev")} == dev
    assert any(q.id.startswith("syn-composed-dev") for q in filtered.split("dev"))
    train = [q.text for q in filtered.split("train") if q.id.startswith("syn-composed")]
    assert train and not any("zzz" in t for t in train)  # joined from the training queries the filter kept


def test_a_spec_without_composition_keeps_the_provenance_of_catalogs_built_before_it():
    src = _source()
    cat = synthesize(src, _per_tool(src), SyntheticSpec(source="src"), "syn")
    assert "compose" not in cat.provenance["spec"] and "composed_train" not in cat.provenance["synthetic"]
    assert not any(q.id.startswith("syn-composed") for q in cat.queries)


def test_joined_requests_lowercase_after_a_connector_but_keep_the_pronoun_i():
    import random

    from toolret.llm.synthetic_catalog import CONNECTORS, join_requests

    parts = ["Find a hotel.", "Get the weather.", "I need a taxi."]
    texts = {join_requests(parts, random.Random(s)) for s in range(40)}
    assert all(t.startswith("Find a hotel. ") for t in texts)
    for connector in CONNECTORS[1:]:
        assert any(f"{connector}get the weather." in t for t in texts), connector
        assert any(f"{connector}I need a taxi." in t for t in texts), connector
    assert any("hotel. Get the weather." in t for t in texts)  # no connector: the part unchanged
