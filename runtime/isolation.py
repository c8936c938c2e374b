"""Keeping maiden's secrets out of the commands its tools run.

The ``shell`` tool hands a command only the variables ``pass_env`` names, but on Linux
a process can read another's environment and memory through ``/proc/<pid>/``:
``cat /proc/$PPID/environ`` in a command prints every API key and token maiden holds.
Two layers close that:

* **Non-dumpable** (``make_undumpable``, called at every CLI start): with
  ``prctl(PR_SET_DUMPABLE, 0)`` the kernel makes maiden's ``/proc/<pid>/`` files owned
  by root and refuses ``ptrace`` from processes of the same uid, so a command running as
  maiden's (non-root) user cannot read them. It does not stop root: a command running
  as root holds ``CAP_SYS_PTRACE`` and reads them anyway. One libc call through ctypes;
  the flag is not inherited across ``exec``, so the commands themselves are unaffected.
* **bubblewrap** (``/usr/bin/bwrap``, Debian's ``bubblewrap``), when it can create
  namespaces here: the command runs in a PID namespace of its own with its own
  ``/proc``, where maiden does not exist at all (``$PPID`` is bwrap's init, whose
  environment is the scrubbed one). That holds for root too. The filesystem is bound
  read-write as it is (``--bind / /``): the command can write where it could before,
  no more and no less; the sandbox is about maiden's process, not about files.

Containers often forbid namespaces, so bwrap is tried once (a ``true`` under the same
options) and the answer cached; without it the command still runs in a session of its
own, under the non-dumpable parent. ``describe_isolation`` says which is in effect, for
``maiden check``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import subprocess
import sys
from typing import Literal

__all__ = ["Sandbox", "bwrap_argv", "bwrap_usable", "describe_isolation", "make_undumpable"]

log = logging.getLogger("maiden.isolation")

Sandbox = Literal["auto", "bwrap", "off"]
"""``[tools.shell] sandbox``: bwrap when it works (auto), bwrap or refuse, or never."""

BWRAP = "/usr/bin/bwrap"
_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3
_PROBE_TIMEOUT_S = 10.0


def make_undumpable() -> bool:
    """Mark this process non-dumpable (Linux); True when it is afterwards."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        return bool(libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # no libc by that name, no prctl: not Linux after all
        return False


def bwrap_argv(argv: list[str], workdir: str) -> list[str]:
    """``argv`` under bwrap: own PID namespace and ``/proc``, same files, ``workdir``.

    ``--die-with-parent``: if maiden dies, the sandbox goes with it. No
    ``--new-session``: the command stays in the process group ``run_process`` made, so
    SIGTERM/SIGKILL to that group reach everything inside (and when bwrap's init, pid 1
    of the namespace, dies, the kernel kills whatever is left in it).
    """
    return [BWRAP, "--bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
            "--unshare-pid", "--die-with-parent", "--chdir", workdir, "--", *argv]


@functools.cache
def bwrap_usable() -> str | None:
    """None when bwrap runs a command here; else why not (absent, or no namespaces)."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if not os.access(BWRAP, os.X_OK):
        return f"{BWRAP} not found (Debian package bubblewrap)"
    try:
        probe = subprocess.run(bwrap_argv(["true"], "/"), capture_output=True, text=True,
                               timeout=_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{BWRAP} could not start: {exc}"
    if probe.returncode != 0:
        said = probe.stderr.strip().splitlines()
        return f"{BWRAP} cannot create namespaces here: {said[-1] if said else probe.returncode}"
    return None


def describe_isolation(sandbox: Sandbox) -> str:
    """One line: how a shell command is kept from maiden's secrets, on this machine."""
    undumpable = "a non-dumpable parent" if sys.platform.startswith("linux") else "no /proc"
    fallback = f"own session, {undumpable}, scrubbed environment"
    if sandbox == "off":
        return f"{fallback} (bwrap off: [tools.shell] sandbox = \"off\")"
    why_not = bwrap_usable()
    if why_not is None:
        return "bwrap: own PID namespace and /proc, own session, scrubbed environment"
    if sandbox == "bwrap":
        return f"NONE: [tools.shell] sandbox = \"bwrap\" but {why_not}; commands are refused"
    return f"{fallback} ({why_not})"
