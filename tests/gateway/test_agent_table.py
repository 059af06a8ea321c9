"""docs/GATEWAY.md's agent-selection table is the stored benchmark result's, and says what the result says."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("agent_selection", ROOT / "benchmarks" / "agent_selection.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_carries_the_stored_result_table():
    bench = _bench()
    assert (ROOT / "docs" / "GATEWAY.md").read_text(encoding="utf-8") == bench.render(), \
        "docs/GATEWAY.md is stale: run `.venv/bin/python benchmarks/agent_selection.py --render`"


def test_the_table_rows_are_the_results_numbers(tmp_path):
    bench = _bench()
    result = json.loads(bench.RESULT.read_text(encoding="utf-8"))
    result["conditions"]["top 5"]["accuracy"] = 0.987
    (tmp_path / "r.json").write_text(json.dumps(result), encoding="utf-8")
    page = tmp_path / "p.md"
    page.write_text(f"x\n{bench.BEGIN}\nold\n{bench.END}\ny\n", encoding="utf-8")
    text = bench.render(tmp_path / "r.json", page)
    row = next(line for line in text.splitlines() if line.startswith("| (b)"))
    assert row.startswith("| (b) toolret's top 5 | 0.987 [") and "old" not in text and text.endswith("y\n")
