"""`maiden memory`, `maiden memory forget ID` and `forget --person ID`, run as real
subprocesses on a real store: the CLI is the operator, so it lists every memory with its id,
scope and source, filters them, forgets any by its id (or the start of it) and a person's
all at once; `maiden threads delete` takes the memories a thread sourced with it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from runtime import SQLiteStore
from runtime.model.memories import Memory, PersonScope, Provenance, WorkspaceScope

ROOT = Path(__file__).resolve().parents[2]


def maiden(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env=env)


def remember(home: Path, thread: str, text: str, scope: str) -> None:
    call = json.dumps({"text": text, "scope": scope})
    sent = maiden(home, "send", thread, f"/tool remember {call}")
    assert sent.returncode == 0, sent.stdout + sent.stderr


def test_list_filter_and_forget(home: Path) -> None:
    toml = home / "agent.toml"
    toml.write_text(toml.read_text().replace('builtins = ["clock"]',
                                             'builtins = ["clock", "memory"]')
                    + '\n[tools.memory]\nscopes = ["thread", "agent", "workspace"]\n')
    remember(home, "t1", "the standup is at 9:15", "workspace")
    remember(home, "t1", "this thread is about the release", "thread")
    remember(home, "t2", "the wiki moved to docs.example", "agent")

    listed = maiden(home, "memory")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("3 memories\n")
    ids = dict((text, mid) for mid, text in
               re.findall(r"^  (m[0-9a-f]+)  \[\w+\]  (.+)$", listed.stdout, re.MULTILINE))
    assert set(ids) == {"the standup is at 9:15", "this thread is about the release",
                        "the wiki moved to docs.example"}
    assert "someone, cli thread t1, " in listed.stdout and "thread 't1'" in listed.stdout
    scoped = maiden(home, "memory", "list", "--scope", "agent")
    assert scoped.stdout.count("\n  m") == 1 and "wiki" in scoped.stdout
    searched = maiden(home, "memory", "list", "--query", "standup wiki", "--limit", "1")
    assert searched.stdout.startswith("1 memory (the newest")
    assert maiden(home, "memory", "list", "--thread", "t2").stdout.count("\n  m") == 1
    assert maiden(home, "memory", "list", "--scope", "nope").returncode == 2

    wiki = ids["the wiki moved to docs.example"]
    forgot = maiden(home, "memory", "forget", wiki[:10])
    assert forgot.returncode == 0 and forgot.stdout == \
        f"forgot {wiki}: the wiki moved to docs.example\n"
    again = maiden(home, "memory", "forget", wiki)
    assert again.returncode == 1 and "no memory" in again.stdout

    # Deleting thread t1 takes the two memories it sourced with it.
    deleted = maiden(home, "threads", "delete", "t1")
    assert deleted.returncode == 0 and ", 2 memories, " in deleted.stdout, deleted.stdout
    assert maiden(home, "memory").stdout == "0 memories\n"


def test_forget_a_person(home: Path) -> None:
    """`maiden memory forget --person ID`: what they said and what is about them, nothing
    of anyone else's; asked again, nothing more; an id and --person together are refused."""
    def kept(memory_id: str, user: str, scope: PersonScope | WorkspaceScope) -> Memory:
        said = Provenance(user=user, channel="slack", place="C1", thread_id="s1", at=1.0)
        return Memory(id=memory_id, text=f"{memory_id} text", scope=scope, provenance=said,
                      created_at=1.0, updated_at=1.0)

    async def plant() -> None:
        (home / "data").mkdir(exist_ok=True)
        async with SQLiteStore(home / "data" / "maiden.db") as store:
            for memory in (kept("m-said", "slack:U0ANA", WorkspaceScope()),
                           kept("m-about", "slack:U0BEN", PersonScope(user="slack:U0ANA")),
                           kept("m-bens", "slack:U0BEN", WorkspaceScope())):
                assert await store.put_memory(memory, f"call-{memory.id}")

    asyncio.run(plant())
    forgot = maiden(home, "memory", "forget", "--person", "slack:U0ANA")
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout == "forgot 2 memories of slack:U0ANA\n"
    left = maiden(home, "memory")
    assert left.stdout.startswith("1 memory\n") and "m-bens" in left.stdout
    again = maiden(home, "memory", "forget", "--person", "slack:U0ANA")
    assert again.returncode == 0 and again.stdout == \
        "forgot 0 memories of slack:U0ANA (none said by them or about them)\n"
    assert maiden(home, "memory", "forget", "m-bens", "--person", "slack:U0BEN"
                  ).returncode == 2
    assert maiden(home, "memory", "forget").returncode == 2
    assert maiden(home, "memory", "forget", "--person", " ").returncode == 1
