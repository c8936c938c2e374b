"""``shell``: run a command in the configured working directory (``non_idempotent``;
a person approves each command unless ``[tools.shell] requires_approval = false``).

How the command runs depends on ``[tools.shell] allow``:

* **empty** (any command): through ``/bin/sh -c``, so pipes, ``&&`` and redirects work.
  Nothing is filtered; what keeps it safe is the person who approves it, and they see
  the exact string the shell gets.
* **a list of prefixes** (``["git status", "ls"]``): split into words like a shell
  would (quotes, backslashes) and run *without* a shell. A prefix check on a string
  given to ``sh`` means nothing: ``git status; rm -rf ~`` starts with ``git status``.
  So the allowlist is matched on whole words (``git status`` allows ``git status -s``,
  not ``git statusx`` nor ``git stash``). A command holding shell syntax (``; & | < >
  ( ) $``, a backtick or a newline outside quotes; ``$`` or a backtick inside double
  quotes) is refused with a reason rather than run with those characters as plain
  arguments - which is what would happen, and not what the model meant. A prefix
  allows every argument after it: ``git`` allows ``git push --force``.

Either way the command runs in a process group of its own: at ``timeout_s``, or when
the run is cancelled, the whole group (the shell and everything it started) gets
SIGTERM, then SIGKILL after ``[runtime] cancel_grace_s`` (``runtime.run_process``).
A timed-out command still answers, with ``timed_out`` and the output so far; the
tool's own timeout in the loop, a little later, is only a backstop. Each of stdout
and stderr is cut at ``max_output_bytes`` (the rest is read and dropped). The command
sees only the environment variables ``pass_env`` names (``PATH``, ``HOME``, the locale...):
the agent's API keys and tokens stay out of reach of ``env``. Nor can it read them from
maiden's process (``cat /proc/$PPID/environ``): under bubblewrap when it works here
(``[tools.shell] sandbox``; a PID namespace and ``/proc`` of its own), else in a session
of its own under a non-dumpable maiden; and when maiden is root, always as the
unprivileged ``[tools.shell] run_as`` user, since root reads any process
(``runtime.tools.isolation`` says what each covers). If that user does not exist, is root,
or cannot be switched to or cannot enter the working directory, the tool is refused at
start. The working directory is where it starts, not a file sandbox: the command can
write what its user can.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..model.config import ShellConfig
from ..tools.base import Tool, ToolContext
from ..tools.isolation import bwrap_argv, bwrap_usable, check_drop, choose_user, euid
from ..tools.process import run_process

__all__ = ["make_shell"]

_BACKSTOP_S = 15.0
"""The loop's timeout is ``timeout_s`` plus this: room for the grace period (5 s by
default) and the reaping, so the tool's own timeout answers first."""
_SHELL_SYNTAX = frozenset(";&|<>()$`\n")


def make_shell(cfg: ShellConfig, base_dir: Path) -> Tool:
    """The ``shell`` tool, run in ``cfg.workdir`` (relative to ``base_dir``)."""
    workdir = (base_dir / cfg.workdir).resolve()
    if not workdir.is_dir():
        raise ConfigError([("tools.shell.workdir", f"{workdir} is not a directory")])
    prefixes = [_allowed(entry) for entry in cfg.allow]
    user = choose_user(euid(), cfg.run_as)
    if user is not None:
        check_drop(user, str(workdir))
    # Passed on as they are, HOME, USER and LOGNAME would name root, whom it no longer is.
    who = {} if user is None else {"HOME": user.home, "USER": user.name, "LOGNAME": user.name}
    # Tried once, here at start-up rather than on the first command: the answer is cached.
    no_bwrap = bwrap_usable(user) if cfg.sandbox != "off" else "off"
    if cfg.sandbox == "bwrap" and no_bwrap is not None:
        raise ConfigError([("tools.shell.sandbox", f"\"bwrap\" is required but {no_bwrap}")])

    async def shell(ctx: ToolContext, command: str) -> dict[str, Any]:
        if not command.strip():
            raise ValueError("the command is empty")
        argv = ["/bin/sh", "-c", command] if not prefixes else _checked(command, prefixes)
        if not workdir.is_dir():
            raise FileNotFoundError(f"the working directory {workdir} ([tools.shell] "
                                    "workdir) does not exist")
        env = {name: value for name in cfg.pass_env
               if (value := who.get(name, os.environ.get(name))) is not None}
        # Looked for first: bwrap reports a missing command as its own failure (exit 1), and
        # exec as another user reports a PATH folder it may not search as EACCES.
        if not _runnable(argv[0], workdir, env.get("PATH", os.defpath)):
            raise FileNotFoundError(f"command not found: {argv[0]}")
        if no_bwrap is None:
            argv = bwrap_argv(argv, str(workdir))
        try:
            result = await run_process(
                *argv, cwd=str(workdir), env=env, grace_s=ctx.cancel_grace_s,
                timeout_s=cfg.timeout_s, max_output_bytes=cfg.max_output_bytes,
                user=None if user is None else user.uid,
                group=None if user is None else user.gid)
        except FileNotFoundError:
            raise FileNotFoundError(f"command not found: {argv[0]}") from None
        return {"exit_code": result.returncode, "stdout": result.stdout,
                "stderr": result.stderr, "truncated": result.truncated,
                "timed_out": result.timed_out}

    return Tool(shell, name="shell",
                description=_describe(cfg, workdir, prefixes, signal_code=(
                    "-N or 128+N" if no_bwrap is None else "-N"),
                    user=None if user is None else user.name),
                effect="non_idempotent", requires_approval=cfg.requires_approval,
                timeout_s=cfg.timeout_s + _BACKSTOP_S)


