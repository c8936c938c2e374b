"""Process limits `maiden run` sets for itself before it serves anything.

A server's connections are file descriptors, and the usual soft limit (1024, or 256 on
some systems) is far below what the kernel would grant: past it ``accept()`` fails
("out of system resource") and every other request times out with the attackers'.
The soft limit may be raised up to the hard limit without privileges, so it is, once.
"""

from __future__ import annotations

import logging

__all__ = ["raise_open_files"]

log = logging.getLogger("maiden")

_CEILING = 1 << 20
"""Never ask for more than this: an 'unlimited' hard limit is not a number to use."""


def raise_open_files(needed: int = 0) -> int | None:
    """Raise the soft limit on open files to the hard one; log the outcome once (with a
    warning if the limit stays under ``needed``). The limit now, or None where the
    ``resource`` module does not exist (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _CEILING if hard == resource.RLIM_INFINITY else min(hard, _CEILING)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.info("open files limit raised from %d to %d", soft, target)
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("open files limit stays at %d: %s", soft, exc)
    else:
        log.debug("open files limit %d", soft)  # nothing to do: nothing to say
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning("open files limit %d is below the %d connections [http] max_connections "
                    "allows (plus maiden's own files): raise the hard limit (ulimit -Hn, "
                    "LimitNOFILE=) or lower max_connections", soft, needed)
    return int(soft)
