"""Tool-document expansion with synthetic queries (Re-Invoke Sec. 3.1, 4.3) and copy aggregation.

Each synthetic query makes one expanded copy of its tool's document; the tool is represented by the
mean (paper default) or max over its copies. With L2-normalised copy embeddings and an un-renormalised
mean vector, ``<intent, mean(copies)> == mean(<intent, copy>)``: averaging embeddings IS averaging cosine
similarities, so "mean embedding" and the paper's "mean similarity score" coincide. Max cannot be a
single vector: it is taken over per-copy similarities (:func:`aggregate_scores`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

APPEND_TEMPLATE = "Documentation: {doc} Query: {query}"


def expanded_text(doc: str, query: str, mode: str = "append") -> str:
    """One expanded copy: ``"Documentation: <doc> Query: <q>"`` (append) or ``"<q>"`` (synthetic_only)."""
    if mode == "append":
        return APPEND_TEMPLATE.format(doc=doc, query=query)
    if mode == "synthetic_only":
        return query
    raise ValueError(f"unknown expansion mode {mode!r}")


def build_copies(documents: Sequence[str], queries: Sequence[Sequence[str]] | None, mode: str = "append",
                 n: int | None = None) -> tuple[list[str], np.ndarray, int]:
    """Expanded copies of every tool.

    Args:
        documents: one document per tool.
        queries: per tool, its synthetic queries (``None`` = no query generator: one copy = the document).
        mode: ``append`` or ``synthetic_only``.
        n: use at most the first ``n`` queries of each tool.

    Returns:
        ``(texts, owner, n_fallback)``: copy texts, ``owner[i]`` = tool position of copy ``i``, and the
        number of tools without any usable query (they keep one copy: their plain document).
    """
    texts: list[str] = []
    owner: list[int] = []
    fallback = 0
    for t, doc in enumerate(documents):
        qs = [] if queries is None else [q for q in queries[t] if q][: n if n is not None else None]
        if not qs:
            fallback += queries is not None
            texts.append(doc)
            owner.append(t)
            continue
        for q in qs:
            texts.append(expanded_text(doc, q, mode))
            owner.append(t)
    return texts, np.asarray(owner, dtype=np.int64), fallback


def aggregate_embeddings(copy_emb: np.ndarray, owner: np.ndarray, n_tools: int) -> np.ndarray:
    """Mean of each tool's copy embeddings (not re-normalised; see module docstring)."""
    copy_emb = np.asarray(copy_emb, dtype=np.float64)
    sums = np.zeros((n_tools, copy_emb.shape[1]), dtype=np.float64)
    np.add.at(sums, owner, copy_emb)
    counts = np.bincount(owner, minlength=n_tools).astype(np.float64)
    if (counts == 0).any():
        raise ValueError(f"{int((counts == 0).sum())} tools have no copy")
    return (sums / counts[:, None]).astype(np.float32)


def aggregate_scores(copy_scores: np.ndarray, owner: np.ndarray, n_tools: int, how: str = "mean") -> np.ndarray:
    """``[n_queries, n_copies]`` copy scores -> ``[n_queries, n_tools]`` tool scores (mean or max)."""
    copy_scores = np.asarray(copy_scores, dtype=np.float64)
    nq = copy_scores.shape[0]
    counts = np.bincount(owner, minlength=n_tools)
    if (counts == 0).any():
        raise ValueError(f"{int((counts == 0).sum())} tools have no copy")
    if how == "mean":
        out = np.zeros((nq, n_tools), dtype=np.float64)
        np.add.at(out.T, owner, copy_scores.T)
        return out / counts[None, :]
    if how == "max":
        out = np.full((nq, n_tools), -np.inf, dtype=np.float64)
        np.maximum.at(out.T, owner, copy_scores.T)
        return out
    raise ValueError(f"unknown aggregation {how!r}")
