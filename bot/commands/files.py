"""`maiden files`: what the store holds of shared files, and `maiden files prune`."""

from __future__ import annotations

import argparse

from runtime import human_size

from ..config import LoadedConfig
from .common import EXIT_OK

__all__ = ["COMMANDS"]


async def _files(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from ..app import open_runtime

    async with open_runtime(loaded, recover=False, mcp=False,
                            writable=args.files_command == "prune") as runtime:
        if args.files_command == "prune":
            gone = await runtime.kept.files.prune(dry_run=args.dry_run)
            days = runtime.kept.files.config.retention_days
            verb = "would remove" if args.dry_run else "removed"
            print(f"{verb} {len(gone)} file(s), {human_size(sum(b.size for b in gone))}: "
                  f"stored over {days:g} days ago, named by no message or result")
            return EXIT_OK
        blobs = await runtime.kept.files.blobs()
        names = await runtime.kept.files.names()
    print(f"{len(blobs)} file(s), {human_size(sum(b.size for b in blobs))}")
    for blob in blobs:
        print(f"  {blob.digest}  {blob.media_type}  {human_size(blob.size)}")
        for name, thread in names.get(blob.digest, ()):
            print(f"    {name}  in thread {thread!r}")
        if blob.digest not in names:
            print("    (named by no message: `maiden files prune` removes it once it is "
                  "old enough)")
    return EXIT_OK


COMMANDS = {"files": _files}
