"""The chaos soak's own parts (chaos/, issue 52), without running a soak: the plan is the
same for the same seed and round-trips through its JSON, the model reads the run it is
asked for from what it is sent and fails the same requests on a replay, and the proxy
cuts and restores connections."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from chaos.model import _turn, failure
from chaos.plan import Plan, make_plan
from chaos.proxy import Proxy


def test_a_seed_makes_one_plan_and_a_replay_file_gives_it_back(tmp_path: Path) -> None:
    plan = make_plan(7, 120, "postgres", 3)
    assert make_plan(7, 120, "postgres", 3) == plan
    assert make_plan(8, 120, "postgres", 3) != plan
    plan.dump(tmp_path / "plan.json")
    assert Plan.load(tmp_path / "plan.json") == plan
    kinds = {f.kind for f in plan.faults}
    assert kinds == {"kill", "term", "pg_cut", "model_outage"}, kinds
    assert {o.route for o in plan.ops} == {"http", "http_stream", "openai", "openai_stream",
                                           "slack"}
    assert any(o.decide for o in plan.ops) and any(o.cancel_after_s for o in plan.ops)


@pytest.mark.parametrize("seed", range(20))
def test_the_plan_never_takes_down_the_last_replica(seed: int) -> None:
    plan = make_plan(seed, 300, "postgres", 3)
    down: dict[int, float] = {}
    for fault in (f for f in plan.faults if f.kind in ("kill", "term")):
        down = {r: until for r, until in down.items() if until > fault.at}
        assert fault.replica not in down
        down[fault.replica] = fault.at + fault.duration_s + 6.0
        assert len(down) < 3, (seed, fault)
    sqlite = make_plan(seed, 300, "sqlite", 1)
    assert not [f for f in sqlite.faults if f.kind == "pg_cut"]


def test_the_model_fails_the_same_requests_on_a_replay() -> None:
    seen = [failure(5, f"m{i:05d}", turn, attempt)
            for i in range(2000) for turn in range(2) for attempt in (1, 2)]
    assert seen == [failure(5, f"m{i:05d}", turn, attempt)
                    for i in range(2000) for turn in range(2) for attempt in (1, 2)]
    share = sum(1 for s in seen if s) / len(seen)
    assert 0.07 < share < 0.13, share
    assert {s for s in seen if s} == {"500", "429", "cut", "empty"}


def _call(tag: str, turn: int, name: str) -> dict[str, Any]:
    return {"id": f"call_{tag}_{turn}_0", "type": "function",
            "function": {"name": name, "arguments": json.dumps({"tag": tag, "n": 0})}}


@pytest.mark.parametrize(("messages", "expected"), [
    ([{"role": "user", "content": "[m00001] ana asks for look then note"}],
     ("m00001", 0, [["look"], ["note"]], 0)),
    ([{"role": "user", "content": "[m00001] ana asks for look+charge"},
      {"role": "assistant", "content": None, "tool_calls": [_call("m00001", 0, "look")]},
      {"role": "tool", "tool_call_id": "call_m00001_0_0", "content": "look m00001#0 done"}],
     ("m00001", 1, [["look", "charge"]], 1)),
    # A cancelled run's message and the next one, joined into one user message.
    ([{"role": "user", "content": "[m00002] ben asks for charge\n\n[m00003] ben asks for "
                                  "nothing"}], ("m00003", 0, [], 0)),
    # A result that came after the thread moved on, shown as a notice.
    ([{"role": "user", "content": "[m00004] cy asks for deploy"},
      {"role": "assistant", "content": None, "tool_calls": [_call("m00004", 0, "deploy")]},
      {"role": "tool", "tool_call_id": "call_m00004_0_0",
       "content": '{"error": {"type": "cancelled", "message": "no result was recorded for '
                  'this call"}}'},
      {"role": "user", "content": "[m00005] cy asks for nothing"},
      {"role": "assistant", "content": "answer to m00005: 0 results"},
      {"role": "user", "content": "[notice] an earlier call to deploy returned: done"}],
     ("m00004", 1, [["deploy"]], 1)),
    ([{"role": "user", "content": "hello"}], None),
])
def test_the_model_reads_which_run_asks(messages: list[dict[str, Any]],
                                        expected: tuple[Any, ...] | None) -> None:
    assert _turn({"messages": [{"role": "system", "content": "s"}, *messages]}) == expected


async def _closed(reader: asyncio.StreamReader) -> bool:
    """Whether the other side has gone (an EOF or a reset)."""
    try:
        return await reader.read(4) == b""
    except ConnectionResetError:
        return True


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(100):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.mark.timeout(20)
async def test_the_proxy_cuts_every_connection_and_refuses_new_ones_until_restored() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, Proxy("127.0.0.1", port) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"ping")
        assert await reader.read(4) == b"ping"
        assert proxy.cut() == 1
        assert await _closed(reader)  # the connection is gone
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await _closed(reader)  # refused: closed as soon as accepted
        writer.close()
        proxy.restore()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"pong")
        assert await reader.read(4) == b"pong"
        writer.close()
