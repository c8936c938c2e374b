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

* **Another user, when maiden is root** (``[tools.shell] run_as``, "nobody" by default):
  root reads any process's ``/proc`` files, non-dumpable or not, and every file of
  maiden's too. So a root maiden starts each command as that user (``setgroups([])``,
  ``setregid``, ``setreuid`` in the child before ``exec``, bwrap included): the command
  holds no capability and another uid, and maiden's ``/proc/<pid>/environ`` is
  ``Permission denied`` to it. ``choose_user`` refuses a user that does not exist or is
  root, and ``check_drop`` tries the switch once at start, which also proves the user
  can enter the working directory; either failing refuses the shell tool at start.

Containers often forbid namespaces, so bwrap is tried once (a ``true`` under the same
options, as the user the commands run as) and the answer cached; without it the command
still runs in a session of its own, under the non-dumpable parent (and, as root, as
``run_as``). ``describe_isolation`` says which is in force, for ``maiden check`` and the
banner.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..model.config import Sandbox

__all__ = ["RunAs", "Sandbox", "bwrap_argv", "bwrap_usable", "check_drop", "choose_user",
           "describe_isolation", "euid", "isolation_line", "lookup_user", "make_undumpable"]

log = logging.getLogger("maiden.isolation")

BWRAP = "/usr/bin/bwrap"
_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3
_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class RunAs:
    """The unprivileged user a root maiden runs shell commands as."""

    name: str
    uid: int
    gid: int
    home: str

    def options(self) -> dict[str, Any]:
        """``subprocess`` options that start the child as this user, with no other group."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


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


def euid() -> int:
    """This process's effective uid; -1 where there is none (not POSIX)."""
    return os.geteuid() if hasattr(os, "geteuid") else -1


def lookup_user(name: str) -> RunAs | None:
    """The user ``name`` (or a numeric uid) from the password database; None if unknown."""
    import pwd

    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, OverflowError):
        return None
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def choose_user(uid: int, run_as: str,
                lookup: Callable[[str], RunAs | None] = lookup_user) -> RunAs | None:
    """Whom shell commands run as, for a maiden of effective uid ``uid``: None (maiden's
    own user) unless that is root; then ``run_as``, which must exist and not be root.
    ``ConfigError`` naming ``tools.shell.run_as`` otherwise."""
    if uid != 0:
        return None
    user = lookup(run_as)
    why = ("maiden runs as root, so shell commands run as this unprivileged user, "
           "who must not be root either")
    if user is None:
        raise ConfigError([("tools.shell.run_as", f"no user {run_as!r} on this machine; {why}")])
    if user.uid == 0 or user.gid == 0:
        which = f"uid {user.uid}" if user.uid == 0 else f"group {user.gid}"
        raise ConfigError([("tools.shell.run_as", f"{run_as!r} is root ({which}); {why}")])
    return user


def check_drop(user: RunAs, workdir: str) -> None:
    """Start ``cd workdir`` as ``user``, once: ``ConfigError`` naming ``tools.shell.run_as``
    if this process cannot switch to that user, or ``tools.shell.workdir`` if the user
    cannot enter the folder (the child changes directory before it drops, so a command
    would start there and find ``.`` unreadable)."""
    try:
        probe = subprocess.run(["/bin/sh", "-c", 'cd -- "$1"', "sh", workdir],
                               capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S,
                               stdin=subprocess.DEVNULL, env={}, cwd="/", **user.options())
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError([("tools.shell.run_as", f"cannot run commands as {user.name!r} "
                            f"(uid {user.uid}): {exc}")]) from None
    if probe.returncode != 0:
        raise ConfigError([("tools.shell.workdir", (
            f"{user.name!r} (uid {user.uid}), whom commands run as since maiden is root "
            f"([tools.shell] run_as), cannot enter {workdir}: give that user access, or "
            "choose a workdir it can use"))])


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
def bwrap_usable(user: RunAs | None = None) -> str | None:
    """None when bwrap runs a command here (as ``user``, if given); else why not (absent,
    or no namespaces: as another user than root, bwrap needs user namespaces)."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if not os.access(BWRAP, os.X_OK):
        return f"{BWRAP} not found (Debian package bubblewrap)"
    options = user.options() if user is not None else {}
    try:
        probe = subprocess.run(bwrap_argv(["true"], "/"), capture_output=True, text=True,
                               timeout=_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL, env={},
                               cwd="/", **options)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{BWRAP} could not start: {exc}"
    if probe.returncode != 0:
        said = probe.stderr.strip().splitlines()
        return f"{BWRAP} cannot create namespaces here: {said[-1] if said else probe.returncode}"
    return None


def isolation_line(sandbox: Sandbox, no_bwrap: str | None, user: RunAs | None,
                   *, linux: bool = True) -> str:
    """One line: how a shell command is kept from maiden's secrets. ``no_bwrap``: why
    bwrap does not work here (None: it does); ``user``: whom commands run as (None:
    maiden's own user, who is not root)."""
    who = f"as {user.name} (uid {user.uid})" if user is not None else "as maiden's own user"
    if sandbox == "bwrap" and no_bwrap is not None:
        return (f"NONE: [tools.shell] sandbox = \"bwrap\" but {no_bwrap}; "
                "the shell tool is refused")
    if sandbox != "off" and no_bwrap is None:
        return (f"bubblewrap sandbox (own PID namespace and /proc), {who}; "
                "own session, scrubbed environment")
    why = "[tools.shell] sandbox = \"off\"" if sandbox == "off" else no_bwrap
    if not linux:
        return f"no sandbox ({why}), {who}; own session, scrubbed environment"
    guard = "" if user is not None else " under a non-dumpable maiden"
    return (f"no sandbox ({why}), {who}{guard}: maiden's environment is not readable to "
            "it; own session, scrubbed environment")


def describe_isolation(sandbox: Sandbox, run_as: str = "nobody") -> str:
    """``isolation_line`` for this machine and process (bwrap tried as the command's user).
    ``ConfigError`` when ``run_as`` is unusable, as the shell tool's start would be."""
    user = choose_user(euid(), run_as)
    no_bwrap = bwrap_usable(user) if sandbox != "off" else None
    return isolation_line(sandbox, no_bwrap, user, linux=sys.platform.startswith("linux"))
