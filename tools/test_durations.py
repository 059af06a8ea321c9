"""The slowest tests of a run, and where the suite's time goes by folder and file.

Reads the per-phase times the test suite appends to ``$TOOLRET_TEST_TIMES`` (tests/conftest.py), e.g.

    make test TOOLRET_TEST_TIMES=/tmp/times.tsv
    python tools/test_durations.py /tmp/times.tsv --top 20 --markdown

``--markdown`` prints the table ``tests/README.md`` carries; ``--write tests/README.md`` replaces that table
(between its ``durations`` markers) in place.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

BEGIN, END = "<!-- durations:begin -->", "<!-- durations:end -->"


def read_times(path: Path) -> dict[str, float]:
    """``{nodeid: seconds}``, setup + call + teardown summed (a rerun test keeps its last run's phases)."""
    phases: dict[str, dict[str, float]] = collections.defaultdict(dict)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split("\t")
        if len(parts) not in (4, 6):
            raise SystemExit(f"{path}:{n}: expected 6 tab-separated fields, got {line!r}")
        nodeid, phase, seconds = parts[:3]
        phases[nodeid][phase] = float(seconds)
    return {nodeid: sum(p.values()) for nodeid, p in phases.items()}


def table(times: dict[str, float], top: int) -> str:
    rows = sorted(times.items(), key=lambda kv: -kv[1])[:top]
    out = ["| seconds | test |", "|---:|---|"]
    out += [f"| {s:.1f} | `{nodeid}` |" for nodeid, s in rows]
    return "\n".join(out)


def by_folder(times: dict[str, float]) -> list[tuple[str, float, int]]:
    sums: dict[str, list[float]] = collections.defaultdict(list)
    for nodeid, s in times.items():
        file = nodeid.split("::", 1)[0]
        sums[str(Path(file).parent)].append(s)
    return sorted(((k, sum(v), len(v)) for k, v in sums.items()), key=lambda r: -r[1])


def by_file(times: dict[str, float]) -> list[tuple[str, float, int]]:
    sums: dict[str, list[float]] = collections.defaultdict(list)
    for nodeid, s in times.items():
        sums[nodeid.split("::", 1)[0]].append(s)
    return sorted(((k, sum(v), len(v)) for k, v in sums.items()), key=lambda r: -r[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("times", type=Path, help="the file $TOOLRET_TEST_TIMES named")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--markdown", action="store_true", help="only the table of the slowest tests")
    ap.add_argument("--write", type=Path, help="replace the table between the durations markers of this file")
    args = ap.parse_args(argv)
    times = read_times(args.times)
    if args.write:
        text = args.write.read_text(encoding="utf-8")
        pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
        if not pattern.search(text):
            print(f"{args.write}: no {BEGIN} ... {END} markers", file=sys.stderr)
            return 2
        args.write.write_text(pattern.sub(lambda _: f"{BEGIN}\n{table(times, args.top)}\n{END}", text),
                              encoding="utf-8")
        return 0
    print(table(times, args.top))
    if not args.markdown:
        print(f"\n{len(times)} tests, {sum(times.values()):.0f} s of test time in all\n")
        for name, rows in (("folder", by_folder(times)), ("file", by_file(times)[:30])):
            print(f"by {name}:")
            for key, s, n in rows:
                print(f"  {s:8.1f} s  {n:4d} tests  {key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
