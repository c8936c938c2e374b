"""File names for the files store: any id becomes a name that is safe to put on disk.

Thread and run ids are arbitrary strings, so their names must be injective (two ids
never share a file), confined (never a path: no ``/``, no ``..``, no empty name) and
distinct on case-insensitive file systems too. Pure functions, no I/O.
"""

from __future__ import annotations

import hashlib

from ..base import check_thread_id

__all__ = ["key_file_name", "run_file_name", "thread_file_name", "thread_stem"]

_MAX_NAME = 180
# Lowercase only: an uppercase letter is escaped, so names stay distinct on
# case-insensitive file systems, where the escapes' own hex digits fold harmlessly.
_LITERAL = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-")


def thread_file_name(thread_id: str) -> str:
    """The stem of a thread's files (``{stem}.json``, ``{stem}.lock``): injective, never a path.

    The UTF-8 bytes of the id in ``[a-z0-9-]`` are kept and every other byte becomes
    ``_XX`` (uppercase hex), after a ``t-`` prefix so that the empty id has a name:
    ``a/b`` -> ``t-a_2Fb``, ``a_b`` -> ``t-a_5Fb``, ``..`` -> ``t-_2E_2E``. Uppercase
    letters are escaped as well (``A`` -> ``t-_41``), so two ids never share a file on
    a case-insensitive file system (macOS, Windows) either. A name longer than 180
    characters becomes ``h-{sha256(id)}`` instead; the prefixes keep the two forms
    apart, and the snapshot stores the id itself, checked on every load, in case two
    ids ever hash alike.
    """
    check_thread_id(thread_id)
    return thread_stem(thread_id)


def thread_stem(thread_id: str) -> str:
    """``thread_file_name`` without the id check.

    For ids checked already, and for ids read back from a pointer or a snapshot: a
    damaged one must still map to a name (and fail as a corrupt store), not raise
    ``InvalidThreadId``.
    """
    return _encode(thread_id, "t-")


def run_file_name(run_id: str) -> str:
    """The name of a run's pointer file: the thread-name rules with an ``r-`` prefix."""
    return _encode(run_id, "r-")


def key_file_name(key: str) -> str:
    """The name of an idempotency-key or delivery-key pointer: ``sha256(key)`` in hex.

    Those keys are only ever looked up, never listed, so a digest is enough; the
    pointer stores the key itself and is checked on every read.
    """
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _encode(text: str, prefix: str) -> str:
    # surrogatepass keeps this injective for run ids, which are not checked like thread ids.
    data = text.encode("utf-8", "surrogatepass")
    if len(prefix) + len(data) <= _MAX_NAME:
        name = prefix + "".join(chr(b) if b in _LITERAL else f"_{b:02X}" for b in data)
        if len(name) <= _MAX_NAME:
            return name
    return "h-" + hashlib.sha256(data).hexdigest()
