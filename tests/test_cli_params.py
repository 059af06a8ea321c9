"""Issue 78 (8): ``--params`` is taken before or after the subcommand (a nested one included)."""

from __future__ import annotations

import pytest

from toolret.cli import build_parser, main


@pytest.mark.parametrize("argv", [
    ["--params", "p.yaml", "datasets"],
    ["datasets", "--params", "p.yaml"],
    ["catalog", "build", "--dataset", "d", "--out", "o", "--params", "p.yaml"],
    ["evaluate", "--params", "p.yaml", "--dataset", "d", "--method", "bm25", "--output", "r.json"],
    ["gateway", "--stdio", "a=b", "--params", "p.yaml"],
])
def test_params_before_or_after_the_subcommand(argv):
    assert build_parser().parse_args(argv).params == "p.yaml"


def test_params_is_optional_everywhere():
    assert getattr(build_parser().parse_args(["datasets"]), "params", None) is None


def test_a_missing_params_file_after_the_subcommand_is_named(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert main(["datasets", "--params", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err
