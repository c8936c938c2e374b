"""`python -m bot` and the `maiden` script: the command line.

Its imports take a moment; a Ctrl-C typed meanwhile ends it with one line, not a
``KeyboardInterrupt`` traceback (after that, ``bot.cli.main`` handles Ctrl-C).
"""

import sys


def start() -> int:
    try:
        from .cli import main
    except KeyboardInterrupt:
        print("maiden: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    raise SystemExit(start())
