"""From an MCP server's tool listing to maiden's tools, and from its results to JSON.

Plain functions over the SDK's values (read by attribute, so this module does not import
the SDK): which tools are offered and under what name, the effect class each gets, what a
result hands back to the model.

Effect classes from the tool annotations (hints a server may give):

=============================================  ==================
annotations                                    effect
=============================================  ==================
readOnlyHint = true                            read_only
idempotentHint = true, destructiveHint = false idempotent_write
anything else (no annotations included)        non_idempotent
=============================================  ==================

``destructiveHint`` defaults to true in the MCP spec, so an idempotent tool must also say
``destructiveHint = false`` to be re-run after a crash; ``effects`` in the config
overrides all of this.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence
from typing import Any

from ...model.attachments.refs import IMAGE_TYPES
from ..base import Effect, ToolImage
from .config import McpServerConfig

__all__ = ["MAX_NAME", "effect_from_hints", "effect_of", "error_text", "result_content",
           "select_tools", "task_only", "tool_name", "tool_prefix"]

MAX_NAME = 64
"""The longest tool name every provider accepts (OpenAI's limit)."""


def tool_prefix(server: str) -> str:
    """How the names of a server's tools begin: ``{server}__``, made safe (``tool_name``)."""
    return _safe(f"{server}__")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


def tool_name(server: str, tool: str) -> str:
    """``{server}__{tool}``, made safe for every provider: characters outside letters,
    digits, ``_`` and ``-`` become ``_``; a name over 64 characters is cut and given a
    hash of the whole, so two long names stay apart."""
    name = tool_prefix(server) + _safe(tool)
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}__{tool}".encode()).hexdigest()[:8]
    return f"{name[:MAX_NAME - 9]}_{digest}"


def effect_from_hints(
    read_only: bool | None, destructive: bool | None, idempotent: bool | None
) -> Effect:
    """The effect class the annotations earn (table in the module docstring)."""
    if read_only:
        return "read_only"
    if idempotent and destructive is False:
        return "idempotent_write"
    return "non_idempotent"


def effect_of(cfg: McpServerConfig, tool: Any) -> Effect:
    """The config's ``effects`` entry for ``tool`` (an SDK ``Tool``), or its annotations'."""
    override = cfg.effects.get(tool.name)
    if override is not None:
        return override
    hints = tool.annotations
    if hints is None:
        return "non_idempotent"
    return effect_from_hints(hints.read_only_hint, hints.destructive_hint,
                             hints.idempotent_hint)


def select_tools(cfg: McpServerConfig, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """The listed tools to offer (``tools`` allowlist; empty: all) and notes on config keys
    that name tools the server does not list."""
    listed = set(names)
    chosen = [n for n in names if not cfg.tools or n in cfg.tools]
    notes = []
    missing = [n for n in cfg.tools if n not in listed]
    if missing:
        notes.append(f"tools lists {', '.join(missing)}, which the server does not offer")
    for key in ("effects", "approval"):
        unknown = [n for n in getattr(cfg, key) if n not in listed]
        if unknown:
            notes.append(f"{key} names {', '.join(unknown)}, which the server does not offer")
    return chosen, notes


def task_only(tools: Sequence[Any]) -> tuple[list[Any], str | None]:
    """The tools (SDK ``Tool``s) that can be called the plain way, and a note naming those
    left out because they run only as MCP tasks (``execution.taskSupport = "required"``).

    maiden calls tools with ``tools/call`` and waits for the result; it does not use the
    task protocol. Such a call always fails, so the model is not offered the tool.
    """
    def required(tool: Any) -> bool:
        execution = getattr(tool, "execution", None)
        return getattr(execution, "task_support", None) == "required"

    left = [t.name for t in tools if required(t)]
    if not left:
        return list(tools), None
    they = "it runs" if len(left) == 1 else "they run"
    return [t for t in tools if not required(t)], (
        f"{', '.join(left)} left out: {they} only as an MCP task (execution.taskSupport "
        '"required"), which maiden does not support')


def result_content(result: Any) -> Any:
    """What a ``CallToolResult`` hands the model: its text (the blocks joined by newlines)
    when every block is text, else each block as JSON (audio and binary resources
    described, not copied; an image of a type the models take as a ``ToolImage``, which a
    model that sees images is shown); the structured content only when there are no
    blocks at all."""
    blocks = list(result.content or [])
    if not blocks:
        return result.structured_content if result.structured_content is not None else ""
    if all(getattr(b, "type", None) == "text" for b in blocks):
        return "\n".join(b.text for b in blocks)
    return [_block(b) for b in blocks]


def error_text(result: Any) -> str:
    """The message of an ``isError`` result."""
    texts = [b.text for b in result.content or [] if getattr(b, "type", None) == "text"]
    text = "\n".join(t for t in texts if t.strip())
    return text or "the tool reported an error without a message"


def _block(block: Any) -> dict[str, Any] | ToolImage:
    kind = getattr(block, "type", "unknown")
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "image" and block.mime_type in IMAGE_TYPES:
        try:
            return ToolImage(block.mime_type, base64.b64decode(block.data, validate=True))
        except ValueError:
            pass  # not base64: described below
    if kind in ("image", "audio"):
        return {"type": kind, "mime_type": block.mime_type,
                "note": f"{len(block.data) * 3 // 4} bytes of {kind} data, not shown"}
    if kind == "resource_link":
        return {"type": kind, "uri": str(block.uri), "name": block.name}
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        if text is not None:
            return {"type": kind, "uri": str(res.uri), "text": text}
        return {"type": kind, "uri": str(res.uri), "mime_type": getattr(res, "mime_type", None),
                "note": "binary content, not shown"}
    return {"type": kind}
