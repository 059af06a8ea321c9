"""What a rewriter changes in a request: the constraints a rewrite keeps or drops, and the copies.

A *constraint* here is a detail a tool call needs that a rewrite can lose: a number (``top-5``, ``2019``),
a quoted string, or a run of capitalised words that is not the request's first word (a title or a name:
``Mulholland Drive``, ``Breaking Bad``). It is kept when it occurs in the rewrite (case-insensitive). The
rule is a plain reading, written down so that the report's counts can be checked by hand; it does not
judge whether a dropped constraint mattered to the retriever.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_NUMBER = re.compile(r"(?:\b[A-Za-z]+-)?\d+(?:[.,]\d+)*")
_QUOTED = re.compile(r"\"([^\"]+)\"|(?<!\w)'([^']{2,})'(?!\w)")  # an apostrophe (I'm, users') is no quote
_WORD = r"[A-Z](?:[\w&-]|'(?=\w)|\.(?=\w))*"  # a capitalised word; an apostrophe or a dot only inside it
_CAPITALISED = re.compile(rf"\b{_WORD}(?:\s+(?:(?:of|the|and|de|la|&)\s+)?{_WORD})*")


def constraints(request: str) -> list[str]:
    """The request's constraints, in order of appearance, each once."""
    found: list[tuple[int, str]] = [(m.start(), m.group(0)) for m in _NUMBER.finditer(request)]
    found += [(m.start(), m.group(1) or m.group(2)) for m in _QUOTED.finditer(request)]
    for sentence in re.finditer(r"[^.?!]+(?:[.?!]+(?=\s|$)|$)|[.?!]+", request):  # each sentence's first word is
        first = re.match(r"\s*\S+", sentence.group(0))                         # capitalised as a sentence start
        first_end = sentence.start() + (first.end() if first else 0)
        for m in _CAPITALISED.finditer(sentence.group(0)):
            text, at = m.group(0).strip(), sentence.start() + m.start()
            if at < first_end:  # drop the sentence's first word
                text = re.sub(r"^(?:(?:of|the|and|de|la|&)\s+)*", "", text.split(None, 1)[1]) if " " in text else ""
            text = re.sub(r"(?:\s+(?:of|the|and|de|la|&))*\s+I(?:'\w+)?$", "", text)  # "... and I" is no name
            if text and len(text) > 1 and not re.fullmatch(r"I'\w+", text):  # nor I'm / I've
                found.append((at, text))
    seen: dict[str, None] = {}
    for _, text in sorted(found):
        if not any(text.lower() in other.lower() for other in seen if other != text):
            seen.setdefault(text, None)
    return list(seen)


def kept_and_dropped(request: str, rewrite: str) -> tuple[list[str], list[str]]:
    """``(kept, dropped)`` constraints of ``request`` in ``rewrite``."""
    low = rewrite.lower()
    cs = constraints(request)
    return [c for c in cs if c.lower() in low], [c for c in cs if c.lower() not in low]


def change_rows(rewrites: Iterable[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first ``n`` rewrites (in the order given) with their kept / dropped constraints; each row's
    ``copy``: the rewrite is the request verbatim."""
    rows = []
    for r in rewrites:
        if len(rows) == n:
            break
        kept, dropped = kept_and_dropped(r["text"], r["rewrite"])
        rows.append({"query_id": r.get("query_id"), "request": r["text"], "rewrite": r["rewrite"], "kept": kept,
                     "dropped": dropped, "copy": r["rewrite"].strip() == r["text"].strip(),
                     "fallback": bool(r.get("fallback"))})
    return rows


def change_counts(rewrites: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Over all rewrites: copies of the request, fallbacks, constraints, and how many were kept / dropped."""
    rows = change_rows(rewrites, len(rewrites))
    return {"rewrites": len(rows), "copies": sum(r["copy"] for r in rows),
            "fallbacks": sum(r["fallback"] for r in rows),
            "with_constraints": sum(bool(r["kept"] or r["dropped"]) for r in rows),
            "constraints": sum(len(r["kept"]) + len(r["dropped"]) for r in rows),
            "kept": sum(len(r["kept"]) for r in rows), "dropped": sum(len(r["dropped"]) for r in rows)}


__all__ = ["change_counts", "change_rows", "constraints", "kept_and_dropped"]
