"""A randomized fault soak over the whole system (issue 52): maiden replicas on
PostgreSQL (and one on SQLite), a fake model that fails now and then, Slack, Discord and
schedules, SIGKILLs, SIGTERMs, database cuts and restarts, a full disk, skewed clocks,
platforms down or failing, and system-wide invariants checked at the end, from a printed
seed.

Not tests (pytest does not collect it): ``python -m chaos``; see chaos/README.md.
"""

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``python -m chaos``. Imported on use: a replica is started as ``python -m
    chaos.launch`` (maiden with the soak's clock), which should not load the soak."""
    from .cli import main as run

    return run(argv)
