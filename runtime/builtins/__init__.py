"""The built-in tools, each named in ``[tools] builtins`` to be offered to the model.

================  ====================  ==============================================
name              effect class          what it does
================  ====================  ==============================================
clock             read_only             the date and time in a zone
http_fetch        read_only             GET a public URL, as text (SSRF-safe)
memory            idempotent_write /    remember, recall and forget memories kept in
                  read_only             the store, each with a scope and its source;
                                        those that bear on a message recalled unasked
search_knowledge  read_only             passages of the ``[[knowledge]]`` folders, each
                                        with where it is (to cite)
send_message      non_idempotent        post to a configured channel target, through
                  (with reconcile)      the outbox (a crash never double-posts)
shell             non_idempotent,       run a command (off unless listed; asks a person
                  requires_approval     by default)
================  ====================  ==============================================

Each lives in its own module, imported only when listed. ``memory``,
``search_knowledge`` and ``send_message`` work through services of the runtime that serves
them (``memories``, ``knowledge``, ``send``), which their ``ToolContext`` carries because
they declare them (``needs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from ..model.config import BuiltinTool, ToolsConfig
from ..tools.base import Tool

__all__ = ["BUILTIN_NAMES", "BUILTIN_TOOLS", "builtin_tools"]

BUILTIN_NAMES: tuple[BuiltinTool, ...] = get_args(BuiltinTool)

BUILTIN_TOOLS: dict[str, tuple[str, ...]] = {
    "clock": ("clock",), "http_fetch": ("http_fetch",),
    "memory": ("remember", "recall", "forget"), "search_knowledge": ("search_knowledge",),
    "send_message": ("send_message",),
    "shell": ("shell",)}
"""The tools each built-in offers, by name (``tests/runtime/builtins`` holds them to it)."""


def builtin_tools(cfg: ToolsConfig, base_dir: Path) -> list[Tool]:
    """The tools ``[tools] builtins`` lists, made with their ``[tools.NAME]`` settings
    (paths in them relative to ``base_dir``, the config file's folder)."""
    made: list[Tool] = []
    for name in cfg.builtins:
        if name == "clock":
            from .clock import clock

            made.append(clock)
        elif name == "http_fetch":
            from .http_fetch import make_http_fetch

            made.append(make_http_fetch(cfg.http_fetch))
        elif name == "shell":
            from .shell import make_shell

            made.append(make_shell(cfg.shell, base_dir))
        elif name == "memory":
            from .memory import make_memory

            made += make_memory(cfg.memory)
        elif name == "search_knowledge":
            from .knowledge import make_search_knowledge

            made.append(make_search_knowledge())
        else:
            from .send_message import make_send_message

            made.append(make_send_message())
    return made
