"""adapt's own pass over a catalog's corpus reads JSON Lines as the loaders do: split on "\\n" only."""

import json

import pytest

from toolret.adapt.user_catalog import load_tools
from toolret.errors import AdaptInputError


def test_duplicate_ids_are_named_when_their_documents_hold_a_unicode_line_separator(tmp_path):
    folder = tmp_path / "cat"
    folder.mkdir()
    rows = [{"_id": "t1", "title": "a", "text": "Books a table\u2028for two."},
            {"_id": "t1", "title": "b", "text": "Cancels\u2029a booking."}]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                         encoding="utf-8")
    with pytest.raises(AdaptInputError, match=r"duplicate tool ids: 't1'"):
        load_tools(folder)
