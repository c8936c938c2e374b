"""Which maiden this is (runtime/version.py): the installed distribution's version, read
once; ``0+unknown`` from a checkout that was never installed."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata

import pytest

from runtime.version import maiden_version


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    """Each test reads the version anew, and leaves none read under its own patches."""
    maiden_version.cache_clear()
    yield
    maiden_version.cache_clear()


def test_the_installed_version_is_told_and_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    told = maiden_version()
    assert told == metadata.version("maiden") != "0+unknown"
    asked: list[str] = []

    def version(name: str) -> str:
        asked.append(name)
        return "9.9"

    monkeypatch.setattr(metadata, "version", version)
    assert maiden_version() == told and asked == []  # not read again


def test_a_checkout_never_installed_is_an_unknown_version(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert maiden_version() == "0+unknown"  # a version still (PEP 440: 0, local "unknown")
