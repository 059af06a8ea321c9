"""Issue 78 (8): bm25s sets its logger to DEBUG when imported, so every process with a root handler at DEBUG
(the gateway) got its DEBUG lines; toolret sets it to WARNING wherever it imports bm25s."""

from __future__ import annotations

import logging

from toolret.retrieval.bm25 import BM25Config, BM25Retriever


def test_bm25s_logs_warnings_only_once_toolret_used_it(caplog):
    retriever = BM25Retriever(BM25Config())
    with caplog.at_level(logging.DEBUG):
        retriever.index(["t1", "t2"], ["book a flight to rome", "weather in paris"])
        retriever.search(["flight"], 1)
    assert logging.getLogger("bm25s").level == logging.WARNING
    assert [r for r in caplog.records if r.name.startswith("bm25s") and r.levelno < logging.WARNING] == []
