"""``Deadlines``: keys each due at their own time, on one timer."""

from __future__ import annotations

import asyncio

from runtime.serving.deadlines import Deadlines


async def test_each_key_is_due_at_its_own_time_unless_popped_or_moved_on() -> None:
    loop = asyncio.get_running_loop()
    fired: dict[str, float] = {}
    done = asyncio.Event()

    def due(key: str) -> None:
        fired[key] = loop.time()
        if key == "last":
            done.set()

    deadlines: Deadlines[str] = Deadlines(due)
    began = loop.time()
    deadlines.set("late", 60)
    deadlines.set("early", 0.05)  # the timer set for "late" is moved to it
    deadlines.set("popped", 0.05)
    deadlines.set("moved", 0.05)
    deadlines.set("last", 0.2)
    assert deadlines.pop("popped") and not deadlines.pop("popped")
    deadlines.set("moved", 0.1)
    assert "moved" in deadlines and sorted(deadlines) == ["early", "last", "late", "moved"]
    await asyncio.wait_for(done.wait(), 10)  # (not held back to the first key's time)
    assert sorted(fired) == ["early", "last", "moved"]
    for key, after in (("early", 0.05), ("moved", 0.1), ("last", 0.2)):
        assert fired[key] >= began + after - 0.002, (key, fired[key] - began)
    assert list(deadlines) == ["late"]
    deadlines.clear()


async def test_a_key_set_again_when_due_is_due_again_and_clear_forgets_them_all() -> None:
    loop = asyncio.get_running_loop()
    seen: list[str] = []
    again = asyncio.Event()

    def due(key: str) -> None:
        seen.append(key)
        if len(seen) == 1:
            deadlines.set(key, 0.01)  # set from its own call: the sweep keeps one timer
        else:
            again.set()

    deadlines: Deadlines[str] = Deadlines(due)
    deadlines.set("k", 0.01)
    await asyncio.wait_for(again.wait(), 10)
    assert seen == ["k", "k"]

    cleared: Deadlines[str] = Deadlines(seen.append)
    cleared.set("gone", 0.01)
    cleared.clear()
    later = loop.create_future()
    Deadlines(later.set_result).set("after", 0.05)
    await asyncio.wait_for(later, 10)
    assert seen == ["k", "k"]  # "gone" never came
