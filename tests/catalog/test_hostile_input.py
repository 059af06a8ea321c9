"""Issue 78 (6 and the hostile-input follow-up): bad input files are a ToolretError naming the file (the CLI:
one line, exit 2), never another exception, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolret.catalog.loaders.beir import load_beir
from toolret.cli import main
from toolret.errors import CatalogError


def _beir(folder: Path, corpus: str = "", queries: str = "", qrels: str = "query-id\tcorpus-id\tscore\n") -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(corpus)
    (folder / "queries.jsonl").write_text(queries)
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


def test_an_empty_corpus_is_refused_by_the_loader_naming_the_file(tmp_path):
    folder = _beir(tmp_path / "empty")
    with pytest.raises(CatalogError, match=r"empty/corpus.jsonl: no tools"):
        load_beir(folder)


def test_index_of_an_empty_beir_folder_is_a_one_line_error(tmp_path, capsys):
    folder = _beir(tmp_path / "empty")
    assert main(["index", "--catalog", str(folder), "--method", "bm25", "--out", str(tmp_path / "idx")]) == 2
    err = capsys.readouterr().err
    assert "corpus.jsonl: no tools" in err and "Traceback" not in err
    assert not (tmp_path / "idx").exists()


def test_import_openapi_of_a_directory_is_a_one_line_error(tmp_path, capsys):
    assert main(["import-openapi", "--spec", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: is a directory, not a file" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
