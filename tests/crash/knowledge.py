"""A crash drill of the knowledge indexing pass: one process indexes a folder into a real
store, killable right after the ``--kill-count``-th file it stores (``after_file_indexed``,
the kill point of ``tests/crash/driver.py``'s stores).

    python -m tests.crash.knowledge --db DB --store sqlite|files|postgres [--dsn DSN] \\
        --folder DIR [--kill-at after_file_indexed [--kill-count N]]

It runs one pass (``runtime.serving.knowledge.Indexer``) over the source ``docs`` (the
folder ``--folder``), then prints what the store holds as JSON: every file's record
(without when it was indexed) and every passage, found by the word ``drill`` that each
passage of the drills' documents holds, in the store's order of them (a passage stored
twice would be listed twice).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime.model.knowledge import KnowledgeConfig
from runtime.serving.knowledge import Indexer
from tests.crash.driver import KillSwitch, open_store

WORD = "drill"
"""A word in every passage of the drills' documents: a search for it finds them all."""


async def main(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(args.folder)
    source = KnowledgeConfig(name="docs", path=folder.name, chunk_chars=200)
    async with open_store(args, KillSwitch(args.kill_at, args.kill_count)) as store:
        await Indexer(store, [source], folder.parent).index()
        files = await store.indexed_files()
        passages = await store.search_passages(WORD, ["docs"], limit=10_000)
    return {"files": [f.model_dump(exclude={"indexed_at"}) for f in files],
            "passages": sorted((p.path, p.n, p.section, p.text) for p in passages)}


def cli(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tests.crash.knowledge")
    p.add_argument("--db", required=True)
    p.add_argument("--store", choices=["sqlite", "files", "postgres"], default="sqlite")
    p.add_argument("--dsn")
    p.add_argument("--folder", required=True)
    p.add_argument("--kill-at", choices=["after_file_indexed"])
    p.add_argument("--kill-count", type=int, default=1)
    print(json.dumps(asyncio.run(main(p.parse_args(argv)))))


if __name__ == "__main__":
    cli()