def _runnable(command: str, workdir: Path, path: str) -> bool:
    """Whether ``command`` names an executable, as exec would find it from ``workdir``."""
    if "/" in command:
        found = workdir / command
        return found.is_file() and os.access(found, os.X_OK)
    return shutil.which(command, path=path) is not None


def _allowed(entry: str) -> list[str]:
    try:
        words = shlex.split(entry)
    except ValueError as exc:
        raise ConfigError([("tools.shell.allow", f"cannot read {entry!r}: {exc}")]) from None
    if not words:
        raise ConfigError([("tools.shell.allow", "an empty entry would allow every command; "
                            "leave the list empty for that")])
    return words


def _checked(command: str, prefixes: list[list[str]]) -> list[str]:
    """The command's words, if it may run under the allowlist; else ``PermissionError``."""
    syntax = _shell_syntax(command)
    if syntax is not None:
        raise PermissionError(
            f"refused: {syntax!r} is shell syntax, and with [tools.shell] allow set commands "
            "run without a shell (no ; && | redirects $ or backticks): run one allowed "
            "command per call, quoting arguments that hold such characters")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"cannot read the command: {exc}") from None
    if not any(argv[:len(p)] == p for p in prefixes):
        allowed = ", ".join(repr(" ".join(p)) for p in prefixes)
        raise PermissionError(f"refused: {command!r} does not start with a command in "
                              f"[tools.shell] allow ({allowed})")
    return argv


def _shell_syntax(command: str) -> str | None:
    """The first character of ``command`` a shell would treat as syntax, or None: one of
    ``_SHELL_SYNTAX`` outside quotes, or ``$`` or a backtick inside double quotes (where a
    shell still expands them); a backslash escapes the next character."""
    quote: str | None = None
    escaped = False
    for ch in command:
        if escaped:
            escaped = False
        elif quote == "'":
            quote = None if ch == "'" else quote
        elif ch == "\\":
            escaped = True
        elif quote == '"':
            if ch in "$`":
                return ch
            quote = None if ch == '"' else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _SHELL_SYNTAX:
            return ch
    return None


def _describe(cfg: ShellConfig, workdir: Path, prefixes: list[list[str]],
              signal_code: str, user: str | None) -> str:
    # Under bwrap the command is its child, and bwrap reports a signal as a shell does.
    limits = (f"It is stopped after {cfg.timeout_s:g} s; stdout and stderr are each cut at "
              f"{cfg.max_output_bytes:,} bytes. Returns exit_code ({signal_code}: ended by "
              "signal N), "
              "stdout, stderr, truncated and timed_out."
              + (f" It runs as the user {user}." if user is not None else ""))
    if not prefixes:
        return f"Run a shell command (/bin/sh -c) in {workdir}. {limits}"
    allowed = ", ".join(repr(" ".join(p)) for p in prefixes)
    return (f"Run one command in {workdir}, without a shell (no pipes, redirects, ; or &&, "
            f"variables or globs). Only commands starting with {allowed} are allowed. "
            f"{limits}")
