"""``toolret feedback``: what the agents that use the gateway searched and then called, as labelled queries.

- :mod:`toolret.feedback.position_bias`: the default examination model of a shown rank and the clipped
  inverse-propensity weight of a click;
- :mod:`toolret.feedback.clicks`: receipts -> clicks (a tool called after a search of the same session that
  showed it), with the rank it was shown at, its propensity and the tools skipped above it;
- :mod:`toolret.feedback.query_set`: clicks -> a time-split, de-duplicated labelled query set on disk
  (``toolret feedback --receipts LOG... --out DIR``);
- :mod:`toolret.feedback.labelled_set`: that folder read back for ``toolret adapt --feedback DIR``.

The package imports neither the gateway nor adapt (both import it); :mod:`~toolret.feedback.clicks` reads the
gateway's receipts.
"""

from __future__ import annotations

from toolret.feedback.labelled_set import FeedbackSet, held_out_catalog, load_feedback, with_feedback
from toolret.feedback.position_bias import DEFAULT_CLIP, DEFAULT_ETA, examination_propensity, ips_weight

__all__ = ["DEFAULT_CLIP", "DEFAULT_ETA", "FeedbackSet", "examination_propensity", "held_out_catalog",
           "ips_weight", "load_feedback", "with_feedback"]
