"""``toolret promote``: the parser and what it runs (:func:`add_commands` is all :mod:`toolret.cli` calls)."""

from __future__ import annotations

import argparse
import json
import sys

from toolret.adapt.promotion import ALPHA, format_decision, promote


def cmd_promote(args: argparse.Namespace) -> None:
    """Promote a catalog's challenger to champion when it wins (toolret.adapt.promotion)."""
    decision = promote(args.catalog, feedback=args.feedback, receipts=args.receipts, alpha=args.alpha)
    print(format_decision(decision), file=sys.stderr)
    print(json.dumps(decision, indent=1, default=str))


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("promote", help="make a catalog's adapt challenger the champion when it wins on held-out "
                       "feedback (paired test) or on interleaved searches (sign test), p < 0.05; logged to MLflow")
    p.add_argument("--catalog", required=True, metavar="NAME", help="the catalog (registered model adapt-NAME)")
    p.add_argument("--feedback", metavar="DIR", help="a toolret feedback folder: both models on its held-out queries")
    p.add_argument("--receipts", nargs="+", metavar="LOG", help="gateway receipt logs with interleaved searches "
                   "(interleave in the gateway config)")
    p.add_argument("--alpha", type=float, default=ALPHA, help="significance level (default 0.05)")
    p.set_defaults(func=cmd_promote)


__all__ = ["add_commands", "cmd_promote"]
