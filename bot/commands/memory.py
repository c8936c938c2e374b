"""`maiden memory`: what the agent remembers, every memory with its id, scope and source;
`maiden memory forget ID`; and `maiden memory forget --person ID`, every memory a person
said or that is about them (what is asked when someone is to be forgotten). The CLI is the
operator (every right): it sees and forgets every memory, whoever said it and wherever."""

from __future__ import annotations

import argparse
import time

from runtime import Listing, Memories, Memory, source_words

from ..config import LoadedConfig
from .common import EXIT_FAILED, EXIT_OK

__all__ = ["COMMANDS"]

ANY_OF = 1_000
"""How many memories a forget by the start of an id looks through."""


async def _memory(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from ..app import open_runtime

    forgetting = args.memory_command == "forget"
    async with open_runtime(loaded, recover=False, mcp=False, writable=forgetting) as runtime:
        memories = runtime.kept.memories
        if forgetting and args.person is not None:
            return await _forget_person(memories, args.person)
        if forgetting:
            return await _forget(memories, args.id)
        found = await memories.listing(Listing(query=args.query or "", kind=args.scope,
                                               thread_id=args.thread, at=memories.now()),
                                       args.limit)
    print(f"{len(found)} memor{'y' if len(found) == 1 else 'ies'}"
          + (" (the newest; --limit shows more)" if len(found) == args.limit else ""))
    for memory in found:
        print(_shown(memory))
    return EXIT_OK


async def _forget(memories: Memories, given: str) -> int:
    """Forget the memory of id ``given``, or the one whose id starts so."""
    found = await memories.lookup(given)
    if found is None:
        starting = [m for m in await memories.listing(Listing(), ANY_OF)
                    if m.id.startswith(given)]
        if len(starting) > 1:
            print(f"maiden: {given!r} starts {len(starting)} memories' ids: give more of it")
            return EXIT_FAILED
        found = starting[0] if starting else None
    if found is None or not await memories.erase(found.id):
        print(f"maiden: no memory {given!r} (`maiden memory` lists them)")
        return EXIT_FAILED
    print(f"forgot {found.id}: {found.text}")
    return EXIT_OK


async def _forget_person(memories: Memories, person: str) -> int:
    """Forget every memory ``person`` said or that is about them."""
    if not person.strip():
        print("maiden: --person names someone (slack:U0ANA, discord:1234, http:NAME)")
        return EXIT_FAILED
    gone = await memories.erase_person(person)
    print(f"forgot {gone} memor{'y' if gone == 1 else 'ies'} of {person}"
          + ("" if gone else " (none said by them or about them)"))
    return EXIT_OK


def _shown(memory: Memory) -> str:
    extra = [f"thread {memory.provenance.thread_id!r}"]
    if memory.expires_at is not None:
        extra.append("expires " + time.strftime("%Y-%m-%d %H:%M UTC",
                                                time.gmtime(memory.expires_at)))
    if memory.edited_by:
        extra.append(f"edited by {memory.edited_by}")
    return (f"  {memory.id}  [{memory.scope.kind}]  {memory.text}\n"
            f"    {source_words(memory)} · {' · '.join(extra)}")


COMMANDS = {"memory": _memory}
