"""The `maiden` commands, by responsibility; ``bot.cli`` parses the command line and
calls the one named in ``COMMANDS``. Each is ``async (loaded config, args) -> exit status``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine
from typing import Any

from ..config import LoadedConfig
from . import control, files, knowledge, memory, service, show, talk, threads
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PAUSED,
    EXIT_USAGE,
    UsageError,
)

__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PAUSED",
           "EXIT_USAGE", "Command", "UsageError"]

Command = Callable[[LoadedConfig, argparse.Namespace], Coroutine[Any, Any, int]]

COMMANDS: dict[str, Command] = {
    **service.COMMANDS, **talk.COMMANDS, **show.COMMANDS, **control.COMMANDS,
    **files.COMMANDS, **knowledge.COMMANDS, **memory.COMMANDS,
    **threads.COMMANDS,  # `threads`: its export and delete, and the listing (show's)
}
