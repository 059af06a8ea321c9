"""``toolret feedback``: the parser and what it runs (:func:`add_commands` is all :mod:`toolret.cli` calls)."""

from __future__ import annotations

import argparse
import json
import sys

from toolret.feedback.position_bias import DEFAULT_CLIP, DEFAULT_ETA
from toolret.feedback.query_set import build_feedback, format_report


def cmd_feedback(args: argparse.Namespace) -> None:
    """Receipt logs -> a time-split labelled query set for ``toolret adapt --feedback`` (toolret.feedback)."""
    report = build_feedback(args.receipts, args.out, holdout=args.holdout, eta=args.eta, clip=args.clip)
    print(format_report(report), file=sys.stderr)
    print(json.dumps({"out": args.out, **{k: report[k] for k in ("clicks", "train", "test")}}, indent=1))


def add_commands(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("feedback", help="turn gateway receipts into labelled queries (a tool called after a search "
                       "that showed it), time-split, for toolret adapt --feedback")
    f.add_argument("--receipts", nargs="+", required=True, metavar="LOG",
                   help="receipt logs of toolret gateway (each with its rotated backups LOG.1 ...)")
    f.add_argument("--out", required=True, help="the folder to write (e.g. data/feedback/<catalog>: not in git, "
                   "it holds your users' queries)")
    f.add_argument("--holdout", type=float, default=0.2, help="the newest share of searches held out (default 0.2)")
    f.add_argument("--eta", type=float, default=DEFAULT_ETA, help="position bias (1/rank)**eta where a receipt "
                   "has no propensity")
    f.add_argument("--clip", type=float, default=DEFAULT_CLIP, help="inverse-propensity weights clipped at this")
    f.set_defaults(func=cmd_feedback)


__all__ = ["add_commands", "cmd_feedback"]
