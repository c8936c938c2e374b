"""``maiden send --file``: a person at a replica's machine sends a message with a file from
the terminal (``python -m chaos.launch send THREAD TEXT --file PATH``, in the replica's
directory, on its store, beside the running replicas; what it printed is kept beside the
replica's log, ``{store}-r{N}-send.log``). The command has no idempotency key: it is sent
again only when no run of its message was made."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass

from .files import data_of
from .plan import Op
from .system import Replica, die_with_parent

__all__ = ["EXIT_PAUSED", "EXIT_USAGE", "Typed", "send_from_terminal"]

EXIT_USAGE = 2  # maiden's exit status for a command it refuses as typed (bot/commands)
EXIT_PAUSED = 3  # its run was taken and waits (for an approval, or behind one)
WAIT_S = 240.0  # the command waits for its run to end


@dataclass
class Typed:
    code: int | None  # None: it did not end within WAIT_S (killed)
    out: str
    err: str


async def send_from_terminal(replica: Replica, op: Op) -> Typed:
    """Run ``maiden send`` once for ``op`` in ``replica``'s directory."""
    folder = replica.home / "outbox-files" / op.tag
    folder.mkdir(parents=True, exist_ok=True)
    args: list[str] = []
    for name in op.files:
        (folder / name).write_bytes(data_of(name))
        args += ["--file", str(folder / name)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "chaos.launch", "send", op.thread, op.text, *args,
        cwd=replica.home, env=replica.env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True, preexec_fn=die_with_parent)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
    except (TimeoutError, asyncio.CancelledError) as exc:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        if not isinstance(exc, TimeoutError):
            raise
        # Not ended within WAIT_S: what a person at the terminal gives up on (seed 10404:
        # raised here, the message's task ended with its outcome unrecorded).
        out, err, code = b"", f"did not end within {WAIT_S:g} s (killed)".encode(), None
    else:
        code = proc.returncode
    typed = Typed(code, out.decode(errors="replace").strip(),
                  err.decode(errors="replace").strip())
    with replica.log.with_name(f"{replica.log.stem}-send.log").open("a") as kept:
        kept.write(f"--- {op.tag}: maiden send, exit {typed.code}\n{typed.out}\n{typed.err}\n")
    return typed
