"""A thread's export (runtime/serving/export.py, ``records.export``): the thread, its
entries, runs, votes, notes, memories and files as JSON lines, each secret written
``[redacted]``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime import NotFound, tool
from runtime.model.memories import Provenance, ThreadScope, Writer
from runtime.stores.erasure import thread_scope
from tests.scripted import call


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


async def test_an_export_holds_the_thread_as_json_lines(make_runtime: Any) -> None:
    secret = "sk-live-0123456789"
    async with make_runtime([call("look", q=secret), {"text": "seen"}],
                            [look]) as (rt, _):
        shared = await rt.kept.files.put("notes.txt", "text/plain", b"some notes")
        run = await rt.send("t", f"read this, key {secret}", files=[shared])
        await rt.kept.feedback.vote(run.id, "up", user="U1", channel="cli")
        await rt.kept.notes.remember(thread_scope("t"), "k", "likes tea")
        said = Provenance(user="cli:me", thread_id="t", at=1.0)
        await rt.kept.memories.remember("the standup is at 9:15", ThreadScope(thread_id="t"),
                                        said, Writer(agent="main"))
        export = await rt.records.export("t", secrets=[secret])
        lines = [json.loads(line) async for line in export.lines()]
        with pytest.raises(NotFound):
            await rt.records.export("nobody")
    types = [line["type"] for line in lines]
    assert types == ["thread", "entry", "entry", "entry", "entry", "run", "vote", "note",
                     "memory", "file"]
    assert lines[0]["thread_id"] == "t" and lines[0]["format"] == 1
    assert [line["seq"] for line in lines[1:5]] == [0, 1, 2, 3]
    assert lines[1]["entry"]["text"] == "read this, key [redacted]"
    assert lines[5]["run"]["id"] == run.id and lines[5]["transitions"]
    assert lines[6]["vote"]["value"] == "up"
    assert lines[7]["note"]["text"] == "likes tea"
    assert lines[8]["memory"]["text"] == "the standup is at 9:15"
    assert lines[9] == {"type": "file", "digest": shared.digest, "names": ["notes.txt"],
                        "media_type": "text/plain", "size": 10,
                        "created_at": lines[9]["created_at"], "stored": True}
    assert secret not in json.dumps(lines)
