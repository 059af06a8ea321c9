"""``toolret feedback``: what the agents that use the gateway searched and then called, as labelled queries.

- :mod:`toolret.feedback.position_bias`: the default examination model of a shown rank and the clipped
  inverse-propensity weight of a click;
- :mod:`toolret.feedback.clicks`: receipts -> clicks (a tool called after a search of the same session that
  showed it), with the rank it was shown at, its propensity and the tools skipped above it;
- :mod:`toolret.feedback.query_set`: clicks -> a time-split, de-duplicated labelled query set on disk
  (``toolret feedback --receipts LOG... --out DIR``) and its reader for ``toolret adapt --feedback DIR``.
"""

from __future__ import annotations

from toolret.feedback.clicks import Click, read_clicks
from toolret.feedback.position_bias import DEFAULT_CLIP, DEFAULT_ETA, examination_propensity, ips_weight
from toolret.feedback.query_set import FeedbackSet, build_feedback, load_feedback

__all__ = ["DEFAULT_CLIP", "DEFAULT_ETA", "Click", "FeedbackSet", "build_feedback", "examination_propensity",
           "ips_weight", "load_feedback", "read_clicks"]
