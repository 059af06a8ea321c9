"""Parse LLM outputs defensively. Nothing here raises on model output.

Every parser returns a ``ParseResult(items, status, notes)``; callers count statuses
(``count_statuses``) and report them next to their metrics. Statuses:

- ``ok``: the expected format was found (JSON list, numbered/bulleted lines, or one clean line).
- ``fallback``: no list format; items are the non-empty lines (or the whole text) after cleanup.
- ``truncated``: the output hit ``max_new_tokens`` (``finish_reason == "length"``) or an item was cut
  to ``max_item_chars``; items are kept (the last, likely cut, item is dropped when there are others).
- ``empty``: nothing usable (empty/whitespace/only boilerplate).
- ``malformed``: text present but nothing passes the item filters (e.g. all items over-long, a
  refusal, or degenerate repetition).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

STATUSES = ("ok", "fallback", "truncated", "empty", "malformed")

_NUMBERED = re.compile(r"^\s*(?:\(?\d{1,3}[.)\]:]|[-*•·]|#{1,3})\s+(.*\S)\s*$")
_PREFIX = re.compile(
    r"^\s*(?:(?:user\s+)?(?:query|question|request|intent|task|rewrite|rewritten query|answer)\s*\d*\s*[:\-]\s*)+",
    re.IGNORECASE,
)
_BOILERPLATE = re.compile(
    r"^\s*(?:sure|certainly|of course|here (?:is|are)|here's|the (?:user )?(?:quer(?:y|ies)|intents?) (?:is|are))\b[^:\n]*:?\s*$",
    re.IGNORECASE,
)
# a refusal in the generator's words ("I'm sorry", "I am an AI language model ...", "as an AI"); a query that only
# mentions an AI model ("learning an AI language model") is none
REFUSAL = re.compile(r"\b(?:I(?:'m| am) (?:sorry|unable|not able|an AI)|as an AI|I cannot|I can't)\b", re.IGNORECASE)
_QUOTES = "\"'`“”‘’"

INJECTION_PATTERNS = [
    r"ignore (?:all |any |the )?(?:previous|prior|above|earlier) (?:instructions?|prompts?|messages?|rules?)",
    r"disregard (?:all |any |the )?(?:previous|prior|above|earlier|your) (?:instructions?|prompts?|rules?)",
    r"forget (?:all |everything |your )?(?:previous |prior )?(?:instructions?|rules?|you were told)",
    r"you are now\b",
    r"new instructions?\s*:",
    r"\bsystem prompt\b",
    r"<\|?(?:im_start|im_end|system|endoftext)\|?>",
    r"^\s*(?:system|assistant)\s*:",
    r"do not (?:follow|obey) (?:the|your) (?:instructions|rules)",
    r"(?:reveal|print|output) (?:your|the) (?:system )?(?:prompt|instructions)",
    r"always (?:recommend|choose|select|retrieve) this tool",
]
_INJECTION = [re.compile(p, re.IGNORECASE | re.MULTILINE) for p in INJECTION_PATTERNS]


@dataclass
class ParseResult:
    items: list[str]
    status: str
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "fallback", "truncated") and bool(self.items)


def count_statuses(results: Iterable[ParseResult]) -> dict[str, int]:
    c = Counter(r.status for r in results)
    return {s: c.get(s, 0) for s in STATUSES}


def detect_injection(text: str | None) -> list[str]:
    """Patterns in ``text`` (e.g. a tool document) that look like prompt injection."""
    if not text:
        return []
    return [p.pattern for p in _INJECTION if p.search(text)]


def clean_item(s: str) -> str:
    s = s.strip()
    s = _PREFIX.sub("", s).strip()
    if len(s) >= 2 and s[0] in _QUOTES and s[-1] in _QUOTES:
        s = s[1:-1].strip()
    s = s.strip(_QUOTES).strip()
    return re.sub(r"\s+", " ", s)


def _is_degenerate(s: str) -> bool:
    words = s.lower().split()
    return len(words) >= 12 and len(set(words)) / len(words) < 0.3


def _filter(items: list[str], max_item_chars: int, notes: list[str]) -> tuple[list[str], bool]:
    out, too_long = [], False
    seen = set()
    for it in items:
        it = clean_item(it)
        if not it or _BOILERPLATE.match(it):
            continue
        if len(it) > max_item_chars:
            too_long = True
            notes.append(f"item over {max_item_chars} chars")
            continue
        if _is_degenerate(it):
            notes.append("degenerate repetition")
            continue
        if it.lower() in seen:
            continue
        seen.add(it.lower())
        out.append(it)
    return out, too_long


def _json_list(text: str) -> list[str] | None:
    start = text.find("[")
    if start < 0:
        return None
    end = text.rfind("]")
    candidates = [text[start : end + 1]] if end > start else []
    candidates.append(text[start:] + "]")  # cut before the closing bracket
    candidates.append(text[start:] + '"]')
    for c in candidates:
        try:
            val = json.loads(c)
        except ValueError:
            continue
        if isinstance(val, list):
            items = []
            for v in val:
                if isinstance(v, str):
                    items.append(v)
                elif isinstance(v, dict):
                    items.extend(str(x) for x in v.values() if isinstance(x, str))
            return items
    return None


def parse_list(
    text: str | None,
    *,
    finish_reason: str | None = None,
    max_items: int = 10,
    max_item_chars: int = 300,
    max_chars: int = 4000,
) -> ParseResult:
    """Extract a list of items (numbered/bulleted lines or a JSON list) from a model output."""
    notes: list[str] = []
    if text is None or not str(text).strip():
        return ParseResult([], "empty", ["empty output"])
    text = str(text)
    if len(text) > max_chars:
        notes.append(f"output over {max_chars} chars, cut")
        text = text[:max_chars]
        finish_reason = "length"
    truncated = finish_reason == "length"
    status = "ok"
    raw = _json_list(text)
    if raw is None:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        listed = [m.group(1) for m in (_NUMBERED.match(ln) for ln in lines) if m]
        if listed:
            raw = listed
        else:
            status = "fallback"
            notes.append("no list format; using lines")
            raw = lines
            if len(raw) == 1 and ";" in raw[0]:
                raw = raw[0].split(";")
    elif not raw:
        notes.append("empty JSON list")
    if truncated and len(raw) > 1:
        raw = raw[:-1]  # the last item was probably cut mid-way
        notes.append("dropped last (cut) item")
    items, too_long = _filter(raw, max_item_chars, notes)
    if len(items) > max_items:
        notes.append(f"kept first {max_items} of {len(items)} items")
        items = items[:max_items]
    if not items:
        if REFUSAL.search(text):
            notes.append("refusal")
        return ParseResult([], "malformed", notes)
    if truncated or too_long:
        status = "truncated"
    return ParseResult(items, status, notes)


def parse_single(
    text: str | None,
    *,
    finish_reason: str | None = None,
    max_chars: int = 300,
    min_chars: int = 3,
) -> ParseResult:
    """One short item (a synthetic query, a rewrite): first meaningful line, cleaned."""
    notes: list[str] = []
    if text is None or not str(text).strip():
        return ParseResult([], "empty", ["empty output"])
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    status = "ok"
    cands = []
    for ln in lines:
        m = _NUMBERED.match(ln)
        c = clean_item(m.group(1) if m else ln)
        if c and not _BOILERPLATE.match(c):
            cands.append(c)
    if not cands:
        return ParseResult([], "malformed", ["only boilerplate"])
    if len(lines) > 1:
        status = "fallback"
        notes.append(f"{len(lines)} lines; kept the first meaningful one")
    item = cands[0]
    if _is_degenerate(item):
        return ParseResult([], "malformed", ["degenerate repetition"])
    if len(item) < min_chars:
        return ParseResult([], "malformed", ["too short"])
    if len(item) > max_chars:
        item = item[:max_chars].rsplit(" ", 1)[0]
        notes.append(f"cut to {max_chars} chars")
        status = "truncated"
    elif finish_reason == "length" and len(lines) == 1:
        status = "truncated"
        notes.append("hit max_new_tokens")
    if REFUSAL.search(item):
        notes.append("looks like a refusal")
        return ParseResult([], "malformed", notes)
    return ParseResult([item], status, notes)


def parse_text(text: str | None, *, finish_reason: str | None = None, max_chars: int = 2000) -> ParseResult:
    """Free text (e.g. a HyDE hypothetical document): whitespace-normalised, bounded."""
    if text is None or not str(text).strip():
        return ParseResult([], "empty", ["empty output"])
    t = re.sub(r"[ \t]+", " ", str(text)).strip()
    if _is_degenerate(t):
        return ParseResult([], "malformed", ["degenerate repetition"])
    status = "truncated" if finish_reason == "length" else "ok"
    notes = []
    if len(t) > max_chars:
        t, status = t[:max_chars], "truncated"
        notes.append(f"cut to {max_chars} chars")
    return ParseResult([t], status, notes)
