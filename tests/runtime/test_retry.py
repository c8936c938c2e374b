"""The one backoff and the one loop: pauses that double up to a longest, half of them
random where asked; a call made again until it works, its pause says give up, or another
error comes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runtime import Failed, StoreError, StoreGone, doubling, retrying, within
from runtime.retry import jittered


@pytest.mark.parametrize(("failures", "pause"), [
    (0, 0.5), (1, 1.0), (3, 4.0),       # doubling from the first
    (4, 5.0), (10_000, 5.0),            # up to the longest, however many failed
])
def test_the_pause_doubles_up_to_the_longest(failures: int, pause: float) -> None:
    assert doubling(failures, 0.5, 5.0) == pause


@pytest.mark.parametrize(("random", "pause"), [(0.0, 2.0), (0.5, 3.0), (1.0, 4.0)])
def test_half_of_a_jittered_pause_is_random(random: float, pause: float) -> None:
    assert jittered(4.0, lambda: random) == pause


async def test_a_call_is_made_again_until_it_works_each_pause_told_first() -> None:
    told: list[tuple[str, int, float, float]] = []
    slept: list[float] = []
    failures = iter([StoreError("cut"), StoreError("reset")])

    async def call() -> str:
        if (failure := next(failures, None)) is not None:
            raise failure
        return "done"

    def tell(failed: Failed[StoreError], pause: float) -> None:
        told.append((str(failed.error), failed.tries, failed.waited_s, pause))

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    got = await retrying(call, on=StoreError, pause=lambda f: doubling(f.tries - 1, 1.0, 9.0),
                         told=tell, sleep=sleep, first=StoreError("down before"))
    assert got == "done" and next(failures, None) is None
    assert told == [("down before", 1, 0.0, 1.0), ("cut", 2, 1.0, 2.0),
                    ("reset", 3, 3.0, 4.0)]
    assert slept == [1.0, 2.0, 4.0]


async def _not_waited(seconds: float) -> None:
    raise AssertionError(f"waited {seconds} s")


def _unless_gone(failed: Failed[StoreError]) -> float | None:
    return None if isinstance(failed.error, StoreGone) else 1.0


@pytest.mark.parametrize("error", [StoreGone("the file was deleted"), KeyError("a bug")])
async def test_a_pause_of_none_gives_up_with_the_error_and_others_are_not_waited(
        error: Exception) -> None:
    async def call() -> None:
        raise error

    with pytest.raises(type(error)) as raised:
        await retrying(call, on=StoreError, pause=_unless_gone, sleep=_not_waited)
    assert raised.value is error


def test_within_doubles_until_its_time_is_spent_then_gives_up() -> None:
    pause = within(60.0, 0.5, 5.0, worth=lambda error: not isinstance(error, StoreGone))
    cut = StoreError("cut")
    assert [pause(Failed(cut, tries, 0.0)) for tries in (1, 2, 5, 9)] == [0.5, 1.0, 5.0, 5.0]
    assert pause(Failed(StoreGone("deleted"), 1, 0.0)) is None  # not worth it
    short: Callable[[Failed[StoreError]], float | None] = within(0.2, 0.5, 5.0)
    last = short(Failed(cut, 1, 0.0))
    assert last is not None and 0.0 < last <= 0.2  # the last pause: what is left
    spent: Callable[[Failed[StoreError]], float | None] = within(0.0, 0.5, 5.0)
    assert spent(Failed(cut, 1, 0.0)) is None
