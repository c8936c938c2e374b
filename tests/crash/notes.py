"""A crash drill of the older tools' notes becoming memories (``runtime.serving.adopted``):
one process writes notes as the older ``memory`` tools left them (``--seed``), another makes
them memories, killable around the ``--kill-count``-th memory it writes
(``before_note_memory_written``, ``after_note_memory_written``: the kill points of
``tests/crash/driver.py``'s stores).

    python -m tests.crash.notes --db DB --store sqlite|files|postgres [--dsn DSN] \\
        (--seed | --adopt [--kill-at POINT [--kill-count N]])

``--adopt`` prints, as JSON, how many memories it wrote and every memory the store holds
(id, text, scope), in the store's order (a memory written twice would be listed twice).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from typing import Any

from runtime.model.memories import Listing
from runtime.model.requests import Note
from runtime.serving.adopted import adopt_notes
from runtime.stores.erasure import thread_scope
from tests.crash.driver import KillSwitch, open_store
from tests.runtime.stores.contract import started

THREADS = ("t1", "t2", "t3")
NOTES_EACH = 2
AGENT_NOTES = 2


async def seed(args: argparse.Namespace) -> dict[str, Any]:
    async with open_store(args, KillSwitch(None)) as store:
        for thread_id in THREADS:
            await started(store, thread_id)
            for n in range(NOTES_EACH):
                await store.put_note(Note(scope=thread_scope(thread_id), key=f"k{n}",
                                          text=f"{thread_id} note {n}", updated_at=1.0 + n))
        for n in range(AGENT_NOTES):
            await store.put_note(Note(scope="agent", key=f"team{n}", text=f"agent note {n}",
                                      updated_at=5.0 + n))
    return {"notes": len(THREADS) * NOTES_EACH + AGENT_NOTES}


async def adopt(args: argparse.Namespace) -> dict[str, Any]:
    async with open_store(args, KillSwitch(args.kill_at, args.kill_count)) as store:
        written = await adopt_notes(store, lambda: 100.0)
        held = await store.list_memories(Listing(), 10_000)
    return {"written": written,
            "memories": sorted([m.id, m.text, m.scope.kind] for m in held)}


def cli(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tests.crash.notes")
    p.add_argument("--db", required=True)
    p.add_argument("--store", choices=["sqlite", "files", "postgres"], default="sqlite")
    p.add_argument("--dsn")
    step = p.add_mutually_exclusive_group(required=True)
    step.add_argument("--seed", action="store_true")
    step.add_argument("--adopt", action="store_true")
    p.add_argument("--kill-at", choices=["before_note_memory_written",
                                         "after_note_memory_written"])
    p.add_argument("--kill-count", type=int, default=1)
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(seed(args) if args.seed else adopt(args))))


if __name__ == "__main__":
    cli()
