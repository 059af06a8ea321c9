"""The README's "Use it from Python" block runs as written and prints what it promises."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from toolret.stages import ROOT

pytestmark = pytest.mark.integration


def test_the_readme_python_example_runs_as_written(tmp_path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it from Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 12
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    out = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    means = re.match(r"\{'bm25': (0\.\d+), 'hybrid': (0\.\d+)\}", lines[0])
    assert means and 0 < float(means.group(1)) < 1 and 0 < float(means.group(2)) < 1
    assert "'metric': 'recall@1'" in lines[0]
    hits = lines[1:]
    assert len(hits) == 3 and hits[0].startswith("WeatherTool ")  # the weather tool first
    assert (tmp_path / "my-index" / "pipeline.json").is_file()
