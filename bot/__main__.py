"""`python -m bot`, and the `maiden` script (``run``)."""

import sys


def run() -> int:
    """The command line; Ctrl-C while its modules load is one line, not a traceback."""
    try:
        from .cli import main
    except KeyboardInterrupt:
        print("maiden: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    raise SystemExit(run())
