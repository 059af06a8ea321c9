"""BM25 tokenization options: the Snowball stemmer and identifier splitting (``params.yaml: bm25``)."""

from __future__ import annotations

import pytest

from toolret.retrieval.bm25 import BM25Config, BM25Retriever, split_identifier_words

DOCS = {"searchBooks": "searchBooks: look up titles in the library catalog",
        "get_weather": "get_weather: the forecast of a city",
        "listMovies": "listMovies: films showing tonight"}


def _top(config: BM25Config, query: str) -> list[str]:
    r = BM25Retriever(config)
    r.index(list(DOCS), list(DOCS.values()))
    return r.search([query], k=3).ranked_ids(0)


def test_find_a_book_needs_both_stemming_and_identifier_splitting() -> None:
    assert _top(BM25Config(), "find a book") == []  # "searchbooks" is one token, "book" != "books"
    assert _top(BM25Config(stemmer="english"), "find a book") == []
    assert _top(BM25Config(split_identifiers=True), "find a book") == []  # "Books" vs "book"
    assert _top(BM25Config(stemmer="english", split_identifiers=True), "find a book") == ["searchBooks"]
    # an exact identifier still matches with splitting on
    assert _top(BM25Config(split_identifiers=True), "get_weather")[0] == "get_weather"


def test_identifier_words() -> None:
    assert split_identifier_words("searchBooks") == "searchBooks search Books"
    assert split_identifier_words("get_user_id") == "get_user_id get user id"
    assert split_identifier_words("HTTPServer2go") == "HTTPServer2go HTTP Server 2 go"
    assert split_identifier_words("plain words stay") == "plain words stay"


def test_options_survive_save_and_load(tmp_path) -> None:
    r = BM25Retriever(BM25Config(stemmer="english", split_identifiers=True))
    r.index(list(DOCS), list(DOCS.values()))
    r.save(tmp_path / "bm25")
    loaded = BM25Retriever.load(tmp_path / "bm25")
    assert loaded.search(["find a book"], k=3).ranked_ids(0) == ["searchBooks"]


def test_an_unknown_stemmer_names_the_key() -> None:
    with pytest.raises(ValueError, match="bm25.stemmer: unknown algorithm 'klingon'"):
        _top(BM25Config(stemmer="klingon"), "find a book")
