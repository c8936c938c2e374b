"""Whose memories an HTTP caller (a token, or a console session under it) may see and
correct (DESIGN §6): with ``operate``, every one; else its own (``concerns``), under any
name it goes by: ``http:NAME`` for what it said through the API, ``console:NAME`` through
the console, as a thread it starts in either is its own (``owners``). Shared by
``/v1/memories`` and the console's Memory page."""

from __future__ import annotations

from runtime import Memory, concerns, edit_refusal

from .auth import Credential

__all__ = ["VIAS", "editing_refusal", "names", "sees"]

VIAS = ("http", "console")
"""The channels a token's holder speaks through, whose runs name them ``VIA:NAME``."""


def names(who: Credential) -> tuple[str, ...]:
    """The people a caller is to the memories (``http:NAME``, ``console:NAME``)."""
    return tuple(f"{via}:{who.name}" for via in VIAS)


def sees(who: Credential, memory: Memory) -> bool:
    """Whether ``who`` may see (and so forget) ``memory``."""
    return who.may("operate") or any(concerns(memory, name) for name in names(who))


def editing_refusal(who: Credential, memory: Memory) -> str | None:
    """Why ``who`` may not change the text of ``memory`` (one it sees), or None."""
    why = [edit_refusal(memory, name, who.rights) for name in names(who)]
    return None if None in why else why[0]
