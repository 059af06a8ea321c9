"""Which set chooses adapt's champion when feedback is given (``toolret adapt --feedback DIR``).

The held-out feedback (the newest share of what agents searched and then called: :mod:`toolret.feedback`)
is real traffic, so where it holds at least :data:`MIN_FEEDBACK_QUERIES` queries the champion is chosen on it
(the same rule, :func:`toolret.adapt.run.choose_champion`, on its per-query scores); with fewer, a paired test
on it says little and the synthetic dev split chooses, as without feedback. The feedback's training share is
trained on either way; the held-out share never is.

The held-out clicks were gathered under the serving champion's rankings, which favours it and tools it
ranked high (a tool never shown is never clicked): the labels are unweighted here. Exploration
(``explore`` in the gateway config) shows more tools at more ranks and so softens this.
"""

from __future__ import annotations

MIN_FEEDBACK_QUERIES = 50


def feedback_selection(n_held_out: int, minimum: int = MIN_FEEDBACK_QUERIES) -> tuple[bool, str]:
    """``(choose on the held-out feedback?, why)`` for ``n_held_out`` held-out feedback queries."""
    if n_held_out >= minimum:
        return True, (f"held-out feedback, {n_held_out} queries of the newest receipts (at least {minimum}: "
                      f"real traffic chooses)")
    return False, (f"held-out feedback has {n_held_out} queries, fewer than {minimum}: the synthetic dev split "
                   f"chooses")


__all__ = ["MIN_FEEDBACK_QUERIES", "feedback_selection"]
