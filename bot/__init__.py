"""The maiden application: config, composition and the command line.

The public names load on first use, so that `python -m bot` (and the `maiden` script)
imports nothing heavy before ``bot.__main__`` can catch a Ctrl-C typed while the command
line loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import LoadedConfig, MaidenConfig, load_config, parse_config

__all__ = ["LoadedConfig", "MaidenConfig", "load_config", "parse_config"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import config

        return getattr(config, name)
    raise AttributeError(f"module 'bot' has no attribute {name!r}")
