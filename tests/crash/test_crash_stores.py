"""The drill's kill points sit on every store it drives: each method ``_Crashing``
overrides (and ``deliveries``, which it calls) is one the store has, taking the same
parameters, so a kill point can never go quiet because a store names a step otherwise."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from tests.crash.driver import (
    CrashingFilesStore,
    CrashingPostgresStore,
    CrashingStore,
    _Crashing,
)

OVERRIDDEN = sorted(name for name, value in vars(_Crashing).items()
                    if inspect.iscoroutinefunction(value))


def _parameters(method: Callable[..., Any]) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]


@pytest.mark.parametrize("crashing", [CrashingStore, CrashingFilesStore, CrashingPostgresStore])
@pytest.mark.parametrize("name", [*OVERRIDDEN, "deliveries"])
def test_every_kill_point_wraps_a_method_of_the_store(crashing: type, name: str) -> None:
    (store,) = [base for base in crashing.__bases__ if base is not _Crashing]
    own = getattr(store, name, None)
    assert own is not None, f"{store.__name__} has no {name}"
    if name in vars(_Crashing):
        assert _parameters(getattr(_Crashing, name)) == _parameters(own), name
