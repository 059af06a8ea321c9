"""Discovery receipts: one JSON line per search, per forwarded call and per re-index, in a size-bounded
rotating log (:class:`logging.handlers.RotatingFileHandler`: ``FILE``, ``FILE.1`` ... ``FILE.<backups>``).

Events (every line has ``ts`` (UTC ISO time), ``event``, ``caller`` (the MCP client's name/version where it
said) and ``session`` (the MCP session, ``stdio``, or what the Python caller passed)):

- ``search``: ``query``, ``k``, ``min_score``, ``server``, ``category``, ``shown`` (``[{"id", "score"}]`` in the
  order shown, best first), ``withheld`` (tools of down servers), ``latency_ms``; with exploration on
  (:mod:`toolret.gateway.explore`) each shown entry also has ``rank`` (shown), ``ranked`` (the retriever's)
  and ``propensity``, and the receipt ``explore`` (``share``, ``seed``, ``eta``, ``swap``);
- ``call``: ``tool`` (its id), ``server``, ``shown_before`` (whether a search of this session showed it),
  ``is_error``, ``error`` (a gateway or protocol error, where one was raised), ``latency_ms``;
- ``tools``: the ids of every indexed tool after a re-index (so a summary knows the tools never shown).

:func:`summarise` reads a log and its backups: the top queries, tools never shown, calls of tools not shown
(``toolret receipts --log FILE``).
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKUPS = 3


class ReceiptLog:
    """Appends receipts to ``path`` (rotated at ``max_bytes``, ``backups`` old files kept)."""

    _ids = 0

    def __init__(self, path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES, backups: int = DEFAULT_BACKUPS) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ReceiptLog._ids += 1
        # a logger of its own (no propagation): two logs in one process never mix
        self._logger = logging.getLogger(f"toolret.gateway.receipts.{ReceiptLog._ids}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler = logging.handlers.RotatingFileHandler(self.path, maxBytes=max_bytes, backupCount=backups,
                                                             encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(self._handler)
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        ts = time.time()
        line = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z",
                "event": event, **fields}
        with self._lock:
            self._logger.info(json.dumps(line, ensure_ascii=False, default=str))
            self._handler.flush()
        return line

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._handler.close()


def log_files(path: str | Path) -> list[Path]:
    """``path`` and its rotated backups, oldest first."""
    path = Path(path)
    backups = sorted((p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit()),
                     key=lambda p: -int(p.suffix[1:]))
    return [*backups, *([path] if path.is_file() else [])]


def iter_receipts(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``("FILE:LINE", receipt)`` of ``path`` and its backups, oldest first; a line torn by a crash (not a
    JSON object) is skipped."""
    for f in log_files(path):
        for n, line in enumerate(f.read_text(encoding="utf-8").split("\n"), 1):  # JSON Lines: "\n" only
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line torn by a crash
            if isinstance(rec, dict):
                yield f"{f}:{n}", rec


def read_receipts(path: str | Path) -> list[dict[str, Any]]:
    return [rec for _, rec in iter_receipts(path)]


def summarise(path: str | Path, top: int = 10) -> dict[str, Any]:
    """Counts, the ``top`` queries, tools never shown (of those ever indexed), calls of tools not shown."""
    recs = read_receipts(path)
    searches = [r for r in recs if r.get("event") == "search"]
    calls = [r for r in recs if r.get("event") == "call"]
    indexed: set[str] = set()
    for r in recs:
        if r.get("event") == "tools":
            indexed.update(r.get("tools") or [])
    shown = Counter(h.get("id") for r in searches for h in r.get("shown") or [])
    latencies = sorted(r["latency_ms"] for r in searches if isinstance(r.get("latency_ms"), (int, float)))
    unshown_calls = Counter(r.get("tool") for r in calls if not r.get("shown_before"))
    return {
        "files": [str(f) for f in log_files(path)],
        "searches": len(searches), "calls": len(calls),
        "zero_hit_searches": sum(1 for r in searches if not r.get("shown")),
        "search_latency_ms_p50": latencies[len(latencies) // 2] if latencies else None,
        "top_queries": Counter(r.get("query") for r in searches).most_common(top),
        "top_shown": shown.most_common(top),
        "tools_indexed": len(indexed),
        "never_shown": sorted(indexed - set(shown)),
        "calls_not_shown": unshown_calls.most_common(),
        "call_errors": sum(1 for r in calls if r.get("is_error") or r.get("error")),
    }


def format_summary(s: dict[str, Any], limit: int = 50) -> str:
    head = (f"receipts: {s['searches']} searches ({s['zero_hit_searches']} with no hit; median "
            f"{s['search_latency_ms_p50']} ms), {s['calls']} calls ({s['call_errors']} failed) in "
            f"{', '.join(s['files']) or 'no files'}")
    lines = [head, "", "top queries:"]
    lines += [f"  {n:5d}  {q}" for q, n in s["top_queries"]] or ["  (none)"]
    lines += ["", "most shown tools:"]
    lines += [f"  {n:5d}  {t}" for t, n in s["top_shown"]] or ["  (none)"]
    never = s["never_shown"]
    lines += ["", f"tools never shown ({len(never)} of {s['tools_indexed']} indexed):"]
    lines += [f"  {t}" for t in never[:limit]] + ([f"  ... {len(never) - limit} more"] if len(never) > limit else [])
    if not never:
        lines.append("  (none)")
    lines += ["", "calls of tools not shown in an earlier search of their session:"]
    lines += [f"  {n:5d}  {t}" for t, n in s["calls_not_shown"]] or ["  (none)"]
    return "\n".join(lines)


__all__ = ["ReceiptLog", "format_summary", "iter_receipts", "log_files", "read_receipts", "summarise"]
