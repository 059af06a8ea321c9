"""What a rewriter changes: constraints (numbers, quoted strings, capitalised names) kept or dropped."""

from __future__ import annotations

from toolret.methods.qta.changes import change_counts, change_rows, constraints, kept_and_dropped


def test_constraints_are_numbers_quotes_and_names_not_the_sentence_start():
    assert constraints("Who has an earlier release date, The Double Life of Veronique or Mulholland Drive?") == [
        "The Double Life of Veronique", "Mulholland Drive"]
    assert constraints("Who directed the top-1 rated movie?") == ["top-1"]
    assert constraints('Give me the top 5 songs of "Abbey Road" by The Beatles') == ["5", "Abbey Road", "The Beatles"]
    assert constraints("I need a review for Breaking Bad") == ["Breaking Bad"]  # "I" is no constraint
    assert constraints("show me some popular movies") == []
    # apostrophes are no quotes, and the speaker is no name
    assert constraints("I'm a Leo, and I would like to know more about users' requests") == ["Leo"]
    assert constraints("I'm watching The Last Of Us and I need more") == ["The Last Of Us"]
    # every sentence starts with a capital; a name does not run across a sentence end
    assert constraints("Can you check ABC Flights? It is on Broadway. Which gate?") == ["ABC Flights", "Broadway"]


def test_kept_and_dropped_are_case_insensitive_matches_in_the_rewrite():
    kept, dropped = kept_and_dropped("Top 10 tracks of Daft Punk in 2013", "list the top tracks of daft punk")
    assert kept == ["Daft Punk"] and dropped == ["10", "2013"]


def test_counts_over_rewrites_count_copies_fallbacks_and_constraints():
    rewrites = [{"query_id": "a", "text": "Songs by Queen", "rewrite": "Songs by Queen"},
                {"query_id": "b", "text": "Movies of 1999", "rewrite": "search movies", "fallback": False},
                {"query_id": "c", "text": "hello", "rewrite": "hello", "fallback": True}]
    assert change_counts(rewrites) == {"rewrites": 3, "copies": 2, "fallbacks": 1, "with_constraints": 2,
                                       "constraints": 2, "kept": 1, "dropped": 1}
    (first,) = change_rows(rewrites, 1)
    assert first["copy"] and first["kept"] == ["Queen"] and first["dropped"] == []
