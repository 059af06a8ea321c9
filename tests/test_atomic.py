"""toolret.atomic: artifacts are whole or absent; split weights are put back together only when they check out."""

import hashlib

import pytest

from toolret.atomic import atomic_directory, concatenate_checked, write_json


def test_a_failed_write_leaves_the_previous_artifact(tmp_path):
    target = tmp_path / "art"
    target.mkdir()
    (target / "a.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as tmp:
            (tmp / "a.txt").write_text("new")
            raise RuntimeError("killed midway")
    assert (target / "a.txt").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["art"]


def test_concatenated_parts_are_the_whole_in_order(tmp_path):
    parts = []
    for i, chunk in enumerate((b"abc", b"", b"defg")):
        parts.append(tmp_path / f"p{i}")
        parts[-1].write_bytes(chunk)
    out = concatenate_checked(parts, tmp_path / "whole", hashlib.sha256(b"abcdefg").hexdigest(), "test")
    assert out.read_bytes() == b"abcdefg"


def test_parts_with_a_wrong_checksum_are_named_and_leave_nothing(tmp_path):
    (tmp_path / "p0").write_bytes(b"x")
    write_json(tmp_path / "keep.json", {})
    with pytest.raises(ValueError, match=r"weights X: the parts .*p0.*expected 0{64}"):
        concatenate_checked([tmp_path / "p0"], tmp_path / "whole", "0" * 64, "weights X")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json", "p0"]
