"""Which stale stages a run may leave unbuilt: the ones current by ``dvc.lock`` (DVC's ``--allow-missing``).

A fresh clone has the outputs git keeps (LLM generations, trained models, evaluation results) but none of the
outputs only the DVC cache keeps (catalogs, indexes): ``dvc status`` finds every stage stale, but for most of
them the only change is a *missing* file -- an output not in this clone, or an input that is such an output of
an upstream stage. Rebuilding them all to find the same bytes is most of a fresh clone's ``make run``.

A stage is *current by the lock* when every change ``dvc status`` lists for it is a deleted output, or a
deleted dependency that another stage produces: the lock's hashes chain it to inputs that are there and did
not change, as ``dvc repro --allow-missing`` trusts them. A run skips such a stage unless it needs its
outputs: a stage of the run with a real change (code, params, data) and everything downstream of it need
their missing inputs built first, and so does a stage of the run whose own outputs are missing while nothing
in the run reads them (what the run exists to produce). :func:`plan` returns the stages the run skips and
those it builds only because they are missing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CHANGE_KINDS = ("changed deps", "changed outs")
MISSING = ("deleted", "not in cache")  # an output neither on disk nor in the (empty) DVC cache: "not in cache"


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def missing_only(changes: Any, produced: Iterable[str]) -> bool:
    """``True`` if ``changes`` (``dvc status --json``'s list for one stage) are all missing files: deleted
    outputs (or ones "not in cache"), or deleted deps that are some stage's output (``produced``). A deleted input that no stage makes
    (a datasets folder gone) is a real change."""
    produced = tuple(produced)
    items = changes if isinstance(changes, list) else [changes]
    if not items:
        return False
    for change in items:
        if not isinstance(change, dict):
            return False  # "changed command", "always changed", ...
        for kind, paths in change.items():
            if kind not in CHANGE_KINDS or not isinstance(paths, dict) or not paths:
                return False
            for path, how in paths.items():
                if how not in MISSING:
                    return False
                if kind == "changed deps" and not any(_overlaps(path, o) for o in produced):
                    return False
    return True


@dataclass(frozen=True)
class Plan:
    """``deferred``: stale stages the run skips (current by the lock); ``build``: stages current by the lock
    whose missing outputs a stage of the run reads, run to put them on disk (not a change: what reads them
    does not re-run because of it)."""

    deferred: frozenset[str]
    build: frozenset[str]


def plan(stale: Mapping[str, Any], upstream: Mapping[str, Collection[str]], outs: Mapping[str, Collection[str]],
         in_run: Collection[str], outs_present: Callable[[str], bool]) -> Plan:
    """What a run leaves unbuilt, and what it builds only because it is missing.

    Args:
        stale: ``{stage: changes}`` of ``dvc status`` at the run's start (current stages absent).
        upstream: every stage's upstream stages (those whose outputs it reads).
        outs: every stage's outputs.
        in_run: the stages the run materializes.
        outs_present: whether all of a stage's outputs are on disk.
    """
    produced = [o for os_ in outs.values() for o in os_]
    by_lock = {s for s, ch in stale.items() if s in upstream and missing_only(ch, produced)}
    downstream: dict[str, set[str]] = {s: set() for s in upstream}
    for s, ups in upstream.items():
        for u in ups:
            downstream.setdefault(u, set()).add(s)
    # stages that run: a real change (code, params, data) and everything downstream of it
    runs = {s for s in stale if s not in by_lock and s in in_run}
    todo = list(runs)
    while todo:
        for d in downstream.get(todo.pop(), ()):
            if d in in_run and d not in runs:
                runs.add(d)
                todo.append(d)
    # ... and a stage whose missing outputs are what the run produces (nothing in the run reads them)
    runs |= {s for s in by_lock if s in in_run and not outs_present(s)
             and not any(d in in_run for d in downstream.get(s, ()))}
    # what they read and is missing here is built first, and what that reads, and so on
    build: set[str] = set()
    todo = list(runs)
    while todo:
        for u in upstream.get(todo.pop(), ()):
            if u in by_lock and u not in runs and u not in build and not outs_present(u):
                build.add(u)
                todo.append(u)
    return Plan(frozenset(by_lock - build - runs), frozenset(build))


__all__ = ["Plan", "missing_only", "plan"]
