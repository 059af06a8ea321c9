"""JSONL artifacts: records and meta round-trip, run info stays out of the artifact, bad files are named."""

import json

import pytest

from toolret.errors import CatalogError
from toolret.jsonl_artifacts import meta_path, read_jsonl, write_jsonl


def test_records_and_meta_round_trip_and_run_info_goes_to_its_sidecar(tmp_path):
    out = tmp_path / "data" / "x" / "gen.jsonl"
    records = [{"id": "a", "text": "café"}, {"id": "b", "text": ""}]
    write_jsonl(out, records, {"kind": "k", "run_info": {"seconds": 3}})
    assert read_jsonl(out) == records
    assert meta_path(out) == tmp_path / "data" / "x" / "gen.meta.json"
    assert json.loads(meta_path(out).read_text()) == {"kind": "k"}
    assert json.loads((tmp_path / "data" / "run_info" / "x" / "gen.meta.json").read_text()) == {"seconds": 3}
    assert sorted(p.name for p in out.parent.iterdir()) == ["gen.jsonl", "gen.meta.json"]  # no temp files left


def test_missing_file_and_bad_lines_name_the_file_and_line(tmp_path):
    with pytest.raises(CatalogError, match=r"nope\.jsonl: run the stage"):
        read_jsonl(tmp_path / "nope.jsonl", missing="run the stage")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(CatalogError, match=r"bad\.jsonl: line 3 is not JSON"):
        read_jsonl(bad)
    bad.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(CatalogError, match=r"bad\.jsonl: line 2 is not a JSON object"):
        read_jsonl(bad)


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_record_holding_a_unicode_line_separator_reads_back(tmp_path, separator):
    """JSONL is split on "\\n" only: str.splitlines() also splits on U+2028, U+2029 and NEL, which JSON written
    with ensure_ascii=False keeps raw inside strings (ToolBench documents hold some)."""
    path = tmp_path / "tools.jsonl"
    records = [{"id": "a", "text": f"first{separator}second"}, {"id": "b", "text": "plain"}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    assert read_jsonl(path) == records
