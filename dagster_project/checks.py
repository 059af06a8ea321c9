"""Asset checks: catalog validation (blocking) and model-quality gates (warnings).

* Every ``catalog`` / ``clean`` stage asset gets a BLOCKING check that loads the catalog directory and
  runs :func:`toolret.catalog.validation.validate_catalog` (Great Expectations 1.x inside, imported
  lazily). A failure stops every downstream asset of the run; the metadata names the failed
  expectations and the offending record ids.
* A ``dense-ft`` evaluation (``DvcTranslator.gated_pairs``) gets a non-blocking WARN gate: the fine-tuned model must not be worse than
  the zero-shot ``dense`` model on recall@5 (per document variant both evaluated).
"""

# no `from __future__ import annotations`: Dagster reads the op signatures' annotations at runtime

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_project.dvc_assets import DvcTranslator, StageItem, read_results
from dagster_project.resources import DvcResource

CATALOG_STAGES = ("catalog", "clean")
GATE_METRIC = "recall@5"
GATE_TOLERANCE = 0.0  # fine-tuned may not be below zero-shot by more than this (fraction)


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def summarize_validation(report: Any, max_ids: int = 20) -> tuple[bool, dict[str, Any]]:
    """``(passed, metadata)`` from a :class:`toolret.catalog.validation.ValidationReport`.

    ``passed`` is the report's ``success`` (false only for failed *error* checks; failed warnings
    are listed but pass). The metadata names every failed check with its offending record ids.
    """
    passed = bool(_get(report, "success", default=False))
    results = _get(report, "results", default=None) or []
    lines: list[str] = []
    md: dict[str, Any] = {}
    failed_errors: list[str] = []
    for i, r in enumerate(results):
        if bool(_get(r, "success", default=True)):
            continue
        name = str(_get(r, "name", "expectation", default=f"check_{i}"))
        severity = str(_get(r, "severity", default="error"))
        ids = [str(x) for x in (_get(r, "offending_ids", "unexpected_ids", default=[]) or [])][:max_ids]
        message = str(_get(r, "message", default=""))
        if severity == "error":
            failed_errors.append(name)
        lines.append(f"- [{severity}] **{name}**: {message or ', '.join(ids)}")
        md[f"offending/{name}"] = ", ".join(ids) if ids else message
    to_md = getattr(report, "to_metadata", None)
    if callable(to_md):
        full = to_md()
        checks = full.pop("checks", None)
        md.update({k: v for k, v in full.items() if isinstance(v, (str, int, float, bool))})
        if checks is not None:
            md["checks"] = dg.MetadataValue.json(checks)
    md["failed_checks"] = ", ".join(failed_errors) or "none"
    if lines:
        md["offending_records"] = dg.MetadataValue.md("\n".join(lines))
    return passed, md


def validate_catalog_dir(directory: str | Path) -> tuple[bool, dict[str, Any]]:
    """Load a catalog directory and validate it; a load error is a failed check naming the record."""
    from toolret.catalog.io import load_catalog
    from toolret.errors import CatalogError

    directory = Path(directory)
    try:
        catalog = load_catalog(directory)
    except (CatalogError, OSError, ValueError) as exc:
        return False, {"error": dg.MetadataValue.md(f"catalog does not load: `{exc}`"), "path": str(directory)}
    md: dict[str, Any] = {"path": str(directory), **{f"stats/{k}": str(v) for k, v in catalog.stats().items()}}
    from toolret.catalog.validation import validate_catalog

    report = validate_catalog(catalog)
    passed, vmd = summarize_validation(report)
    md.update(vmd)
    md["validator"] = "toolret.catalog.validation.validate_catalog"
    return passed, md


def catalog_check(item: StageItem) -> dg.AssetChecksDefinition:
    out = item.outs[0]

    @dg.asset_check(
        asset=item.asset_key,
        name="catalog_valid",
        blocking=True,
        description=f"Great Expectations validation of `{out}` (blocking: a failure stops downstream assets).",
    )
    def _check(dvc: DvcResource) -> dg.AssetCheckResult:
        folder = Path(dvc.project_dir) / out
        if not folder.exists():  # its step found it current by dvc.lock and left it unbuilt: nothing to validate
            return dg.AssetCheckResult(passed=True, metadata={
                "validated": False,
                "why": f"`{out}` is not in this clone: current by dvc.lock and not read by this run "
                       f"(`dvc repro {item.name}` builds it; it is validated when built)"})
        passed, md = validate_catalog_dir(folder)
        return dg.AssetCheckResult(passed=passed, metadata=md, severity=dg.AssetCheckSeverity.ERROR)

    return _check


def quality_gate(ft: StageItem, base: StageItem, metric: str = GATE_METRIC) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=ft.asset_key,
        name=f"not_worse_than_{base.method}".replace("-", "_"),
        additional_deps=[base.asset_key],
        blocking=False,
        description=f"{ft.method} must not be worse than {base.method} on {metric} (per document variant).",
    )
    def _gate(dvc: DvcResource) -> dg.AssetCheckResult:
        ft_res = {d: r for rd in ft.result_dirs for d, r in read_results(dvc.project_dir, rd).items()}
        base_res = {d: r for rd in base.result_dirs for d, r in read_results(dvc.project_dir, rd).items()}
        common = sorted(set(ft_res) & set(base_res))
        md: dict[str, Any] = {"metric": metric, "tolerance": GATE_TOLERANCE}
        worse = []
        for docs in common:
            a = ft_res[docs]["metrics"].get(metric)
            b = base_res[docs]["metrics"].get(metric)
            if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
                continue
            md[f"{docs}/{ft.method}"] = float(a)
            md[f"{docs}/{base.method}"] = float(b)
            md[f"{docs}/delta"] = float(a - b)
            if a < b - GATE_TOLERANCE:
                worse.append(docs)
        if not common:
            return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN,
                                       metadata={**md, "error": "no document variant evaluated by both"})
        md["worse_on"] = ", ".join(worse)
        return dg.AssetCheckResult(passed=not worse, severity=dg.AssetCheckSeverity.WARN, metadata=md)

    return _gate


def build_checks(items: Sequence[StageItem], translator: DvcTranslator | None = None
                 ) -> list[dg.AssetChecksDefinition]:
    """The checks the translator (default :class:`DvcTranslator`) gives the items: blocking validation on
    catalog/clean assets, quality gates on fine-tuned evaluations."""
    return (translator or DvcTranslator()).checks(items)


__all__ = ["CATALOG_STAGES", "build_checks", "catalog_check", "quality_gate", "summarize_validation", "validate_catalog_dir"]
