"""git_state: the commit and whether tracked files changed, with path prefixes whose changes do not count."""

import subprocess

from toolret.provenance import git_state


def _git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_changes_under_an_ignored_prefix_do_not_make_the_tree_dirty(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results" / "r.json").write_text("{}\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "c")
    assert not git_state(tmp_path).dirty
    (tmp_path / "results" / "r.json").write_text('{"a": 1}\n')  # a record a re-recording run rewrote
    assert git_state(tmp_path).dirty
    assert not git_state(tmp_path, ignore=("results/",)).dirty
    (tmp_path / "code.py").write_text("x = 2\n")  # a code change still counts
    assert git_state(tmp_path, ignore=("results/",)).dirty
