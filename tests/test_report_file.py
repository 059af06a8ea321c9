"""Generated reports keep what a person wrote below the marker."""

import json

from toolret.report_file import NOTES_MARKER, write_report_file


def test_hand_written_tail_survives_regeneration_and_notes_are_appended(tmp_path):
    out = tmp_path / "r.md"
    write_report_file(out, "# v1\n", {"a": 1})
    first = out.read_text()
    assert first.startswith("# v1\n") and first.endswith(NOTES_MARKER + "\n")
    assert json.loads(first.split("```json\n")[1].split("\n```")[0]) == {"a": 1}
    out.write_text(first + "My analysis.\n")
    notes = tmp_path / "n.md"
    notes.write_text("Extra.\n")
    write_report_file(out, "# v2\n", {"a": 2}, notes)
    text = out.read_text()
    assert text.startswith("# v2\n") and "# v1" not in text
    assert text.split(NOTES_MARKER)[1] == "\nMy analysis.\n\nExtra.\n"
