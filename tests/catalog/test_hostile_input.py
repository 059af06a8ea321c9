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


# -- generated hostile input: whatever is fed, the loaders and importers raise a ToolretError or succeed ----

import json  # noqa: E402
import tempfile  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from toolret.catalog.importers.openapi import import_openapi  # noqa: E402
from toolret.catalog.io import load_catalog  # noqa: E402
from toolret.errors import ToolretError  # noqa: E402

import os  # noqa: E402

# examples per generated test: the suite's default; benchmarks/hostile_inputs.py runs them at >= 500
EXAMPLES = int(os.environ.get("TOOLRET_HOSTILE_EXAMPLES", "25"))
HOSTILE = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _count(test: str) -> None:
    """One generated example ran (``TOOLRET_HOSTILE_LOG``: the benchmark counts them)."""
    log = os.environ.get("TOOLRET_HOSTILE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"example\t{test}\n")
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=3), max_leaves=8)
_record = st.fixed_dictionaries({}, optional={"_id": _json | st.text(max_size=5), "text": _json | st.text(max_size=20),
                                              "title": _json, "metadata": _json}) | _json
_line = st.one_of(_record.map(lambda r: json.dumps(r)), st.text(max_size=30).filter(lambda t: "\n" not in t),
                  st.just("[" * 5000 + "]" * 5000))
_qrels_row = st.one_of(st.tuples(st.text(max_size=4), st.text(max_size=4), st.text(max_size=3)).map("\t".join),
                       st.text(max_size=20).filter(lambda t: "\n" not in t))


@HOSTILE
@given(corpus=st.lists(_line, max_size=4), queries=st.lists(_line, max_size=3),
       qrels=st.lists(_qrels_row, max_size=3), raw=st.binary(max_size=20))
def test_generated_beir_folders_load_or_raise_a_toolret_error(corpus, queries, qrels, raw):
    _count("BEIR folder")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "beir"
        _beir(folder, "\n".join(corpus), "\n".join(queries), "query-id\tcorpus-id\tscore\n" + "\n".join(qrels))
        if raw:
            (folder / "queries.jsonl").write_bytes(raw)  # bytes that may not be UTF-8
        before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
        try:
            load_beir(folder)
        except ToolretError:
            pass
        assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before  # nothing written


_operation = st.fixed_dictionaries({}, optional={"operationId": _json, "summary": _json, "parameters": _json,
                                                 "requestBody": _json, "responses": _json, "tags": _json})
_spec = st.one_of(
    _json,
    st.fixed_dictionaries({"openapi": st.sampled_from(["3.0.0", "3.1.0", 3, None]),
                           "info": st.one_of(_json, st.fixed_dictionaries({"title": _json, "version": _json}))},
                          optional={"paths": st.one_of(_json, st.dictionaries(
                              st.text(max_size=6), st.one_of(_json, st.dictionaries(
                                  st.sampled_from(["get", "post", "put", "parameters"]), _operation, max_size=2)),
                              max_size=2)), "components": _json}))


@HOSTILE
@given(spec=_spec, as_yaml=st.booleans())
def test_generated_openapi_files_import_or_raise_a_toolret_error(spec, as_yaml):
    import yaml

    _count("OpenAPI file")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("spec.yaml" if as_yaml else "spec.json")
        path.write_text(yaml.safe_dump(spec) if as_yaml else json.dumps(spec), encoding="utf-8")
        try:
            import_openapi(path)
        except ToolretError:
            pass
        assert sorted(p.name for p in Path(tmp).iterdir()) == [path.name]  # nothing written


@settings(max_examples=max(8, EXAMPLES // 3), deadline=None)  # a CLI run each
@given(spec=_spec)
def test_the_import_command_exits_0_or_2_and_writes_nothing_on_2(spec):
    _count("import-openapi command")
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "spec.json", Path(tmp) / "out"
        path.write_text(json.dumps(spec), encoding="utf-8")
        rc = main(["import-openapi", "--spec", str(path), "--out", str(out)])  # any other error raises here
        if rc == 0:  # imported: a whole catalog, loadable
            assert (out / "catalog.json").is_file() and load_catalog(out).tools
        else:  # refused (main returns 2 for a ToolretError): nothing written
            assert sorted(p.name for p in Path(tmp).iterdir()) == ["spec.json"]


@pytest.mark.parametrize("route", ["", "pets", "/pets ", " /pets", "/pe\tts"])
def test_a_path_that_is_no_openapi_path_is_named(tmp_path, route):
    """Found by the generated import test: a path key "" made the tool id "GET " that the catalog's own loader
    then refused (rc 0 and an unloadable catalog). OpenAPI path keys begin with "/"."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"openapi": "3.0.0", "info": {"title": "t", "version": "1"},
                                "paths": {route: {"get": {"summary": "list"}}}}))
    with pytest.raises(CatalogError, match=r"path .* must begin with '/'"):
        import_openapi(spec)
