"""`maiden knowledge index` (one indexing pass of the ``[[knowledge]]`` folders now, in this
process) and `maiden knowledge status` (each source as the store has it)."""

from __future__ import annotations

import argparse
import functools
import sys
from datetime import UTC, datetime

from runtime import KNOWLEDGE_LEASE, SourceStatus

from ..config import LoadedConfig
from .common import EXIT_FAILED, EXIT_OK

__all__ = ["COMMANDS"]


async def _knowledge(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    if args.knowledge_command == "index":
        return await _index(loaded)
    return await _status(loaded)


async def _index(loaded: LoadedConfig) -> int:
    """One pass, its progress printed, then each source's summary. It holds the lease a
    serving `maiden run` holds while it indexes: a pass under way elsewhere is not doubled
    (exit 1, saying who runs it)."""
    from ..app import open_app

    if not loaded.config.knowledge:
        print("no [[knowledge]] sources are configured")
    async with open_app(loaded, recover=False, mcp=False, writable=True) as app:
        assert app.indexer is not None
        operator = app.runtime.operator
        holder = await operator.take_lease(KNOWLEDGE_LEASE)
        if holder is not None:
            print(f"maiden: {holder} is indexing now; try again once it is done",
                  file=sys.stderr)
            return EXIT_FAILED
        try:
            done = await app.indexer.index(progress=functools.partial(print, flush=True))
        finally:
            await operator.release_lease(KNOWLEDGE_LEASE)
    for status in done:
        print(_line(status) + (f"; {status.last_error}" if status.last_error else ""))
    return EXIT_OK


async def _status(loaded: LoadedConfig) -> int:
    """Each source: its folder (and whether it is there), files, passages, last indexed."""
    from ..app import open_app

    if not loaded.config.knowledge:
        print("no [[knowledge]] sources are configured")
        return EXIT_OK
    async with open_app(loaded, recover=False, mcp=False) as app:
        assert app.indexer is not None
        found = await app.indexer.stored()
    for status in found:
        print(_line(status))
    return EXIT_OK


def _line(status: SourceStatus) -> str:
    """``runbooks  /srv/docs/runbooks: 12 files, 80 passages, last indexed 2026-...``."""
    where = "shared files only" if status.folder is None else \
        str(status.folder) + ("" if status.folder.is_dir() else " (NOT FOUND)")
    when = "never indexed" if status.last_indexed_at is None else "last indexed " + \
        datetime.fromtimestamp(status.last_indexed_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (f"{status.name}  {where}: {status.files} file(s), {status.passages} passage(s), "
            f"{when}")


COMMANDS = {"knowledge": _knowledge}
