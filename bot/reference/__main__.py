"""`python -m bot.reference [--docs DIR] [--check]`: write the reference pages (or, with
``--check``, exit 1 naming those that are stale)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import stale, write


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bot.reference", description=__doc__)
    parser.add_argument("--docs", type=Path, default=Path("docs"),
                        help="the docs folder (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a page is not what the code renders")
    args = parser.parse_args()
    if args.check:
        found = stale(args.docs)
        for path in found:
            print(f"{args.docs / path} is stale: run python -m bot.reference", file=sys.stderr)
        return 1 if found else 0
    for path in write(args.docs):
        print(f"wrote {args.docs / path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
