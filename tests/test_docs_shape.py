"""Docs a newcomer reads: ``docs/`` small, no page too long, no JSON dumps in Markdown (numbers live in the
records under ``results/``, which the pages link)."""

from __future__ import annotations

from toolret.stages import ROOT

MAX_TOTAL_LINES = 3000
MAX_PAGE_LINES = 400


def _pages():
    return sorted((ROOT / "docs").rglob("*.md"))


def test_docs_are_short_and_hold_no_json_dumps() -> None:
    lines = {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in _pages()}
    assert sum(lines.values()) <= MAX_TOTAL_LINES, lines
    assert not {p: n for p, n in lines.items() if n > MAX_PAGE_LINES}
    assert not [p for p in _pages() if "```json" in p.read_text(encoding="utf-8")]


def test_every_generated_report_links_an_existing_record() -> None:
    from toolret.report_file import NOTES_MARKER, record_path

    reports = [p for p in _pages() if NOTES_MARKER in p.read_text(encoding="utf-8")]
    assert len(reports) >= 4
    for page in reports:
        assert record_path(page).is_file(), page
        assert f"({'../results/reports/' + page.stem}.json)" in page.read_text(encoding="utf-8"), page
