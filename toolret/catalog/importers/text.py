"""Text helpers shared by the importers: the words of an identifier, a one-line schema summary, a slug."""

from __future__ import annotations

import re
from typing import Any


def name_words(name: str) -> str:
    """The words of an identifier (``renewLoan`` / ``search_flights`` -> ``renew loan`` / ``search flights``),
    so that lexical retrievers match them; ``""`` when that adds nothing."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    words = re.sub(r"[^A-Za-z0-9]+", " ", words).strip().lower()
    return "" if words == name.lower() else words


def schema_summary(schema: Any, depth: int = 0) -> str:
    """A short type description: ``string (date)``, ``array of integer``, ``object {a: string (required)}``."""
    if not isinstance(schema, dict):
        return "any"
    kind = schema.get("type")
    kind = "/".join(map(str, kind)) if isinstance(kind, list) else kind
    if isinstance(schema.get("enum"), list):
        return f"{kind or 'value'} (one of {', '.join(map(str, schema['enum'][:12]))})"
    for key, sep in (("oneOf", " | "), ("anyOf", " | "), ("allOf", " & ")):
        if isinstance(schema.get(key), list):
            return sep.join(schema_summary(s, depth + 1) for s in schema[key])
    if kind == "array" or "items" in schema:
        return f"array of {schema_summary(schema.get('items'), depth + 1)}"
    props = schema.get("properties")
    if isinstance(props, dict) and props:
        if depth >= 2:
            return "object"
        required = set(schema.get("required") or [])
        inner = ", ".join(f"{k}: {schema_summary(v, depth + 1)}{' (required)' if k in required else ''}"
                          for k, v in props.items())
        return f"object {{{inner}}}"
    text = str(kind or ("object" if props is not None else "any"))
    return f"{text} ({schema['format']})" if isinstance(schema.get("format"), str) else text


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


__all__ = ["name_words", "schema_summary", "slug"]
