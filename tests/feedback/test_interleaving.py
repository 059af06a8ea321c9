"""Team-draft interleaving (Radlinski et al. 2008) on hand-worked examples, the credit of the agents' calls read
from receipt lines, and the binomial sign test's verdict (p worked out by hand)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from receipt_lines import call, search, write

from toolret.errors import CatalogError, ToolretError
from toolret.feedback.interleaving import interleaving_credit, interleaving_verdict, team_draft, Credit


class Coins:
    """A scripted coin: the values ``random()`` returns, in order (the test fails if more are drawn)."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_team_draft_by_hand() -> None:
    # tie (coin 0.2: a first) -> a: 1; b has fewer -> b: 2; tie (coin 0.7: b) -> b: 5 (1, 2 shown); a: 3
    coins = Coins(0.2, 0.7)
    assert team_draft(["1", "2", "3", "4"], ["2", "1", "5", "6"], 4, coins) == (["1", "2", "5", "3"],
                                                                               ["a", "b", "b", "a"])
    assert coins.values == []  # the coin is tossed at ties only
    # the same ranking twice: the teams alternate whatever the coin says; b first here, then a twice
    assert team_draft(["x", "y", "z"], ["x", "y", "z"], 3, Coins(0.9, 0.1)) == (["x", "y", "z"], ["b", "a", "a"])
    # picking stops once one ranking has nothing new left (Algorithm 2's loop condition)
    assert team_draft(["1"], ["1", "2"], 5, Coins(0.1)) == (["1"], ["a"])
    assert team_draft(["1", "2"], ["3", "4"], 0, Coins()) == ([], [])


def test_team_draft_is_seeded_and_fair() -> None:
    a, b = [f"t{i}" for i in range(10)], [f"t{i}" for i in reversed(range(10))]
    runs = [[team_draft(a, b, 6, rng) for _ in range(50)] for rng in (random.Random(3), random.Random(3))]
    assert runs[0] == runs[1]
    for shown, teams in runs[0]:
        assert len(set(shown)) == 6 and sorted(teams) == ["a"] * 3 + ["b"] * 3  # 3 picks each of 6
        assert shown[teams.index("a")] == "t0" and shown[teams.index("b")] == "t9"  # each team's best first
    with pytest.raises(ToolretError, match="twice"):
        team_draft(["1", "1"], ["2"], 2, random.Random(0))


def _shown(*pairs: tuple[str, str]) -> list[dict]:
    return [{"id": t, "score": 1.0, "rank": i + 1, "team": team} for i, (t, team) in enumerate(pairs)]


PAIR = {"champion": "adapt-shop/1", "challenger": "adapt-shop/2"}


def test_credit_from_calls(tmp_path: Path) -> None:
    shown = _shown(("c1", "champion"), ("x1", "challenger"), ("c2", "champion"), ("x2", "challenger"))
    log = write(tmp_path / "r.jsonl", [
        search(0, "s1", "q1", shown, interleave=PAIR), call(1, "s1", "x1"),                       # challenger
        search(10, "s2", "q2", shown, interleave=PAIR), call(11, "s2", "c2"),                     # champion
        search(20, "s3", "q3", shown, interleave=PAIR), call(21, "s3", "c1"), call(22, "s3", "x2"),  # tie
        search(30, "s4", "q4", shown, interleave=PAIR),                                           # no call
        search(40, "s5", "q5", ["c1", "x1"]), call(41, "s5", "x1"),                               # not interleaved
        search(50, "s6", "q6", shown, interleave={"champion": "adapt-shop/0", "challenger": "adapt-shop/1"}),
        call(51, "s6", "x1"),                                                                     # an older pair
        search(60, "s7", "q7", shown, interleave=PAIR), call(61, "s7", "x2"), call(62, "s7", "x2"),  # one click
    ])
    credits, counts = interleaving_credit([log], pair=(PAIR["champion"], PAIR["challenger"]))
    assert [(c.champion, c.challenger) for c in credits] == [(0, 1), (1, 0), (1, 1), (0, 1)]
    assert counts["repeat_calls"] == 1
    assert len(interleaving_credit([log])[0]) == 5  # every pair when none is asked for
    verdict = interleaving_verdict(credits)
    assert (verdict["n"], verdict["wins"], verdict["losses"], verdict["ties"]) == (3, 2, 1, 1)
    assert verdict["p"] == 1.0 and not verdict["challenger_wins"]  # 2 of 3: P(X<=1 or X>=2) = 1


def test_credit_needs_a_team(tmp_path: Path) -> None:
    log = write(tmp_path / "r.jsonl", [search(0, "s1", "q1", ["c1", "x1"], interleave=PAIR), call(1, "s1", "x1")])
    with pytest.raises(ToolretError, match="team None"):
        interleaving_credit([log])
    with pytest.raises(CatalogError, match="no receipts file"):
        interleaving_credit([tmp_path / "missing.jsonl"])


def _credits(wins: int, losses: int, ties: int) -> list[Credit]:
    rows = [(0, 1)] * wins + [(1, 0)] * losses + [(1, 1)] * ties
    return [Credit(i, ("a", "b"), c, x) for i, (c, x) in enumerate(rows)]


def test_sign_test_by_hand() -> None:
    # 9 of 10: p = 2 * (C(10,0) + C(10,1)) / 2**10 = 22 / 1024
    v = interleaving_verdict(_credits(9, 1, 5))
    assert v["p"] == pytest.approx(22 / 1024, abs=1e-6) and v["challenger_wins"] and v["n"] == 10
    # 8 of 10: p = 2 * (1 + 10 + 45) / 1024 = 112 / 1024 > 0.05
    v = interleaving_verdict(_credits(8, 2, 0))
    assert v["p"] == pytest.approx(112 / 1024, abs=1e-6) and not v["challenger_wins"]
    # 1 of 10 is as unlikely, but the champion's win: no promotion
    assert not interleaving_verdict(_credits(1, 9, 0))["challenger_wins"]
    v = interleaving_verdict(_credits(0, 0, 4))
    assert (v["n"], v["ties"], v["p"], v["challenger_wins"]) == (0, 4, 1.0, False)
