"""From a server's tool listing to maiden's ``Tool``s: names, effects, approval, and the
check of a call's arguments against the tool's JSON schema.

Arguments the schema refuses get the loop's ``invalid_arguments`` result without reaching
the server. A schema that is itself invalid is not held against the call: the server
judges the arguments then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from jsonschema import exceptions, validators  # type: ignore[import-untyped]

from ..base import Tool, ToolContext
from .config import McpServerConfig
from .mapping import effect_of, select_tools, task_only, tool_name

__all__ = ["argument_check", "build_tools"]

Call = Callable[[ToolContext, dict[str, Any]], Awaitable[Any]]


def build_tools(
    cfg: McpServerConfig, listed: list[Any], call_for: Callable[[str], Call]
) -> tuple[dict[str, Tool], list[str]]:
    """The tools to offer from ``listed`` (the SDK's ``Tool``s), by maiden name, each
    calling ``call_for(its MCP name)``; and notes on what was left out or not found."""
    by_name = {t.name: t for t in listed}
    chosen, notes = select_tools(cfg, list(by_name))
    callable_, left_out = task_only([by_name[name] for name in chosen])
    chosen = [t.name for t in callable_]
    notes += [left_out] if left_out else []
    tools: dict[str, Tool] = {}
    for name in chosen:
        spec = by_name[name]
        made = tool_name(cfg.name, name)
        if made in tools:
            notes.append(f"{name} is left out: its name {made} is already used")
            continue
        hints = spec.annotations
        description = spec.description or (hints.title if hints else None) or spec.title \
            or name
        schema = {k: v for k, v in spec.input_schema.items() if k != "title"}
        tools[made] = Tool.from_schema(
            made, description, schema, call_for(name), check=argument_check(schema),
            effect=effect_of(cfg, spec), requires_approval=cfg.approval.get(name, False),
            timeout_s=cfg.timeout_s)
    return tools, notes


def argument_check(schema: dict[str, Any]) -> Callable[[dict[str, Any]], None] | None:
    """A function raising ``ValueError`` (with the reason) for arguments ``schema``
    refuses; None if the schema cannot be used to check anything."""
    try:
        cls = validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except (exceptions.SchemaError, exceptions.UnknownType, TypeError):
        return None

    def check(arguments: dict[str, Any]) -> None:
        error = exceptions.best_match(validator.iter_errors(arguments))
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path) or "arguments"
            raise ValueError(f"{where}: {error.message}")

    return check
