"""BM25 retriever on bm25s (Lucene variant, k1=1.2, b=0.75, English stopwords by default)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from toolret.atomic import atomic_directory
from toolret.config import StrictModel
from toolret.registry import COMPONENT_FILE, write_component_meta
from toolret.roles import Ranking, default_query_ids


def _bm25s():
    """``bm25s``, its logger at WARNING: bm25s sets it to DEBUG when imported, which floods any process
    whose root handler takes DEBUG (the gateway, a server) with its lines."""
    import logging

    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


class BM25Config(StrictModel):
    """``params.yaml: bm25`` (bm25s defaults of the Lucene variant)."""

    k1: float = 1.2
    b: float = 0.75
    stopwords: str | None = "en"
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    # PyStemmer algorithm (e.g. "english"; None: no stemming): "book" matches "books"
    stemmer: str | None = None
    # split identifiers before tokenizing: "searchBooks" / "search_books" -> "search Books" / "search books"
    split_identifiers: bool = False

    def to_dict(self) -> dict:
        """The settings; the tokenization options only where set, so that what was saved or keyed before they
        existed (indexes, the committed rerankers' first-stage keys) reads the same."""
        return {k: v for k, v in super().to_dict().items()
                if not (k == "stemmer" and v is None or k == "split_identifiers" and v is False)}


_CAMEL = None


def _stemmer(algorithm: str):
    """PyStemmer's ``stemWords`` for ``algorithm`` (one stemmer per thread: PyStemmer objects are not
    thread-safe and the server searches concurrently)."""
    import threading

    import Stemmer

    local = _STEMMERS.setdefault(algorithm, threading.local())
    if not hasattr(local, "stem"):
        try:
            local.stem = Stemmer.Stemmer(algorithm).stemWords
        except KeyError:
            raise ValueError(f"bm25.stemmer: unknown algorithm {algorithm!r} (PyStemmer has {Stemmer.algorithms()})") from None
    return local.stem


_STEMMERS: dict = {}


def split_identifier_words(text: str) -> str:
    """``text`` with camelCase, PascalCase, snake_case and letter-digit boundaries made spaces (the original
    identifier kept too, so an exact name still matches): ``"searchBooks v2"`` -> ``"searchBooks search Books v2"``.

    Example:
        >>> split_identifier_words("getUserID by_name")
        'getUserID get User ID by_name by name'
    """
    import re

    global _CAMEL
    if _CAMEL is None:
        _CAMEL = (re.compile(r"[A-Za-z0-9]+(?:[_\-][A-Za-z0-9]+)+|[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*|[A-Za-z]+[0-9]+[A-Za-z0-9]*"),
                  re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+"))
    ident, word = _CAMEL
    return ident.sub(lambda m: m.group(0) + " " + " ".join(word.findall(m.group(0))), text)


class BM25Retriever:
    """Sparse lexical retriever. Only documents sharing a term with the query are results (a ranking may
    hold fewer than k; ``-1`` pads it).

    Example:
        >>> r = BM25Retriever()
        >>> r.index(["a", "b"], ["weather forecast for a city", "movie search by title"])
        >>> r.search(["what is the weather"], k=1).ranked_ids(0)
        ['a']
    """

    name = "bm25"
    # search() only reads the index (bm25s ``retrieve``, one thread per call): the server runs concurrent
    # searches without a lock (toolret.roles.concurrent_safe)
    concurrent_search = True

    def __init__(self, config: BM25Config | None = None) -> None:
        self.config = config or BM25Config()
        self._model = None
        self.tool_ids: list[str] = []

    def fit(self, catalog) -> None:
        """Unsupervised: nothing to learn."""

    def _tokenize(self, texts: Sequence[str]):
        bm25s = _bm25s()

        texts = [split_identifier_words(t) for t in texts] if self.config.split_identifiers else list(texts)
        stemmer = _stemmer(self.config.stemmer) if self.config.stemmer else None
        return bm25s.tokenize(texts, stopwords=self.config.stopwords, stemmer=stemmer, show_progress=False)

    def index(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None:
        bm25s = _bm25s()

        self.tool_ids = list(tool_ids)
        self._model = bm25s.BM25(k1=self.config.k1, b=self.config.b, method=self.config.method)
        self._model.index(self._tokenize(documents), show_progress=False)

    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking:
        k = min(k, len(self.tool_ids))
        tokens = self._tokenize(queries)
        indices, scores = self._model.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        indices = np.asarray(indices, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float32)
        # bm25s fills the top k with arbitrary zero-score documents when fewer than k share a term with
        # the query: those are not results (``-1``), so a query with no match retrieves nothing.
        indices[scores <= 0] = -1
        scores[scores <= 0] = -np.inf
        return Ranking(default_query_ids(len(queries), query_ids), self.tool_ids, indices, scores)

    def save(self, path: str | Path) -> None:
        with atomic_directory(path) as tmp:
            self._model.save(str(tmp / "bm25s"))
            write_component_meta(tmp, self.name, config=self.config.to_dict(), tool_ids=self.tool_ids)

    @classmethod
    def load(cls, path: str | Path) -> BM25Retriever:
        bm25s = _bm25s()

        meta = json.loads((Path(path) / COMPONENT_FILE).read_text(encoding="utf-8"))
        r = cls(BM25Config(**meta["config"]))
        r.tool_ids = meta["tool_ids"]
        r._model = bm25s.BM25.load(str(Path(path) / "bm25s"))
        return r
