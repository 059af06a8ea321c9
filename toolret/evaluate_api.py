"""The evaluation API: judgements (:class:`Qrels`), rankings (:class:`Run`), :func:`evaluate`, :func:`compare`.

Pure scoring and statistics, nothing else: this module imports no catalog code, no MLflow and no
Dagster (``tests/metrics/test_evaluate_api.py`` checks it in a fresh interpreter). The metric maths is
:mod:`toolret.metrics` (:func:`~toolret.metrics.per_query_metrics`, :func:`~toolret.metrics.aggregate`,
:func:`~toolret.metrics.bootstrap_cis`, :func:`~toolret.metrics.paired_test`); this module validates the
inputs, composes those functions and returns plain dataclasses. The catalog adapter is
:func:`toolret.evaluation.qrels_from_catalog`; MLflow reporting (:mod:`toolret.tracking.comparison`)
renders what :func:`compare` returns.

Example::

    >>> from toolret.evaluate_api import Qrels, Run, compare, evaluate
    >>> qrels = Qrels.from_dict({"q1": {"t1": 1, "t2": 1}, "q2": {"t3": 1}})
    >>> bm25 = Run.from_dict({"q1": {"t2": 3.1, "t9": 2.0, "t1": 1.2}, "q2": {"t1": 0.4, "t3": 2.5}})
    >>> bm25["q2"], bm25.scores("q2")
    (('t3', 't1'), (2.5, 0.4))
    >>> res = evaluate(bm25, qrels, ks=(1, 3), bootstrap_samples=200)
    >>> res.query_ids, res.means["recall@1"], res.means["mrr"]
    (('q1', 'q2'), 0.75, 1.0)
    >>> res.per_query["recall@1"].tolist()
    [0.5, 1.0]
    >>> worse = evaluate(Run.from_dict({"q1": ["t9", "t1"], "q2": ["t1", "t3"]}), qrels, ks=(1, 3))
    >>> cmp = compare({"bm25": res, "other": worse}, baseline="bm25", metric=["recall@1", "mrr"])
    >>> [(t.system, t.metric, t.reference, t.mean_diff) for t in cmp.tests]
    [('other', 'recall@1', 'bm25', -0.75), ('other', 'mrr', 'bm25', -0.5)]

Files: :meth:`Qrels.from_tsv` reads BEIR ``qrels/<split>.tsv``; :meth:`Run.from_jsonl` and
:meth:`Qrels.from_jsonl` read the ``<docs>.per_query.jsonl`` that ``toolret evaluate`` writes (its
``ranked`` field holds the top 10 only, so a run read back scores cutoffs up to 10, and MRR only where
the first relevant tool is in the top 10); :meth:`Run.from_ranking` takes a retriever's
:class:`toolret.roles.Ranking`.

Conventions (those of :mod:`toolret.metrics`): relevance is an integer and a tool is relevant when it
is above 0 (the metrics are binary: a grade of 2 counts as 1); the scored queries are the qrels'
queries with at least one relevant tool, in qrels order; a judged query missing from the run is scored
as an empty ranking (every metric 0), while a run query missing from the qrels is an error.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import toolret.metrics as tm
from toolret.atomic import atomic_path
from toolret.errors import EvaluationError

if TYPE_CHECKING:
    from toolret.roles import Ranking

DEFAULT_KS = (1, 3, 5, 10)
DEFAULT_SEED = 13  # params.yaml evaluation.seed
CUTOFF_FAMILIES = ("recall", "ndcg", "comp", "precision", "mrr")  # <family>@k; bare "mrr" has no cutoff
_METRIC = re.compile(r"^(?P<family>[a-z]+)(?:@(?P<k>\d+))?$")
_QRELS_HEADER = {"query-id", "query_id", "qid"}


def _check_id(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise EvaluationError(f"{where}: {what} must be a non-empty string, got {value!r}")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


_TREC_UNSAFE = re.compile(r"[\s%]")


def _trec_id(value: str) -> str:
    """A TREC id token: whitespace and ``%`` percent-encoded (``%20``, ``%25``), other ids as they are."""
    return _TREC_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode("utf-8")), value)


def _from_trec_id(token: str) -> str:
    from urllib.parse import unquote

    return unquote(token) if "%" in token else token


def _trec_fields(path: Path, n: int, kind: str) -> Iterator[tuple[str, list[str]]]:
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != n:
            raise EvaluationError(f"{path}:{lineno}: a TREC {kind} line has {n} fields, found {len(parts)}: {line!r}")
        yield f"{path}:{lineno}", parts


def _write_lines(path: Path, lines: list[str]) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text("".join(lines), encoding="utf-8")
    return path


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a leading byte order mark is tolerated
    except FileNotFoundError:
        raise EvaluationError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise EvaluationError(f"{path}: not valid UTF-8 ({e.reason} at byte {e.start})") from None


def _iter_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` per non-blank line (split on ``\\n`` only, as JSON Lines)."""
    for lineno, line in enumerate(_read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise EvaluationError(f"{where}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise EvaluationError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        yield where, obj


# --------------------------------------------------------------------------------------------- Qrels
def _per_query_lists(path: Path, field: str) -> Iterator[tuple[str, list[Any], dict[str, Any]]]:
    """``(query id, the record's list field, the record)`` per line of a per-query JSONL; a repeated query id
    or a ``field`` that is not a list is an error naming the file and line."""
    seen: set[str] = set()
    for where, obj in _iter_jsonl(path):
        qid = _check_id(obj.get("query_id"), "'query_id'", where)
        if qid in seen:
            raise EvaluationError(f"{where}: query {qid!r} appears twice")
        seen.add(qid)
        tools = obj.get(field)
        if not isinstance(tools, list):
            raise EvaluationError(f"{where}: query {qid!r}: {field!r} must be a list of tool ids")
        yield qid, tools, obj


class Qrels(Mapping[str, Mapping[str, int]]):
    """Relevance judgements: query id -> {tool id: integer relevance} (a read-only mapping).

    Build it with :meth:`from_dict`, :meth:`from_gold`, :meth:`from_tsv` or :meth:`from_jsonl` (a
    catalog's gold: :func:`toolret.evaluation.qrels_from_catalog`). A query may be judged with no
    relevant tool (every relevance <= 0); :func:`evaluate` skips it.
    """

    __slots__ = ("_judgements",)

    def __init__(self, judgements: Mapping[str, Mapping[str, int]]):
        checked: dict[str, dict[str, int]] = {}
        for qid, rels in judgements.items():
            _check_id(qid, "query id", "qrels")
            where = f"qrels: query {qid!r}"
            if not isinstance(rels, Mapping):
                raise EvaluationError(f"{where}: expected a mapping tool id -> relevance, got {type(rels).__name__}")
            row: dict[str, int] = {}
            for tid, rel in rels.items():
                _check_id(tid, "tool id", where)
                if not _is_int(rel):
                    raise EvaluationError(f"{where}: relevance of tool {tid!r} is {rel!r}, not an integer")
                row[tid] = int(rel)
            checked[qid] = row
        self._judgements = checked

    @classmethod
    def from_dict(cls, judgements: Mapping[str, Mapping[str, int]]) -> Qrels:
        """From ``{query id: {tool id: relevance}}`` (relevance an ``int``; ``1.0`` or ``True`` is an error)."""
        return cls(judgements)

    @classmethod
    def from_gold(cls, gold: Mapping[str, Iterable[str]]) -> Qrels:
        """From ``{query id: relevant tool ids}``: relevance 1 for each."""
        out: dict[str, dict[str, int]] = {}
        for qid, tools in gold.items():
            if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
                raise EvaluationError(f"qrels: query {qid!r}: expected a collection of tool ids, got {tools!r}")
            out[qid] = {t: 1 for t in sorted(tools, key=str)}
        return cls(out)

    @classmethod
    def from_tsv(cls, path: str | Path) -> Qrels:
        """From a BEIR qrels file: ``query-id<TAB>corpus-id<TAB>score`` lines, the header line optional.

        An exact duplicate line counts once; the same pair judged twice with different scores, a line
        without three fields and a non-integer score are errors naming the file, line and query id.
        """
        path = Path(path)
        out: dict[str, dict[str, int]] = {}
        for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
            if not line.strip():
                continue
            parts = [p.strip() for p in line.split("\t")]
            if lineno == 1 and parts[0].lower() in _QRELS_HEADER:
                continue
            where = f"{path}:{lineno}"
            if len(parts) != 3:
                raise EvaluationError(f"{where}: expected 3 tab-separated fields, got {len(parts)}")
            qid, tid, raw = parts
            _check_id(qid, "query id", where)
            _check_id(tid, "tool id", f"{where} (query {qid!r})")
            if not re.fullmatch(r"-?\d+", raw):
                raise EvaluationError(f"{where}: query {qid!r}: relevance of tool {tid!r} is {raw!r}, not an integer")
            rel = int(raw)
            previous = out.setdefault(qid, {}).get(tid)
            if previous is not None and previous != rel:
                raise EvaluationError(f"{where}: query {qid!r}: tool {tid!r} judged again with {rel} "
                                      f"(earlier {previous})")
            out[qid][tid] = rel
        return cls(out)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> Qrels:
        """The ``gold`` of each record of a per-query JSONL (``{"query_id", "gold": [...]}``), relevance 1."""
        return cls.from_gold({qid: tools for qid, tools, _ in _per_query_lists(Path(path), "gold")})

    def to_tsv(self, path: str | Path) -> Path:
        """Write the BEIR qrels layout (header line, one judgement per line, this object's order)."""
        path = Path(path)
        lines = ["query-id\tcorpus-id\tscore\n"]
        lines += [f"{q}\t{t}\t{r}\n" for q, rels in self._judgements.items() for t, r in rels.items()]
        path.write_text("".join(lines), encoding="utf-8")
        return path

    @classmethod
    def from_trec(cls, path: str | Path) -> Qrels:
        """From a TREC qrels file (``query_id 0 tool_id relevance`` lines; ids as :meth:`to_trec` writes them)."""
        out: dict[str, dict[str, int]] = {}
        for where, (qid, _, tid, raw) in _trec_fields(Path(path), 4, "qrels"):
            if not re.fullmatch(r"-?\d+", raw):
                raise EvaluationError(f"{where}: relevance {raw!r} is not an integer")
            out.setdefault(_from_trec_id(qid), {})[_from_trec_id(tid)] = int(raw)
        return cls(out)

    def to_trec(self, path: str | Path) -> Path:
        """Atomically write a TREC qrels file (what trec_eval, ranx and pytrec_eval read); an id holding
        whitespace or ``%`` is written percent-encoded."""
        return _write_lines(Path(path), [f"{_trec_id(q)} 0 {_trec_id(t)} {r}\n"
                                         for q, rels in self._judgements.items() for t, r in rels.items()])

    def gold(self, query_id: str) -> frozenset[str]:
        """The relevant tools (relevance > 0) of a query; empty for an unknown query."""
        return frozenset(t for t, r in self._judgements.get(query_id, {}).items() if r > 0)

    def __getitem__(self, query_id: str) -> Mapping[str, int]:
        return dict(self._judgements[query_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._judgements)

    def __len__(self) -> int:
        return len(self._judgements)

    def __repr__(self) -> str:
        return f"Qrels({len(self)} queries)"


# ----------------------------------------------------------------------------------------------- Run
class Run(Mapping[str, tuple[str, ...]]):
    """Rankings: query id -> tool ids best first, with optional scores (a read-only mapping).

    Build it with :meth:`from_dict`, :meth:`from_jsonl` or :meth:`from_ranking`. A tool id may occur
    once per ranked list (a repeat is an error naming the query).
    """

    __slots__ = ("_ranked", "_scores")

    def __init__(self, ranked: Mapping[str, Sequence[str]], scores: Mapping[str, Sequence[float]] | None = None):
        out: dict[str, tuple[str, ...]] = {}
        for qid, tools in ranked.items():
            _check_id(qid, "query id", "run")
            where = f"run: query {qid!r}"
            if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
                raise EvaluationError(f"{where}: expected a sequence of tool ids, got {type(tools).__name__}")
            first: dict[str, int] = {}
            for rank, tid in enumerate(tools, start=1):
                _check_id(tid, "tool id", where)
                if tid in first:
                    raise EvaluationError(f"{where}: tool {tid!r} is ranked twice (ranks {first[tid]} and {rank})")
                first[tid] = rank
            out[qid] = tuple(tools)
        checked_scores: dict[str, tuple[float, ...]] | None = None
        if scores is not None:
            checked_scores = {}
            for qid, values in scores.items():
                if qid not in out:
                    raise EvaluationError(f"run: query {qid!r} has scores but no ranking")
                if len(values) != len(out[qid]):
                    raise EvaluationError(f"run: query {qid!r}: {len(values)} scores for {len(out[qid])} tools")
                checked_scores[qid] = tuple(float(v) for v in values)
            missing = [q for q in out if q not in checked_scores]
            if missing:
                raise EvaluationError(f"run: query {missing[0]!r} has a ranking but no scores")
        self._ranked = out
        self._scores = checked_scores

    @classmethod
    def from_dict(cls, run: Mapping[str, Sequence[str] | Mapping[str, float]]) -> Run:
        """From ``{query id: [tool ids, best first]}`` or ``{query id: {tool id: score}}`` (TREC style:
        higher is better; equal scores keep the mapping's order). All values one kind or the other."""
        kinds = {isinstance(v, Mapping) for v in run.values()}
        if kinds != {True}:
            if True in kinds:
                raise EvaluationError("run: mix of ranked lists and {tool: score} mappings; use one kind")
            return cls(run)  # type: ignore[arg-type]
        ranked: dict[str, list[str]] = {}
        scores: dict[str, list[float]] = {}
        for qid, by_tool in run.items():
            items = list(by_tool.items())  # type: ignore[union-attr]
            for tid, s in items:
                if isinstance(s, bool) or not isinstance(s, (int, float, np.number)) or math.isnan(float(s)):
                    raise EvaluationError(f"run: query {qid!r}: score of tool {tid!r} is {s!r}, not a number")
            items.sort(key=lambda item: -float(item[1]))  # stable: ties keep their order
            ranked[qid] = [t for t, _ in items]
            scores[qid] = [float(s) for _, s in items]
        return cls(ranked, scores)

    @classmethod
    def from_ranking(cls, ranking: Ranking, query_ids: Sequence[str] | None = None,
                     tool_ids: Sequence[str] | None = None) -> Run:
        """From a retriever's :class:`~toolret.roles.Ranking` (``indices`` into ``tool_ids``,
        ``-1`` = no result, with their ``scores``); ``query_ids`` / ``tool_ids`` default to the ranking's."""
        qids = list(ranking.query_ids if query_ids is None else query_ids)
        tids = list(ranking.tool_ids if tool_ids is None else tool_ids)
        indices = np.asarray(ranking.indices)
        values = np.asarray(ranking.scores)
        if indices.ndim != 2 or indices.shape[0] != len(qids) or values.shape != indices.shape:
            raise EvaluationError(f"ranking: {len(qids)} query ids, indices of shape {indices.shape} and scores of "
                                  f"shape {values.shape}")
        ranked: dict[str, list[str]] = {}
        scores: dict[str, list[float]] = {}
        for row, qid in enumerate(qids):
            if qid in ranked:
                raise EvaluationError(f"ranking: query {qid!r} has two rows ({qids.index(qid)} and {row})")
            keep = indices[row] >= 0
            positions = indices[row][keep]
            if positions.size and positions.max() >= len(tids):
                raise EvaluationError(f"ranking: query {qid!r}: tool position {int(positions.max())} is outside "
                                      f"the {len(tids)} tool ids")
            ranked[qid] = [tids[i] for i in positions.tolist()]
            scores[qid] = values[row][keep].tolist()
        return cls(ranked, scores)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> Run:
        """From a per-query JSONL: ``{"query_id", "ranked": [...]}`` per line (``"scores"`` optional, on every
        line or none). ``toolret evaluate``'s ``<docs>.per_query.jsonl`` keeps the top 10 of each ranking."""
        path = Path(path)
        ranked: dict[str, list[str]] = {}
        scores: dict[str, list[float]] = {}
        for qid, tools, obj in _per_query_lists(path, "ranked"):
            ranked[qid] = tools
            if "scores" in obj:
                scores[qid] = obj["scores"]
        if scores and len(scores) != len(ranked):
            raise EvaluationError(f"{path}: 'scores' on {len(scores)} of {len(ranked)} lines (all or none)")
        return cls(ranked, scores or None)

    def to_jsonl(self, path: str | Path) -> Path:
        """Write ``{"query_id", "ranked"[, "scores"]}`` per query (UTF-8, one JSON object a line)."""
        path = Path(path)
        rows = []
        for qid, tools in self._ranked.items():
            row: dict[str, Any] = {"query_id": qid, "ranked": list(tools)}
            if self._scores is not None:
                row["scores"] = list(self._scores[qid])
            rows.append(json.dumps(row, ensure_ascii=False) + "\n")
        path.write_text("".join(rows), encoding="utf-8")
        return path

    @classmethod
    def from_trec(cls, path: str | Path) -> Run:
        """From a TREC run file (``query_id Q0 tool_id rank score tag``): each query's tools by descending
        score, ties by rank."""
        rows: dict[str, list[tuple[float, int, str]]] = {}
        for where, (qid, _, tid, rank, score, _tag) in _trec_fields(Path(path), 6, "run"):
            try:
                rows.setdefault(_from_trec_id(qid), []).append((-float(score), int(rank), _from_trec_id(tid)))
            except ValueError as err:
                raise EvaluationError(f"{where}: rank {rank!r} / score {score!r}: {err}") from err
        ordered = {q: sorted(r) for q, r in rows.items()}
        return cls({q: [t for _, _, t in r] for q, r in ordered.items()},
                   {q: [-s for s, _, _ in r] for q, r in ordered.items()})

    def to_trec(self, path: str | Path, tag: str = "toolret") -> Path:
        """Atomically write a TREC run file tagged ``tag``: ranks from 1 in this run's order, its scores (a run
        without scores: ``n - rank + 1``). A query with no ranked tool has no line (trec_eval ``-c`` and
        ranx's ``make_comparable`` score it 0)."""
        lines = []
        for qid, tools in self._ranked.items():
            scores = self._scores[qid] if self._scores is not None else [float(len(tools) - i) for i in range(len(tools))]
            lines += [f"{_trec_id(qid)} Q0 {_trec_id(t)} {rank} {s:.9g} {_trec_id(tag)}\n"
                      for rank, (t, s) in enumerate(zip(tools, scores), start=1)]
        return _write_lines(Path(path), lines)

    def scores(self, query_id: str) -> tuple[float, ...] | None:
        """The scores of a query's ranked tools (``None`` for a run without scores)."""
        return None if self._scores is None else self._scores[query_id]

    @property
    def has_scores(self) -> bool:
        return self._scores is not None

    def __getitem__(self, query_id: str) -> tuple[str, ...]:
        return self._ranked[query_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ranked)

    def __len__(self) -> int:
        return len(self._ranked)

    def __repr__(self) -> str:
        return f"Run({len(self)} queries{', scored' if self.has_scores else ''})"


# ------------------------------------------------------------------------------------------ evaluate
@dataclass(frozen=True, eq=False)
class EvalResult:
    """One system's scores over one set of queries.

    Attributes:
        query_ids: the scored queries, in order.
        per_query: metric -> ``[n_queries]`` float array (read-only), aligned with ``query_ids``; ``nan``
            where a value is unknown (only in results rebuilt by :meth:`from_rows`).
        means: metric -> mean over the queries.
        ci: metric -> ``(low, high)`` percentile-bootstrap interval of the mean (``{}`` without bootstrap).
        alpha: the intervals cover ``1 - alpha``.
        ranked: query id -> ranked tool ids of the scored queries (``None`` when unknown); with the
            per-query values it decides whether two results are identical in :func:`compare`.
    """

    query_ids: tuple[str, ...]
    per_query: Mapping[str, np.ndarray]
    means: dict[str, float]
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    alpha: float = 0.05
    ranked: Mapping[str, tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        n = len(self.query_ids)
        frozen = {}
        for m, values in self.per_query.items():
            arr = np.array(values, dtype=np.float64)
            if arr.shape != (n,):
                raise EvaluationError(f"metric {m!r}: {arr.shape} per-query values for {n} queries")
            arr.setflags(write=False)
            frozen[m] = arr
        object.__setattr__(self, "query_ids", tuple(self.query_ids))
        object.__setattr__(self, "per_query", frozen)

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]], means: Mapping[str, Any] | None = None,
                  ci: Mapping[str, Any] | None = None, alpha: float = 0.05) -> EvalResult:
        """Rebuild a result from per-query records (as in a per-query JSONL: ``query_id``, a number per
        metric, optionally ``ranked``). Every numeric field is a metric; a record without it gets ``nan``.
        ``means`` / ``ci`` (as in a result JSON; non-numeric entries ignored) default to the per-query
        means (over the known values) and no intervals."""
        rows = list(rows)
        qids = [_check_id(r.get("query_id"), "'query_id'", f"per-query record {i}") for i, r in enumerate(rows)]
        if len(set(qids)) != len(qids):
            dup = next(q for q in qids if qids.count(q) > 1)
            raise EvaluationError(f"per-query records: query {dup!r} appears twice")
        names: dict[str, None] = {}
        for r in rows:
            names.update((k, None) for k, v in r.items() if _is_number(v))
        per_query = {m: np.array([float(r[m]) if _is_number(r.get(m)) else np.nan for r in rows]) for m in names}
        if means is None:
            means = {m: float(np.nanmean(v)) for m, v in per_query.items() if np.any(~np.isnan(v))}
        ranked = None
        if all(isinstance(r.get("ranked"), list) for r in rows):
            ranked = {q: tuple(r["ranked"]) for q, r in zip(qids, rows)}
        return cls(tuple(qids), per_query,
                   {m: float(v) for m, v in means.items() if _is_number(v)},
                   {m: (float(v[0]), float(v[1])) for m, v in (ci or {}).items()
                    if isinstance(v, (list, tuple)) and len(v) == 2 and all(_is_number(x) for x in v)},
                   alpha, ranked)

    def rows(self) -> list[dict[str, Any]]:
        """``{"query_id", <metric>: value, ...}`` per query."""
        return [{"query_id": q, **{m: float(v[i]) for m, v in self.per_query.items()}}
                for i, q in enumerate(self.query_ids)]

    def signature(self) -> str | None:
        """A digest of the per-query results (query ids, every value, the rankings); ``None`` without
        per-query values (such a result is never identical to another)."""
        if not self.query_ids or not self.per_query:
            return None
        order = sorted(range(len(self.query_ids)), key=self.query_ids.__getitem__)
        h = hashlib.sha256()
        h.update(json.dumps([self.query_ids[i] for i in order]).encode("utf-8"))
        for m in sorted(self.per_query):
            h.update(m.encode("utf-8") + b"\0" + self.per_query[m][order].tobytes())
        h.update(json.dumps(None if self.ranked is None else [self.ranked.get(self.query_ids[i]) for i in order])
                 .encode("utf-8"))
        return h.hexdigest()


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _requested(metrics: Sequence[str] | None, ks: Sequence[int]) -> tuple[list[int], bool, bool, list[str] | None]:
    """``(cutoffs, precision, mrr_at_k, names)`` for :func:`toolret.metrics.per_query_metrics`; ``names``
    the output metrics in order (``None``: everything it returns)."""
    for k in ks:
        if not _is_int(k) or k < 1:
            raise EvaluationError(f"every cutoff must be a positive int, got {k!r}")
    if metrics is None:
        return [int(k) for k in ks], False, False, None
    if isinstance(metrics, str):
        metrics = [metrics]
    names: list[str] = []
    for spec in metrics:
        m = _METRIC.match(spec) if isinstance(spec, str) else None
        if not m or m.group("family") not in CUTOFF_FAMILIES:
            raise EvaluationError(f"unknown metric {spec!r}: expected one of {', '.join(CUTOFF_FAMILIES)}, "
                                  "optionally with a cutoff (recall@5); a bare family takes every k of ks")
        family, k = m.group("family"), m.group("k")
        if k is not None and int(k) < 1:
            raise EvaluationError(f"metric {spec!r}: the cutoff must be >= 1")
        expanded = [spec] if k is not None or family == "mrr" else [f"{family}@{int(c)}" for c in ks]
        if not expanded:
            raise EvaluationError(f"metric {spec!r} takes its cutoffs from ks, which is empty")
        names.extend(n for n in expanded if n not in names)
    cutoffs = sorted({int(n.partition("@")[2]) for n in names if "@" in n})
    return (cutoffs, any(n.startswith("precision@") for n in names), any(n.startswith("mrr@") for n in names),
            names)


def evaluate(run: Run, qrels: Qrels, ks: Sequence[int] = DEFAULT_KS, metrics: Sequence[str] | None = None,
             bootstrap_samples: int | None = 1000, seed: int = DEFAULT_SEED, alpha: float = 0.05) -> EvalResult:
    """Score a run against qrels: per-query values, means and bootstrap confidence intervals.

    Args:
        run: the rankings; each of its queries must be judged in ``qrels``.
        qrels: the judgements; its queries with a relevant tool are scored, in its order (a judged query
            missing from ``run`` scores 0 on every metric).
        ks: cutoffs; with ``metrics=None`` the result has ``recall@k``, ``ndcg@k``, ``comp@k`` per k (in
            that order, k by k) and ``mrr`` (whole ranking, no cutoff).
        metrics: metric names instead: ``recall@5``, ``ndcg@10``, ``comp@3``, ``precision@5``,
            ``mrr@10``, ``mrr``; a bare family (``"recall"``) means that family at every k of ``ks``.
        bootstrap_samples: replicates of the joint percentile bootstrap
            (:func:`toolret.metrics.bootstrap_cis`); ``0`` / ``None``: no intervals.
        seed: seed of the bootstrap's generator.
        alpha: the intervals cover ``1 - alpha``.

    Raises:
        EvaluationError: a run query absent from the qrels (named), an unknown metric or cutoff, or no
            query with a relevant tool.
    """

    if not isinstance(run, Run) or not isinstance(qrels, Qrels):
        raise TypeError(f"evaluate(run: Run, qrels: Qrels), got {type(run).__name__} and {type(qrels).__name__}")
    unjudged = [q for q in run if q not in qrels]
    if unjudged:
        more = ""
        if len(unjudged) > 1:
            listed = ", ".join(map(repr, unjudged[:5])) + (", ..." if len(unjudged) > 5 else "")
            more = f" ({len(unjudged)} run queries are not judged: {listed})"
        raise EvaluationError(f"run query {unjudged[0]!r} is not in the qrels{more}; evaluate a run against the "
                              "qrels of its own queries")
    cutoffs, precision, mrr_at_k, names = _requested(metrics, ks)
    gold = {q: qrels.gold(q) for q in qrels}
    qids, per_query = tm.per_query_metrics(run, gold, cutoffs, precision=precision, mrr_at_k=mrr_at_k)
    if not qids:
        raise EvaluationError("no query to score: no judged query has a relevant tool")
    if names is not None:
        per_query = {m: per_query[m] for m in names}
    means = tm.aggregate(per_query)
    ci = tm.bootstrap_cis(per_query, n_samples=bootstrap_samples, alpha=alpha, seed=seed) if bootstrap_samples else {}
    return EvalResult(tuple(qids), per_query, means, ci, alpha, {q: run.get(q, ()) for q in qids})


# ------------------------------------------------------------------------------------------- compare
def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down; Holm 1979), in the input order.

    With the m p-values sorted ascending, ``p_adj(i) = max_{j <= i} min(1, (m - j + 1) * p(j))``
    (1-based ranks). Rejecting ``p_adj < alpha`` controls the family-wise error rate at ``alpha``.
    """
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="mergesort")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted.tolist()


def collapse_identical(results: Mapping[str, EvalResult]) -> dict[str, list[str]]:
    """Group results with identical per-query results (:meth:`EvalResult.signature`).

    Returns:
        representative -> the names it stands for, one entry per distinct result, in ``results`` order:
        the first of a group represents it. A result without per-query values is never merged.
    """
    groups: dict[str, list[str]] = {}
    by_signature: dict[str, str] = {}
    for name, result in results.items():
        sig = result.signature()
        if sig is not None and sig in by_signature:
            groups[by_signature[sig]].append(name)
            continue
        if sig is not None:
            by_signature[sig] = name
        groups[name] = []
    return groups


@dataclass(frozen=True)
class PairedTest:
    """One paired test of a system against the reference on one metric (``mean_diff`` = system - reference)."""

    metric: str
    system: str
    reference: str
    test: str
    p_value: float
    mean_diff: float
    n: int
    p_holm: float
    significant: bool


@dataclass(frozen=True)
class ComparisonResult:
    """What :func:`compare` found.

    Attributes:
        systems: the distinct systems, in input order (an identical one is represented by the first).
        identical: representative -> the systems with identical per-query results it stands for.
        metrics: the compared metrics, in order (one Holm family each).
        reference: metric -> the reference system (the strongest baseline on that metric's mean).
        tests: one :class:`PairedTest` per distinct system other than the reference, metric by metric.
        test: the paired test method; alpha: the significance level of the Holm-adjusted p-values.
    """

    systems: list[str]
    identical: dict[str, list[str]]
    metrics: list[str]
    reference: dict[str, str]
    tests: list[PairedTest]
    test: str
    alpha: float

    def table(self) -> list[dict[str, Any]]:
        """The tests as plain rows (the :class:`PairedTest` fields)."""
        return [asdict(t) for t in self.tests]

    def get(self, system: str, metric: str) -> PairedTest | None:
        """The test of ``system`` on ``metric`` (``None`` for the reference, or an untested pair)."""
        return next((t for t in self.tests if t.system == system and t.metric == metric), None)


def compare(results: Mapping[str, EvalResult], baseline: str | Sequence[str] | None = None,
            metric: str | Sequence[str] | None = None, *, test: str = "randomization", n_samples: int = 10000,
            seed: int = 0, alpha: float = 0.05) -> ComparisonResult:
    """Paired tests of every system against the strongest baseline, Holm-adjusted per metric.

    Systems with identical per-query results are collapsed first (:func:`collapse_identical`): each
    distinct comparison is tested once and counted once by Holm. Per metric the reference is the
    baseline with the highest mean (the first on ties; a representative counts as a baseline when it or
    a system it stands for is one); every other distinct system is tested against it with
    :func:`toolret.metrics.paired_test` over the queries both scored (paired by query id, in sorted id
    order; ``nan`` values left out); the tests of one metric form one family for :func:`holm_adjust`.

    Args:
        results: system name -> its :class:`EvalResult`, in report order.
        baseline: the name(s) of the candidate references; ``None``: every system.
        metric: the metric(s) to compare; ``None``: those every result has a mean for (first result's order).
        test / n_samples / seed: passed to :func:`toolret.metrics.paired_test`.
        alpha: a test is ``significant`` when its Holm-adjusted p-value is below it.

    Raises:
        EvaluationError: a baseline that is not among ``results``.
    """

    names = list(results)
    pool_names = [baseline] if isinstance(baseline, str) else (None if baseline is None else list(baseline))
    unknown = [b for b in pool_names or [] if b not in results]
    if unknown:
        raise EvaluationError(f"baseline {unknown[0]!r} is not among the results ({', '.join(names)})")
    groups = collapse_identical(results)
    systems = list(groups)
    if metric is None:
        metrics = [m for m in (results[names[0]].means if names else {})
                   if all(m in results[s].means for s in systems)]
    else:
        metrics = [metric] if isinstance(metric, str) else list(metric)
    if pool_names is None:
        pool = systems
    else:
        pool = [s for s in systems if s in pool_names or any(o in pool_names for o in groups[s])]

    reference: dict[str, str] = {}
    raw: list[dict[str, Any]] = []
    for m in metrics:
        scored = [s for s in pool if _is_number(results[s].means.get(m))]
        if not scored:
            continue
        ref = max(scored, key=lambda s: results[s].means[m])
        reference[m] = ref
        ref_values = _values(results[ref], m)
        for s in systems:
            if s == ref:
                continue
            values = _values(results[s], m)
            qids = sorted(set(values) & set(ref_values))
            if not qids:
                continue
            a = np.array([values[q] for q in qids], dtype=float)
            b = np.array([ref_values[q] for q in qids], dtype=float)
            res = tm.paired_test(a, b, method=test, n_samples=n_samples, seed=seed)
            raw.append({"metric": m, "system": s, "reference": ref, "test": res["method"],
                        "p_value": float(res["p_value"]), "mean_diff": res["mean_diff"], "n": res["n"]})
    tests: list[PairedTest] = []
    for m in metrics:  # one family per metric
        family = [t for t in raw if t["metric"] == m]
        for t, adjusted in zip(family, holm_adjust([t["p_value"] for t in family])):
            tests.append(PairedTest(**t, p_holm=float(adjusted), significant=bool(adjusted < alpha)))
    return ComparisonResult(systems, {s: list(o) for s, o in groups.items() if o}, metrics, reference, tests,
                            test, alpha)


def _values(result: EvalResult, metric: str) -> dict[str, float]:
    """query id -> the metric's known (non-nan) per-query value."""
    arr = result.per_query.get(metric)
    if arr is None:
        return {}
    return {q: float(v) for q, v in zip(result.query_ids, arr) if not math.isnan(v)}


__all__ = ["CUTOFF_FAMILIES", "DEFAULT_KS", "ComparisonResult", "EvalResult", "EvaluationError", "PairedTest",
           "Qrels", "Run", "collapse_identical", "compare", "evaluate", "holm_adjust"]
