"""A file download held half-way while the replica downloading it is SIGKILLed: the fake
Slack's and the fake Discord CDN's ``hold`` serve half a file and wait; the process whose
socket has the held connection's port (``sockets.py``, from the fake's record of where the
held download went) is killed and restarted, a kill of the fault history. What must come of
it (the file shown and stored once, whole; the half never stored) is ``files_checks``'."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from .sockets import pid_of_client
from .system import Replica

__all__ = ["HELD_WAIT_S", "Holds", "Kill"]

HELD_WAIT_S = 60.0  # how long a held download is waited for before the hold is let be
Kill = Callable[[Replica, str], None]


class Holds:
    """Kills each held download's downloader; ``outcomes``: tag -> what came of its hold
    (for the summary)."""

    def __init__(self, replicas: Sequence[Replica], kill: Kill | None) -> None:
        self.replicas = replicas
        self.kill = kill  # SIGKILLs a replica now, and restarts it (chaos/faults.py)
        self.outcomes: dict[str, str] = {}

    async def kill_holder(self, tag: str, held: asyncio.Event,
                          peer: Callable[[], tuple[str, int] | None]) -> None:
        """Once the held download has sent half the file (``held``), SIGKILL the replica
        downloading it (``peer``: the fake's record of the held connection's client end)."""
        try:
            async with asyncio.timeout(HELD_WAIT_S):
                await held.wait()
        except TimeoutError:
            self.outcomes[tag] = "never downloaded while held"
            return
        found = peer()
        procs = {r.proc.pid: r for r in self.replicas if r.proc is not None}
        pid = pid_of_client(found[1], procs) if found else None
        if pid is None or self.kill is None:
            self.outcomes[tag] = "held; its downloader not found"
            return
        replica = procs[pid]
        # A replica starting takes up its queued runs (and downloads their files) before it
        # says it is ready: it is killed once it is up, if it is still that process.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(HELD_WAIT_S):
                while not replica.up and _pid(replica) == pid:  # noqa: ASYNC110 (a flag)
                    await asyncio.sleep(0.1)
        if not replica.up or _pid(replica) != pid:
            self.outcomes[tag] = "held; its downloader ended before it was up"
            return
        self.outcomes[tag] = f"held, {replica.name} killed"
        self.kill(replica, f"half-way through downloading {tag}'s file")


def _pid(replica: Replica) -> int | None:
    return replica.proc.pid if replica.proc is not None else None
