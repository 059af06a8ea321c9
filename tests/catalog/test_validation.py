"""Great Expectations validation of in-memory catalogs: every check passes on good data and fails,
naming the offending records, on bad data."""

from __future__ import annotations

import copy
import json

import pytest

from toolret.catalog.loaders.beir import load_beir
from toolret.catalog.model import Catalog, Query
from toolret.errors import CatalogError
from toolret.catalog.validation import MAX_DOC_CHARS, ValidationReport, catalog_frames, validate_catalog


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Catalog:
    from make_fixture import write_fixture_catalog

    return load_beir(write_fixture_catalog(tmp_path_factory.mktemp("v") / "fx"))


def _bad(good: Catalog) -> Catalog:
    return copy.deepcopy(good)


def _failed(report: ValidationReport) -> set[str]:
    return {r.name for r in report.results if not r.success}


def test_good_catalog_passes(good):
    report = validate_catalog(good)
    assert report.success and not report.errors and not report.warnings, report.summary()
    assert len(report.results) == 15
    assert report.result("qrels.known_tools").element_count == sum(len(r) for r in good.qrels.values())
    meta = report.to_metadata()
    json.dumps(meta)
    assert meta["success"] is True and meta["failed_checks"] == "none"
    report.raise_for_errors()  # no-op


def test_duplicate_tool_id(good):
    cat = _bad(good)
    cat.tools.append(copy.deepcopy(cat.tools[3]))
    report = validate_catalog(cat)
    assert not report.success and _failed(report) == {"tools.unique_ids"}
    r = report.result("tools.unique_ids")
    assert r.offending_ids == ["t003"] and r.unexpected_count == 2 and "'t003'" in r.message


def test_duplicate_query_id_and_split_overlap(good):
    cat = _bad(good)
    q = cat.queries[0]
    cat.queries.append(Query(q.id, "another text", "test"))  # same id, other split
    report = validate_catalog(cat)
    assert {"queries.unique_ids", "splits.disjoint"} <= _failed(report)
    assert report.result("splits.disjoint").offending_ids == [q.id]


def test_empty_and_whitespace_texts(good):
    cat = _bad(good)
    cat.tools[1].docs["original"] = "   \n\t"
    cat.tools[2].docs["cleaned"] = ""
    cat.queries[5].text = ""
    report = validate_catalog(cat)
    assert {"docs.non_empty", "docs.length", "queries.non_empty", "queries.length"} <= _failed(report)
    assert report.result("docs.non_empty").offending_ids == ["t001[original]", "t002[cleaned]"]
    assert report.result("queries.non_empty").offending_ids == [cat.queries[5].id]


def test_length_bounds(good):
    cat = _bad(good)
    cat.tools[4].docs["original"] = "x" * (MAX_DOC_CHARS + 1)
    cat.queries[7].text = "y" * 2001
    report = validate_catalog(cat)
    assert _failed(report) == {"docs.length", "queries.length"}
    assert report.result("docs.length").offending_ids == ["t004[original]"]
    assert report.result("queries.length").offending_ids == [cat.queries[7].id]
    cat.tools[4].docs["original"] = "x" * MAX_DOC_CHARS  # the bound itself is allowed
    cat.queries[7].text = "y" * 2000
    assert validate_catalog(cat).success


def test_dangling_qrels(good):
    cat = _bad(good)
    qid = next(q.id for q in cat.queries if q.split == "test")
    cat.qrels[qid]["t999"] = 1
    cat.qrels["q_missing"] = {"t000": 1}
    report = validate_catalog(cat)
    assert _failed(report) == {"qrels.known_tools", "qrels.known_queries"}
    assert report.result("qrels.known_tools").offending_ids == [f"{qid} -> t999"]
    assert report.result("qrels.known_queries").offending_ids == ["q_missing -> t000"]
    with pytest.raises(CatalogError, match="t999"):
        report.raise_for_errors()


def test_unknown_split_and_variant(good):
    cat = _bad(good)
    cat.queries[0].split = "validation"
    cat.tools[0].docs["rewritten"] = "text"
    report = validate_catalog(cat)
    assert _failed(report) == {"queries.known_split", "docs.known_variant"}
    assert report.result("docs.known_variant").offending_ids == ["t000[rewritten]"]


def test_test_query_without_gold_and_no_test_split(good):
    cat = _bad(good)
    test_q = next(q for q in cat.queries if q.split == "test")
    cat.qrels[test_q.id] = {t: 0 for t in cat.qrels[test_q.id]}  # judged, but nothing relevant
    report = validate_catalog(cat)
    assert _failed(report) == {"test.has_gold"} and report.result("test.has_gold").offending_ids == [test_q.id]
    cat.queries = [q for q in cat.queries if q.split != "test"]
    cat.qrels = {q.id: cat.qrels[q.id] for q in cat.queries}
    report = validate_catalog(cat)
    assert "splits.test_present" in _failed(report) and not report.success


def test_text_leak_is_a_warning(good):
    cat = _bad(good)
    train_q = next(q for q in cat.queries if q.split == "train")
    test_q = next(q for q in cat.queries if q.split == "test")
    test_q.text = "  " + train_q.text.upper() + " "
    report = validate_catalog(cat)
    assert report.success  # a warning does not fail the catalog
    assert [w.name for w in report.warnings] == ["splits.no_text_leak"]
    assert report.warnings[0].offending_ids == [test_q.id]
    assert report.to_metadata()["n_warnings"] == 1 and "[warning]" in report.summary()


def test_many_offenders_are_capped(good):
    cat = _bad(good)
    for q in cat.queries:
        q.text = " "
    report = validate_catalog(cat)
    r = report.result("queries.non_empty")
    assert r.unexpected_count == len(cat.queries) and len(r.offending_ids) == 20 and "(first 20)" in r.message


def test_empty_catalog_reports_instead_of_raising():
    report = validate_catalog(Catalog("empty", [], [], {}))
    assert not report.success and {"tools.present", "splits.test_present"} <= _failed(report)


def test_frames_shape(good):
    frames = catalog_frames(good)
    assert len(frames["tools"]) == len(good.tools)
    assert len(frames["docs"]) == sum(len(t.docs) for t in good.tools)
    assert len(frames["qrels"]) == sum(len(r) for r in good.qrels.values())
    assert frames["qrels"]["tool_exists"].all() and frames["qrels"]["query_exists"].all()


def test_catalog_build_refuses_a_catalog_failing_validation_naming_the_query(tmp_path, capsys):
    """A catalog the loader accepts but validation rejects (a test query judged only with relevance 0)
    is refused with the failed checks in the message, and nothing is written."""
    from make_fixture import write_fixture_catalog

    from toolret.cli import main

    src = write_fixture_catalog(tmp_path / "fx")
    with open(src / "queries.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"_id": "q-nogold", "text": "a query nothing answers"}) + "\n")
    with open(src / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        f.write("q-nogold\tt000\t0\n")
    assert main(["catalog", "build", "--dataset", str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "failed validation" in err and "test.has_gold" in err and "q-nogold" in err
    assert not (tmp_path / "out").exists()
