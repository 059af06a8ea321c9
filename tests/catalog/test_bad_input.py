"""Malformed BEIR catalogs: each is rejected, by the loader (parse level, ``file:line``) or by
:func:`validate_catalog` (semantic level, record ids), and a rejected input never touches an
existing output directory."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from toolret.catalog.cleanup import clean_catalog
from toolret.catalog.io import save_catalog
from toolret.catalog.loaders.beir import load_beir
from toolret.errors import CatalogError
from toolret.catalog.validation import validate_catalog


# -- helpers to corrupt a fixture catalog -------------------------------------------------------

def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _edit(path: Path, index: int, **changes) -> None:
    """Change record ``index`` (0-based; line ``index + 1``); a value of ``...`` deletes the key."""
    rows = _rows(path)
    for key, value in changes.items():
        if value is ...:
            rows[index].pop(key, None)
        else:
            rows[index][key] = value
    _write_rows(path, rows)


def _append_line(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def _first_qrel(path: Path) -> tuple[str, str]:
    q, t, _ = path.read_text(encoding="utf-8").splitlines()[1].split("\t")
    return q, t


def _rejects(directory: Path, *fragments: str) -> str:
    with pytest.raises(CatalogError) as err:
        load_beir(directory)
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


# -- parse-level: the loader rejects, naming file and line ------------------------------------------

@pytest.mark.parametrize("field", ["_id", "text"])
def test_corpus_missing_field(fixture_catalog_dir, field):
    _edit(fixture_catalog_dir / "corpus.jsonl", 4, **{field: ...})
    _rejects(fixture_catalog_dir, "corpus.jsonl:5", f"missing field {field!r}")


@pytest.mark.parametrize("field", ["_id", "text"])
def test_query_missing_field(fixture_catalog_dir, field):
    _edit(fixture_catalog_dir / "queries.jsonl", 2, **{field: ...})
    _rejects(fixture_catalog_dir, "queries.jsonl:3", f"missing field {field!r}")


def test_duplicate_tool_id(fixture_catalog_dir):
    _edit(fixture_catalog_dir / "corpus.jsonl", 7, _id="t002")
    _rejects(fixture_catalog_dir, "corpus.jsonl:8", "t002", "duplicate tool id", "line 3")


def test_duplicate_query_id(fixture_catalog_dir):
    _edit(fixture_catalog_dir / "queries.jsonl", 10, _id="q0001")
    _rejects(fixture_catalog_dir, "queries.jsonl:11", "q0001", "duplicate query id")


def test_dangling_qrel_unknown_tool(fixture_catalog_dir):
    q, _ = _first_qrel(fixture_catalog_dir / "qrels" / "test.tsv")
    _append_line(fixture_catalog_dir / "qrels" / "test.tsv", f"{q}\tt_ghost\t1")
    _rejects(fixture_catalog_dir, "test.tsv:", "t_ghost", "not in corpus.jsonl")


def test_dangling_qrel_unknown_query(fixture_catalog_dir):
    _append_line(fixture_catalog_dir / "qrels" / "train.tsv", "q_ghost\tt000\t1")
    _rejects(fixture_catalog_dir, "train.tsv:", "q_ghost", "not in queries.jsonl")


@pytest.mark.parametrize("text", ["", "   \t\n  "])
def test_empty_or_whitespace_tool_text(fixture_catalog_dir, text):
    _edit(fixture_catalog_dir / "corpus.jsonl", 0, text=text)
    _rejects(fixture_catalog_dir, "corpus.jsonl:1", "t000", "'text' is empty")


@pytest.mark.parametrize("text", ["", "  \n "])
def test_empty_or_whitespace_query_text(fixture_catalog_dir, text):
    _edit(fixture_catalog_dir / "queries.jsonl", 5, text=text)
    _rejects(fixture_catalog_dir, "queries.jsonl:6", "q0005", "'text' is empty")


def test_non_utf8_bytes(fixture_catalog_dir):
    path = fixture_catalog_dir / "corpus.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"Air Quality", b"Air Qu\xe4lity", 1)  # latin-1 byte
    path.write_bytes(b"\n".join(lines))
    _rejects(fixture_catalog_dir, "corpus.jsonl:3", "not valid UTF-8")


def test_one_megabyte_description(fixture_catalog_dir):
    rows = _rows(fixture_catalog_dir / "corpus.jsonl")
    rows[6]["text"] = rows[6]["text"].replace("api_description:", "api_description:" + "lorem ipsum " * 90_000)
    _write_rows(fixture_catalog_dir / "corpus.jsonl", rows)
    assert len(rows[6]["text"]) > 1_000_000
    _rejects(fixture_catalog_dir, "corpus.jsonl:7", "t006", "characters (limit")


def test_invalid_json_line(fixture_catalog_dir):
    path = fixture_catalog_dir / "queries.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[8] = lines[8][:-5]  # truncated record
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _rejects(fixture_catalog_dir, "queries.jsonl:9", "invalid JSON")


def test_json_line_that_is_not_an_object(fixture_catalog_dir):
    _append_line(fixture_catalog_dir / "corpus.jsonl", '["t100", "text"]')
    _rejects(fixture_catalog_dir, "corpus.jsonl:31", "expected a JSON object")


def test_query_in_train_and_test_qrels(fixture_catalog_dir):
    q, t = _first_qrel(fixture_catalog_dir / "qrels" / "train.tsv")
    _append_line(fixture_catalog_dir / "qrels" / "test.tsv", f"{q}\t{t}\t1")
    _rejects(fixture_catalog_dir, "test.tsv:", q, "in both 'train' and 'test'")


def test_bad_qrels_row(fixture_catalog_dir):
    _append_line(fixture_catalog_dir / "qrels" / "test.tsv", "q0041 t000")
    _rejects(fixture_catalog_dir, "test.tsv:", "expected 3 tab-separated fields")


def test_missing_test_qrels_file(fixture_catalog_dir):
    (fixture_catalog_dir / "qrels" / "test.tsv").unlink()
    _rejects(fixture_catalog_dir, "qrels/test.tsv", "missing")


# -- semantic level: the loader accepts, validation rejects, naming records -------------------------

def _validation_failure(directory: Path, check: str) -> list[str]:
    catalog = load_beir(directory)  # parses fine
    report = validate_catalog(catalog)
    assert not report.success and check in {r.name for r in report.errors}, report.summary()
    return report.result(check).offending_ids


def test_long_but_loadable_description_fails_validation(fixture_catalog_dir):
    _edit(fixture_catalog_dir / "corpus.jsonl", 9, text="Movie reviews. " * 3000)  # 45k chars < loader's 100k
    assert _validation_failure(fixture_catalog_dir, "docs.length") == ["t009[original]"]


def test_long_query_fails_validation(fixture_catalog_dir):
    _edit(fixture_catalog_dir / "queries.jsonl", 3, text="weather " * 400)
    assert _validation_failure(fixture_catalog_dir, "queries.length") == ["q0003"]


def test_declared_test_query_without_judgements_fails_validation(fixture_catalog_dir):
    _append_line(fixture_catalog_dir / "queries.jsonl",
                 json.dumps({"_id": "q_orphan", "text": "Is it sunny?", "metadata": {"split": "test"}}))
    assert _validation_failure(fixture_catalog_dir, "test.has_gold") == ["q_orphan"]


def test_unknown_declared_split_fails_validation(fixture_catalog_dir):
    _append_line(fixture_catalog_dir / "queries.jsonl",
                 json.dumps({"_id": "q_val", "text": "Is it sunny?", "metadata": {"split": "validation"}}))
    assert _validation_failure(fixture_catalog_dir, "queries.known_split") == ["q_val"]


def test_empty_test_qrels_fails_validation(fixture_catalog_dir):
    (fixture_catalog_dir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")
    _validation_failure(fixture_catalog_dir, "splits.test_present")


def test_same_query_text_in_train_and_test_is_a_warning(fixture_catalog_dir):
    queries = _rows(fixture_catalog_dir / "queries.jsonl")
    test_ids = {line.split("\t")[0] for line in
                (fixture_catalog_dir / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    test_index = next(i for i, q in enumerate(queries) if q["_id"] in test_ids)
    _edit(fixture_catalog_dir / "queries.jsonl", test_index, text=queries[0]["text"])
    report = validate_catalog(load_beir(fixture_catalog_dir))
    assert report.success and [w.name for w in report.warnings] == ["splits.no_text_leak"]
    assert report.warnings[0].offending_ids == [queries[test_index]["_id"]]


# -- a failed step leaves the existing output untouched --------------------------------------------

def _tree_digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _curate(in_dir: Path, out_dir: Path) -> Path:
    """What a pipeline stage does: load -> validate -> clean -> save (atomically)."""
    catalog = load_beir(in_dir)
    validate_catalog(catalog).raise_for_errors()
    cleaned, _ = clean_catalog(catalog, tokenizer="whitespace")
    return save_catalog(cleaned, out_dir)


@pytest.fixture
def existing_output(tmp_path, fixture_catalog_dir):
    out = tmp_path / "outputs" / "out"  # alone in its parent, so stray temp dirs would show
    _curate(fixture_catalog_dir, out)
    assert (out / "corpus.jsonl").is_file() and load_beir(out).doc_variants() == ["original", "cleaned"]
    return out, _tree_digest(out)


def _siblings(out: Path) -> set[str]:
    return {p.name for p in out.parent.iterdir()}


def test_parse_error_leaves_output_untouched(tmp_path, existing_output):
    from make_fixture import write_fixture_catalog

    out, digest = existing_output
    before = _siblings(out)
    bad = write_fixture_catalog(tmp_path / "bad_parse", seed=1)
    _edit(bad / "corpus.jsonl", 3, _id="t000")  # duplicate id
    with pytest.raises(CatalogError, match="duplicate tool id"):
        _curate(bad, out)
    assert _tree_digest(out) == digest and _siblings(out) == before


def test_semantic_error_leaves_output_untouched(tmp_path, existing_output):
    from make_fixture import write_fixture_catalog

    out, digest = existing_output
    before = _siblings(out)
    bad = write_fixture_catalog(tmp_path / "bad_semantic", seed=2)
    _edit(bad / "corpus.jsonl", 2, text="x" * 30_000)
    with pytest.raises(CatalogError, match=r"docs\.length.*t002"):
        _curate(bad, out)
    assert _tree_digest(out) == digest and _siblings(out) == before


def test_failure_during_save_leaves_output_untouched(tmp_path, existing_output, fixture_catalog_dir):
    out, digest = existing_output
    before = _siblings(out)
    catalog = load_beir(fixture_catalog_dir)
    catalog.tools[-1].metadata["not_json"] = object()  # json.dumps fails part-way through corpus.jsonl
    with pytest.raises(TypeError):
        save_catalog(catalog, out)
    assert _tree_digest(out) == digest and _siblings(out) == before  # no temp dir left behind


# -- loader hardening: qrels scores, conflicting duplicates, padded ids, BOM ------------------------

@pytest.mark.parametrize("score", ["0.5", "-1", "x"])
def test_qrels_score_must_be_whole_non_negative(fixture_catalog_dir, score):
    q, t = _first_qrel(fixture_catalog_dir / "qrels" / "test.tsv")
    _append_line(fixture_catalog_dir / "qrels" / "test.tsv", f"{q}\t{t}\t{score}")
    _rejects(fixture_catalog_dir, "test.tsv:", "not a non-negative whole number")


def test_conflicting_duplicate_qrel_rejected_exact_duplicate_kept(fixture_catalog_dir):
    path = fixture_catalog_dir / "qrels" / "test.tsv"
    q, t = _first_qrel(path)
    _append_line(path, f"{q}\t{t}\t1")
    assert load_beir(fixture_catalog_dir).qrels[q][t] == 1
    _append_line(path, f"{q}\t{t}\t0")
    _rejects(fixture_catalog_dir, "test.tsv:", repr(q), "judged again")


def test_padded_id_rejected(fixture_catalog_dir):
    _edit(fixture_catalog_dir / "corpus.jsonl", 3, _id=" t003 ")
    _rejects(fixture_catalog_dir, "corpus.jsonl:4", "leading/trailing whitespace")


def test_utf8_bom_tolerated(fixture_catalog_dir):
    path = fixture_catalog_dir / "corpus.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_beir(fixture_catalog_dir).tools
