"""Position bias: how likely an agent is to look at the tool shown at a rank, and what a click there weighs.

The default examination model is the power law of Joachims, Swaminathan & Schnabel (2017, "Unbiased
learning-to-rank with biased feedback", section 5): ``p(rank) = (1 / rank) ** eta``, ``eta = 1`` by default
(their estimate on arXiv search was close to 1). A click's inverse-propensity weight is ``1 / p``, clipped at
``clip`` (Strehl et al. 2010; Joachims et al. clip too) so that a click at a deep rank cannot dominate training.
"""

from __future__ import annotations

from toolret.errors import ToolretError

DEFAULT_ETA = 1.0
DEFAULT_CLIP = 10.0


def examination_propensity(rank: int, eta: float = DEFAULT_ETA) -> float:
    """``(1 / rank) ** eta``: the probability that the tool shown at ``rank`` (1-based) is looked at,
    relative to rank 1 (Joachims et al. 2017, eq. for the position-based propensity model)."""
    if not isinstance(rank, int) or rank < 1:
        raise ToolretError(f"rank {rank!r}: a 1-based rank")
    if eta < 0:
        raise ToolretError(f"eta {eta!r}: must not be negative")
    return (1.0 / rank) ** eta


def ips_weight(propensity: float, clip: float = DEFAULT_CLIP) -> float:
    """``min(1 / propensity, clip)``: a click's inverse-propensity weight, clipped."""
    if not 0 < propensity <= 1:
        raise ToolretError(f"propensity {propensity!r}: must be in (0, 1]")
    if clip < 1:
        raise ToolretError(f"clip {clip!r}: must be at least 1")
    return min(1.0 / propensity, clip)


__all__ = ["DEFAULT_CLIP", "DEFAULT_ETA", "examination_propensity", "ips_weight"]
