"""Generated reports keep what a person wrote below the marker; their numbers live in a JSON record."""

import json

from toolret.report_file import NOTES_MARKER, record_path, write_report_file


def test_hand_written_tail_survives_regeneration_and_notes_are_appended(tmp_path):
    out = tmp_path / "r.md"
    write_report_file(out, "# v1\n", {"a": 1})
    first = out.read_text()
    assert first.startswith("# v1\n") and first.endswith(NOTES_MARKER + "\n")
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1}
    out.write_text(first + "My analysis.\n")
    notes = tmp_path / "n.md"
    notes.write_text("Extra.\n")
    write_report_file(out, "# v2\n", {"a": 2}, notes)
    text = out.read_text()
    assert text.startswith("# v2\n") and "# v1" not in text
    assert text.split(NOTES_MARKER)[1] == "\nMy analysis.\n\nExtra.\n"
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 2}


def test_a_docs_page_links_its_record_under_results_and_holds_no_json(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    out = write_report_file(docs / "m_results.md", "# m\n\n| a |\n|---|\n| 1 |\n", {"grid": {"x": [0.5, 0.25]}})
    record = tmp_path / "results" / "reports" / "m_results.json"
    assert record_path(out) == record
    assert json.loads(record.read_text()) == {"grid": {"x": [0.5, 0.25]}}
    text = out.read_text()
    assert "```json" not in text and "0.25" not in text
    assert "](../results/reports/m_results.json)" in text
