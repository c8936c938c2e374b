"""``eager.within``: a coroutine's first step at once, the rest under its deadline."""

from __future__ import annotations

import asyncio

import pytest

from runtime.tools.eager import within


async def test_a_coroutine_that_never_waits_returns_its_value() -> None:
    async def at_once() -> str:
        return "done"

    assert await within(at_once(), 0.01) == "done"


async def test_a_coroutine_that_waits_gets_what_it_waits_for() -> None:
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def waits() -> int:
        await asyncio.sleep(0)
        got = await ready
        await asyncio.sleep(0)
        return got + 1

    call = asyncio.create_task(within(waits(), 10))
    await asyncio.sleep(0)
    ready.set_result(41)
    assert await asyncio.wait_for(call, 10) == 42


async def test_an_error_after_a_wait_is_the_callers() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await within(fails(), 10)


async def test_past_its_deadline_it_is_cancelled_and_the_caller_times_out() -> None:
    cut = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cut.set()

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(within(forever(), 0.05), 10)
    assert cut.is_set()


async def test_a_cancel_of_the_caller_reaches_the_coroutine() -> None:
    started, cut = asyncio.Event(), asyncio.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cut.set()

    call = asyncio.create_task(within(forever(), 60))
    await asyncio.wait_for(started.wait(), 10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert cut.is_set()


async def test_a_coroutine_may_handle_its_cancellation_and_return() -> None:
    started = asyncio.Event()

    async def stops_cleanly() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # it may still wait while it tidies up
            return "tidied"
        return "never"

    call = asyncio.create_task(within(stops_cleanly(), 60))
    await asyncio.wait_for(started.wait(), 10)
    call.cancel()
    assert await asyncio.wait_for(call, 10) == "tidied"
