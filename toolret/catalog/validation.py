"""Semantic validation of a :class:`~toolret.catalog.model.Catalog` with Great Expectations 1.x.

The loaders reject what cannot be parsed (with file:line); this module checks what a parsed catalog
must satisfy, over pandas frames built from it (tools, document variants, queries, qrels):

======================  ========  ===========================================================
check                   severity  what
======================  ========  ===========================================================
tools.present           error     at least one tool
tools.unique_ids        error     tool ids are unique
docs.known_variant      error     document variants are ``original``/``cleaned``/``human``
docs.non_empty          error     every document variant has visible text
docs.length             error     1 <= len(document) <= 20,000 characters
queries.unique_ids      error     query ids are unique
queries.non_empty       error     every query has visible text
queries.length          error     1 <= len(query) <= 2,000 characters
queries.known_split     error     split is train/dev/test
splits.disjoint         error     a query id belongs to one split only
splits.test_present     error     there are test queries (``splits.train_present``: train queries, for a
                                  training-only catalog: ``provenance["purpose"] == "training"``; no split
                                  check for a serving catalog, ``"serving"``: see ``model.PURPOSES``)
splits.no_text_leak     warning   no test/dev query has the same text as a train query
qrels.known_tools       error     every judged tool exists
qrels.known_queries     error     every judged query exists
test.has_gold           error     every test query has at least one relevant tool
======================  ========  ===========================================================

:func:`validate_catalog` returns a :class:`ValidationReport` whose ``success`` is false only for
failed *error* checks; warnings are reported but do not fail. GX is imported inside the function
(the import takes ~3 s). Use from a Dagster asset check::

    report = validate_catalog(catalog)
    return dg.AssetCheckResult(passed=report.success, metadata=report.to_metadata(),
                               severity=dg.AssetCheckSeverity.ERROR)
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from toolret.catalog.model import DOC_VARIANTS, SPLITS, Catalog, required_split
from toolret.errors import CatalogError

MAX_DOC_CHARS = 20_000
MAX_QUERY_CHARS = 2_000
MAX_IDS = 20  # offending ids listed per failed check


@dataclass
class ExpectationOutcome:
    """The outcome of one check."""

    name: str
    description: str
    success: bool
    severity: str                  # "error" | "warning"
    expectation: str               # the GX expectation type
    element_count: int = 0
    unexpected_count: int = 0
    offending_ids: list[str] = field(default_factory=list)  # first MAX_IDS
    message: str = ""
    exception: str | None = None

    @property
    def failed_error(self) -> bool:
        return not self.success and self.severity == "error"


@dataclass
class ValidationReport:
    """All checks of one catalog. ``success`` is false iff an error-severity check failed."""

    catalog: str
    success: bool
    results: list[ExpectationOutcome]
    duration_s: float = 0.0

    @property
    def errors(self) -> list[ExpectationOutcome]:
        return [r for r in self.results if r.failed_error]

    @property
    def warnings(self) -> list[ExpectationOutcome]:
        return [r for r in self.results if not r.success and r.severity == "warning"]

    def result(self, name: str) -> ExpectationOutcome:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def summary(self) -> str:
        """One line per failed check (errors first), or a one-line pass message."""
        failed = self.errors + self.warnings
        if not failed:
            return f"catalog {self.catalog!r}: all {len(self.results)} checks passed"
        lines = [f"catalog {self.catalog!r}: {len(self.errors)} failed check(s), {len(self.warnings)} warning(s)"]
        lines += [f"  [{r.severity}] {r.name}: {r.message}" for r in failed]
        return "\n".join(lines)

    def raise_for_errors(self) -> None:
        """Raise :class:`CatalogError` with :meth:`summary` if an error check failed."""
        if not self.success:
            raise CatalogError(self.summary())

    def to_metadata(self) -> dict[str, Any]:
        """A JSON-serialisable dict for ``dg.AssetCheckResult(metadata=...)`` or MLflow."""
        return {
            "catalog": self.catalog,
            "success": self.success,
            "n_checks": len(self.results),
            "n_errors": len(self.errors),
            "n_warnings": len(self.warnings),
            "failed_checks": ", ".join(r.name for r in self.errors) or "none",
            "warning_checks": ", ".join(r.name for r in self.warnings) or "none",
            "summary": self.summary(),
            "duration_s": round(self.duration_s, 3),
            "checks": {r.name: {k: v for k, v in asdict(r).items() if k != "name"} for r in self.results},
        }


def _text_key(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def catalog_frames(catalog: Catalog) -> dict[str, Any]:
    """The pandas frames validated: ``tools``, ``docs``, ``queries``, ``query_splits``, ``qrels``."""
    import pandas as pd

    tools = pd.DataFrame({"tool_id": [t.id for t in catalog.tools]}, dtype=object)
    rows = [(t.id, v, "" if x is None else x) for t in catalog.tools for v, x in t.docs.items()]
    docs = pd.DataFrame(rows, columns=["tool_id", "variant", "text"], dtype=object)
    docs["record"] = docs["tool_id"].astype(str) + "[" + docs["variant"].astype(str) + "]"
    qids = [q.id for q in catalog.queries]
    queries = pd.DataFrame({"query_id": qids, "text": ["" if q.text is None else q.text for q in catalog.queries],
                            "split": [q.split for q in catalog.queries]}, dtype=object)
    queries["text_key"] = queries["text"].map(_text_key)
    queries["n_gold"] = [sum(1 for r in catalog.qrels.get(q, {}).values() if r > 0) for q in qids]
    train_keys = set(queries.loc[queries["split"] == "train", "text_key"])
    queries["same_text_as_train"] = (queries["split"] != "train") & queries["text_key"].isin(train_keys)
    query_splits = queries[["query_id", "split"]].drop_duplicates()
    qrows = [(q, t, r) for q, rels in catalog.qrels.items() for t, r in rels.items()]
    qrels = pd.DataFrame(qrows, columns=["query_id", "tool_id", "score"])
    qrels = qrels.astype({"query_id": object, "tool_id": object})
    qrels["pair"] = qrels["query_id"].astype(str) + " -> " + qrels["tool_id"].astype(str)
    # cross-frame membership is computed here: GX re-serialises large value sets per metric (20 s on
    # ToolLens with value_set=<18,770 query ids>), a boolean column keeps the check in GX at ~0.1 s
    qrels["tool_exists"] = qrels["tool_id"].isin(set(tools["tool_id"]))
    qrels["query_exists"] = qrels["query_id"].isin(set(queries["query_id"]))
    return {"tools": tools, "docs": docs, "queries": queries, "query_splits": query_splits, "qrels": qrels}


def _checks(frames: dict[str, Any], required_split: str | None = "test") -> list[dict[str, Any]]:
    """Declarative check list: name, frame, id column, severity, description, GX expectation factory.
    ``required_split``: the split the catalog must have (``test``; ``train`` for a training-only one;
    ``None`` for a serving one: no split check)."""
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    split_present = [
        dict(name=f"splits.{required_split}_present", frame="queries", id=None, severity="error", what="queries",
             description=f"the catalog has {required_split} queries",
             exp=gxe.ExpectColumnDistinctValuesToContainSet(column="split", value_set=[required_split])),
    ] if required_split else []
    return [
        dict(name="tools.present", frame="tools", id=None, severity="error", what="tools",
             description="the catalog has at least one tool",
             exp=gxe.ExpectTableRowCountToBeBetween(min_value=1)),
        dict(name="tools.unique_ids", frame="tools", id="tool_id", severity="error", what="tools",
             description="tool ids are unique", problem="share an id with another tool",
             exp=gxe.ExpectColumnValuesToBeUnique(column="tool_id")),
        dict(name="docs.known_variant", frame="docs", id="record", severity="error", what="tool documents",
             description=f"document variants are one of {DOC_VARIANTS}", problem="have an unknown document variant",
             exp=gxe.ExpectColumnValuesToBeInSet(column="variant", value_set=list(DOC_VARIANTS))),
        dict(name="docs.non_empty", frame="docs", id="record", severity="error", what="tool documents",
             description="every document variant has visible text", problem="are empty or whitespace-only",
             exp=gxe.ExpectColumnValuesToNotMatchRegex(column="text", regex=r"^\s*$")),
        dict(name="docs.length", frame="docs", id="record", severity="error", what="tool documents",
             description=f"1 <= document length <= {MAX_DOC_CHARS:,} characters",
             problem=f"are empty or longer than {MAX_DOC_CHARS:,} characters",
             exp=gxe.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1, max_value=MAX_DOC_CHARS)),
        dict(name="queries.unique_ids", frame="queries", id="query_id", severity="error", what="queries",
             description="query ids are unique", problem="share an id with another query",
             exp=gxe.ExpectColumnValuesToBeUnique(column="query_id")),
        dict(name="queries.non_empty", frame="queries", id="query_id", severity="error", what="queries",
             description="every query has visible text", problem="are empty or whitespace-only",
             exp=gxe.ExpectColumnValuesToNotMatchRegex(column="text", regex=r"^\s*$")),
        dict(name="queries.length", frame="queries", id="query_id", severity="error", what="queries",
             description=f"1 <= query length <= {MAX_QUERY_CHARS:,} characters",
             problem=f"are empty or longer than {MAX_QUERY_CHARS:,} characters",
             exp=gxe.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1, max_value=MAX_QUERY_CHARS)),
        dict(name="queries.known_split", frame="queries", id="query_id", severity="error", what="queries",
             description=f"query splits are one of {SPLITS}", problem="have an unknown split",
             exp=gxe.ExpectColumnValuesToBeInSet(column="split", value_set=list(SPLITS))),
        dict(name="splits.disjoint", frame="query_splits", id="query_id", severity="error", what="query ids",
             description="a query id belongs to one split only", problem="appear in more than one split",
             exp=gxe.ExpectColumnValuesToBeUnique(column="query_id")),
        *split_present,
        dict(name="splits.no_text_leak", frame="queries", id="query_id", severity="warning", what="test/dev queries",
             description="no test/dev query has the same text (case/space-insensitive) as a train query",
             problem="have the same text as a train query",
             exp=gxe.ExpectColumnValuesToBeInSet(column="same_text_as_train", value_set=[False],
                                                 row_condition=Column("split") != "train")),
        dict(name="qrels.known_tools", frame="qrels", id="pair", severity="error", what="qrels rows",
             description="every judged tool exists in the corpus", problem="reference a tool id not in the corpus",
             exp=gxe.ExpectColumnValuesToBeInSet(column="tool_exists", value_set=[True])),
        dict(name="qrels.known_queries", frame="qrels", id="pair", severity="error", what="qrels rows",
             description="every judged query exists", problem="reference a query id not in the queries",
             exp=gxe.ExpectColumnValuesToBeInSet(column="query_exists", value_set=[True])),
        dict(name="test.has_gold", frame="queries", id="query_id", severity="error", what="test queries",
             description="every test query has at least one relevant tool", problem="have no relevant tool",
             exp=gxe.ExpectColumnValuesToBeBetween(column="n_gold", min_value=1,
                                                   row_condition=Column("split") == "test")),
    ]


def _outcome(check: dict[str, Any], res: Any, frames: dict[str, Any]) -> ExpectationOutcome:
    r = res.result or {}
    exc = res.exception_info or {}
    raised = exc.get("raised_exception") if isinstance(exc, dict) else False
    ids: list[str] = []
    if check["id"]:
        for row in r.get("partial_unexpected_index_list") or []:
            if isinstance(row, dict) and check["id"] in row:
                ids.append(str(row[check["id"]]))
        ids = list(dict.fromkeys(ids))[:MAX_IDS]
    unexpected = int(r.get("unexpected_count") or 0)
    element_count = int(r.get("element_count") or len(frames[check["frame"]]))
    success = bool(res.success)
    if success:
        message = "ok"
    elif raised:
        message = f"check could not run: {exc.get('exception_message')}"
    elif check["name"] == "tools.present":
        message = "the catalog has no tools"
    elif check["name"] in ("splits.test_present", "splits.train_present"):
        split = check["name"].split(".")[1].removesuffix("_present")
        message = f"no query is in the {split} split (splits present: {r.get('observed_value')})"
    else:
        more = f" (first {len(ids)})" if unexpected > len(ids) else ""
        message = (f"{unexpected} of {element_count} {check['what']} {check['problem']}: "
                   f"{', '.join(repr(i) for i in ids)}{more}")
    return ExpectationOutcome(name=check["name"], description=check["description"], success=success,
                              severity=check["severity"], expectation=res.expectation_config.type,
                              element_count=element_count, unexpected_count=unexpected, offending_ids=ids,
                              message=message, exception=exc.get("exception_message") if raised else None)


def validate_catalog(catalog: Catalog) -> ValidationReport:
    """Run every check on ``catalog`` with an ephemeral GX context; never raises on bad data.

    Example:
        >>> report = validate_catalog(catalog)          # doctest: +SKIP
        >>> report.success, report.errors[0].message    # doctest: +SKIP
        (False, "2 of 60 qrels rows reference a tool id not in the corpus: 'q1 -> t99', 'q2 -> t99'")
    """
    start = time.perf_counter()
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx

    frames = catalog_frames(catalog)
    checks = _checks(frames, required_split(catalog.provenance))
    context = gx.get_context(mode="ephemeral")
    try:
        context.variables.progress_bars = gx.data_context.types.base.ProgressBarsConfig(globally=False)
    except Exception:  # noqa: BLE001 - progress bars are cosmetic
        pass
    source = context.data_sources.add_pandas("catalog")
    outcomes: dict[str, ExpectationOutcome] = {}
    for frame_name, df in frames.items():
        frame_checks = [c for c in checks if c["frame"] == frame_name]
        if not frame_checks:
            continue
        asset = source.add_dataframe_asset(frame_name)
        batch = asset.add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": df})
        id_cols = sorted({c["id"] for c in frame_checks if c["id"]})
        suite = gx.ExpectationSuite(name=f"{catalog.name}.{frame_name}")
        by_id = {}
        for c in frame_checks:
            exp = c["exp"]
            exp.meta = {"check": c["name"]}
            exp.severity = "warning" if c["severity"] == "warning" else "critical"
            suite.add_expectation(exp)
            by_id[c["name"]] = c
        result_format: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": MAX_IDS}
        if id_cols and len(df):
            result_format["unexpected_index_column_names"] = id_cols
        res = batch.validate(suite, result_format=result_format)
        for r in res.results:
            name = (r.expectation_config.meta or {}).get("check")
            outcomes[name] = _outcome(by_id[name], r, frames)
    ordered = [outcomes[c["name"]] for c in checks]
    success = not any(o.failed_error for o in ordered)
    return ValidationReport(catalog=catalog.name, success=success, results=ordered,
                            duration_s=time.perf_counter() - start)


__all__ = ["validate_catalog", "ValidationReport", "ExpectationOutcome", "catalog_frames",
           "MAX_DOC_CHARS", "MAX_QUERY_CHARS"]
