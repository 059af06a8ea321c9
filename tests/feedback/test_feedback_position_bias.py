"""The default position-bias model (Joachims et al. 2017: (1/rank)**eta) and the clipped IPS weight."""

from __future__ import annotations

import pytest

from toolret.errors import ToolretError
from toolret.feedback.position_bias import examination_propensity, ips_weight


def test_the_power_law_of_the_rank() -> None:
    assert examination_propensity(1) == 1.0
    assert examination_propensity(4) == pytest.approx(0.25)
    assert examination_propensity(3, eta=2.0) == pytest.approx(1 / 9)
    assert examination_propensity(7, eta=0.0) == 1.0  # no position bias


def test_weights_are_inverse_propensities_clipped() -> None:
    assert ips_weight(0.25) == pytest.approx(4.0)
    assert ips_weight(0.01, clip=10) == 10
    assert ips_weight(1.0) == 1.0


@pytest.mark.parametrize("call", [lambda: examination_propensity(0), lambda: examination_propensity(2, eta=-1),
                                  lambda: ips_weight(0.0), lambda: ips_weight(1.5), lambda: ips_weight(0.5, clip=0.5)])
def test_bad_input_is_refused(call) -> None:
    with pytest.raises(ToolretError):
        call()
