"""A randomized fault soak over the whole system (issue 52): maiden replicas on
PostgreSQL (and one on SQLite), a fake model that fails now and then, SIGKILLs, SIGTERMs,
database cuts, and system-wide invariants checked at the end, from a printed seed.

Not tests (pytest does not collect it): ``python -m chaos``; see chaos/README.md.
"""

from .cli import main

__all__ = ["main"]
