"""Which maiden this is: the installed distribution's version, as ``maiden --version``,
``/healthz`` and ``maiden run``'s banner say it."""

from __future__ import annotations

import functools

__all__ = ["maiden_version"]


@functools.cache
def maiden_version() -> str:
    """The version of the installed ``maiden`` distribution; ``0+unknown`` when the code
    runs from a checkout that was never installed (its metadata is missing)."""
    from importlib import metadata  # only when asked: the CLI starts without it

    try:
        return metadata.version("maiden")
    except metadata.PackageNotFoundError:
        return "0+unknown"
