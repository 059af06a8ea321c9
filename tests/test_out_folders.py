"""Issue 78 (1): every command writing a folder at ``--out`` follows one rule
(:func:`toolret.atomic.claim_output_dir`): a missing / empty folder or its own previous output is written
(atomically: built beside it, swapped in), anything else is refused naming the folder (exit 2) unless
``--force``; no marker file is written into an output (its DVC hash would change)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolret.catalog.io import save_catalog
from toolret.catalog.model import Catalog, Tool
from toolret.cli import main


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _user_folder(tmp_path: Path) -> Path:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    return out


@pytest.mark.parametrize("command", [
    ["catalog", "build", "--dataset", "{catalog}"],
    ["index", "--catalog", "{catalog}", "--method", "bm25"],
    ["evaluate-index", "--catalog", "{catalog}", "--index", "{catalog}"],
    ["evaluate-grid", "--catalog", "{catalog}", "--grid", "no.such.grid"],
])
def test_a_folder_the_command_did_not_write_is_refused_and_kept(tmp_path, fixture_catalog_dir, capsys, command):
    out = _user_folder(tmp_path)
    argv = [a.format(catalog=fixture_catalog_dir) for a in command] + ["--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{out}: already holds files" in err and "notes.txt" in err and "--force" in err
    assert "Traceback" not in err
    assert _files(out) == {"notes.txt": b"my notes"}


def test_own_output_is_replaced_and_force_replaces_anything(tmp_path, fixture_catalog_dir, capsys):
    out = tmp_path / "cat"
    build = ["catalog", "build", "--dataset", str(fixture_catalog_dir), "--out", str(out)]
    assert main(build) == 0
    first = _files(out)
    assert main(build) == 0  # over its own previous output: no --force needed, same bytes, no marker file
    assert _files(out) == first and set(first) == {"catalog.json", "corpus.jsonl", "queries.jsonl",
                                                     "qrels/train.tsv", "qrels/dev.tsv",
                                                     "qrels/test.tsv"}
    mine = _user_folder(tmp_path)
    assert main(["catalog", "build", "--dataset", str(fixture_catalog_dir), "--out", str(mine), "--force"]) == 0
    assert _files(mine) == first
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary sibling left


def test_a_failed_forced_run_leaves_the_old_content_whole(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "corpus.jsonl").write_text('{"_id": "t1"}\n')  # no text: the loader refuses it
    out = _user_folder(tmp_path)
    assert main(["catalog", "build", "--dataset", str(bad), "--out", str(out), "--force"]) == 2
    assert _files(out) == {"notes.txt": b"my notes"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "mine"]


def test_another_commands_output_is_refused_naming_the_command(tmp_path, fixture_catalog_dir, capsys):
    out = tmp_path / "cat"
    assert main(["catalog", "build", "--dataset", str(fixture_catalog_dir), "--out", str(out)]) == 0
    before = _files(out)
    assert main(["index", "--catalog", str(fixture_catalog_dir), "--method", "bm25", "--out", str(out)]) == 2
    assert f"{out}: already holds a catalog of `toolret catalog build`" in capsys.readouterr().err
    assert _files(out) == before


def _catalog(**provenance) -> Catalog:
    return Catalog(name="c", tools=[Tool(id="t1", name="t1", docs={"original": "a tool"})], queries=[], qrels={},
                   provenance=provenance)


@pytest.mark.parametrize("provenance, command", [
    ({"source": "toollens"}, "catalog build"),
    ({"source": "toollens", "cleanup": {}}, "catalog clean"),
    ({"source": "x", "purpose": "training", "synthetic": {}}, "catalog synthesize"),
    ({"source": "x", "selection": {}}, "catalog select"),
    ({"source": "openapi", "purpose": "serving"}, "import-openapi"),
    ({"source": "mcp", "purpose": "serving"}, "import-mcp"),
    ({"source": "openapi", "cleanup": {}}, "catalog clean"),
])
def test_a_catalog_is_recognised_by_its_provenance(tmp_path, provenance, command):
    from toolret.out_folders import output_made_by
    assert output_made_by(save_catalog(_catalog(**provenance), tmp_path / "c")) == command


def test_other_outputs_are_recognised_by_the_files_they_write(tmp_path):
    from toolret.out_folders import output_made_by

    def folder(name: str, files: dict[str, str]) -> Path:
        for rel, text in files.items():
            (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / rel).write_text(text)
        return tmp_path / name

    assert output_made_by(folder("i", {"original/pipeline.json": "{}", "cleaned/pipeline.json": "{}"})) == "index"
    assert output_made_by(folder("e", {"original.json": "{}", "original.per_query.jsonl": "",
                                       "original.run.trec": ""})) == "evaluate-index"
    assert output_made_by(folder("g", {"summary.json": "{}", "a.json": "{}"})) == "evaluate-grid"
    assert output_made_by(folder("a", {"adapt_report.json": "{}", "champion/pipeline.json": "{}"})) == "adapt"
    assert output_made_by(folder("n", {"original/pipeline.json": "{}", "notes.txt": ""})) is None
    assert output_made_by(folder("c", {"catalog.json": "{}", "notes.txt": ""})) is None
    assert output_made_by(folder("x", {"catalog.json": "not json", "corpus.jsonl": ""})) is None


def test_the_rule_itself(tmp_path):
    from toolret.atomic import claim_output_dir
    from toolret.errors import OutputExistsError

    def made_by(_):
        return "index"

    claim_output_dir(tmp_path / "missing", "index", force=False, made_by=made_by)
    (tmp_path / "empty").mkdir()
    claim_output_dir(tmp_path / "empty", "index", force=False, made_by=made_by)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    claim_output_dir(tmp_path / "full", "index", force=False, made_by=made_by)
    with pytest.raises(OutputExistsError, match="full: already holds the output; pass --force"):
        claim_output_dir(tmp_path / "full", "index", force=False, made_by=made_by, replace_own=False)
    claim_output_dir(tmp_path / "full", "index", force=True, made_by=made_by, replace_own=False)
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputExistsError, match="file: already holds a file, not a folder"):
        claim_output_dir(tmp_path / "file", "index", force=False, made_by=made_by)


def test_every_command_writing_an_out_folder_takes_force():
    """The commands of OUTPUT_NOUNS are all that write a folder at --out; each has --force."""
    from toolret.cli import build_parser
    from toolret.out_folders import OUTPUT_NOUNS

    parser = build_parser()
    for command in OUTPUT_NOUNS:
        args = parser.parse_args(_minimal(command))
        assert args.force is False, command


def _minimal(command: str) -> list[str]:
    required = {"catalog build": ["--dataset", "d"], "catalog clean": ["--catalog", "c"],
                "catalog synthesize": ["--name", "n"],
                "catalog select": ["--catalog", "c", "--split", "dev", "--name", "n"],
                "import-openapi": ["--spec", "s"], "import-mcp": ["--url", "http://x"],
                "index": ["--catalog", "c", "--method", "bm25"], "evaluate-index": ["--catalog", "c", "--index", "i"],
                "evaluate-grid": ["--catalog", "c", "--grid", "g"], "adapt": ["--catalog", "c"]}
    return [*command.split(), *required[command], "--out", "o"]
