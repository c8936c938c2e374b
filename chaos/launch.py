"""``python -m chaos.launch ARGS``: ``python -m bot ARGS`` (``maiden``), with maiden's clock
set off by as many seconds as the file ``chaos-clock-skew`` in the working directory says
(re-read every 0.2 s; absent or empty: 0), so the soak can skew one replica's clock a few
seconds, and put it right again, while it runs.

maiden's clock is what it is handed: ``Runtime(clock=...)`` (every stamp of a run, entry,
decision and delivery, the approval timeouts, the outbox) and ``ScheduleBook(clock=...)``
(which slots are due, when a schedule was made or resumed; the scheduler uses the book's).
``maiden run`` passes neither (the tests pass them; tests/channels/slack/test_replicas.py
has "a replica whose clock is behind"), and it has no setting for it, so this launcher
hands them in: the same two classes, their ``clock`` defaulting to the skewed one. The
host's clock is not touched: the store's (PostgreSQL's, for leases), APScheduler's alarms
and the fakes' stay right, as another machine's would.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["SKEW_FILE", "clock", "main", "utc_clock"]

SKEW_FILE = "chaos-clock-skew"
_skew = [0.0]


def clock() -> float:
    """maiden's ``time.time``, skewed."""
    return time.time() + _skew[0]


def utc_clock() -> datetime:
    """maiden's ``datetime.now(UTC)``, skewed (the schedules')."""
    return datetime.now(UTC) + timedelta(seconds=_skew[0])


def _read(path: Path) -> None:
    try:
        _skew[0] = float(path.read_text().strip() or 0.0)
    except (OSError, ValueError):
        _skew[0] = 0.0


def _follow(path: Path) -> None:
    while True:
        time.sleep(0.2)
        _read(path)


def main() -> int:
    path = Path.cwd() / SKEW_FILE
    _read(path)
    threading.Thread(target=_follow, args=(path,), name="chaos-clock", daemon=True).start()

    import bot.app
    import bot.jobs
    from bot.__main__ import start
    from runtime import Runtime
    from schedules import ScheduleBook

    class SkewedRuntime(Runtime):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("clock", clock)
            super().__init__(*args, **kwargs)

    class SkewedBook(ScheduleBook):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("clock", utc_clock)
            super().__init__(*args, **kwargs)

    bot.app.Runtime = SkewedRuntime  # type: ignore[attr-defined]
    bot.jobs.ScheduleBook = SkewedBook  # type: ignore[attr-defined]
    return start()


if __name__ == "__main__":
    raise SystemExit(main())
