"""Record in ``dvc.lock`` a code change that cannot alter any stage's outputs, without rebuilding them.

``dvc commit -f <stages>`` does the same but needs every stage's data dependencies built locally (the
curated catalogues of a ``make run``) and minutes of hashing; for a change to a code dependency alone
(a new CLI subcommand, a docstring) that is not needed: each listed file's new md5 and size replace the
recorded ones in every stage whose lock entry held the committed version of that file (entries recording
an older version are left stale, as DVC would see them). Use it only where the change provably cannot
alter an output, and say so in the commit message; ``tests/test_dvc_lock.py`` checks the result.

    python tools/record_code_change.py toolret/cli.py [more files]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def record(lock_text: str, path: str, old_md5: str, new_md5: str, new_size: int) -> tuple[str, int]:
    """``lock_text`` with the ``path`` entries recording ``old_md5`` moved to ``new_md5`` / ``new_size``."""
    pattern = re.compile(rf"(- path: {re.escape(path)}\n(\s+)hash: md5\n\s+md5: ){old_md5}\n(\s+)size: \d+\n")
    return pattern.subn(lambda m: f"{m.group(1)}{new_md5}\n{m.group(3)}size: {new_size}\n", lock_text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="project-relative code files whose change cannot alter outputs")
    parser.add_argument("--rev", default="HEAD", help="the git revision whose version the lock recorded")
    args = parser.parse_args(argv)
    lock = ROOT / "dvc.lock"
    text = lock.read_text(encoding="utf-8")
    for rel in args.files:
        committed = subprocess.run(["git", "show", f"{args.rev}:{rel}"], cwd=ROOT, capture_output=True, check=True).stdout
        data = (ROOT / rel).read_bytes()
        text, n = record(text, rel, hashlib.md5(committed).hexdigest(), hashlib.md5(data).hexdigest(), len(data))
        print(f"{rel}: {n} stage entries recorded")
    tmp = lock.with_suffix(".lock.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(lock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
