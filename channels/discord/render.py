"""Discord's side of the words: approval prompts as buttons whose custom_id holds the call,
and 👍 / 👎 under an answer whose custom_id holds the run (both answered after a restart)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from runtime import ApprovalDelivery

from ..prompts import prompt_text

__all__ = ["Choice", "approval_components", "approval_content", "custom_id", "feedback_components",
           "is_prompt", "parse_custom_id", "parse_vote_id"]

_ID = re.compile(r"^maiden:(?P<verb>[ad]):(?P<run>[0-9a-f]{32}):(?P<hash>[0-9a-f]{16}):"
                 r"(?P<call>.*)$")

_VOTE = re.compile(r"^maiden:f:(?P<value>up|down):(?P<run>[0-9a-f]{1,64})$")


@dataclass(frozen=True, slots=True)
class Choice:
    approve: bool
    run_id: str
    hash_prefix: str
    """The first 16 hex digits of the arguments' hash (custom_id holds 100 characters)."""
    call_id: str
    """Empty when it did not fit: the run's pending call is meant."""


def custom_id(prompt: ApprovalDelivery, approve: bool) -> str:
    """``maiden:{a|d}:{run}:{hash[:16]}:{call}``, at most 100 characters."""
    head = f"maiden:{'a' if approve else 'd'}:{prompt.run_id}:{prompt.arguments_hash[:16]}:"
    return head + (prompt.tool_call_id if len(head) + len(prompt.tool_call_id) <= 100 else "")


def parse_custom_id(value: str) -> Choice | None:
    found = _ID.match(value)
    if found is None:
        return None
    return Choice(approve=found["verb"] == "a", run_id=found["run"],
                  hash_prefix=found["hash"], call_id=found["call"])


def approval_content(prompt: ApprovalDelivery) -> str:
    return prompt_text(prompt)[:2_000]


def approval_components(prompt: ApprovalDelivery) -> list[dict[str, Any]]:
    return [{"type": 1, "components": [
        {"type": 2, "style": 3, "label": "Approve", "custom_id": custom_id(prompt, True)},
        {"type": 2, "style": 4, "label": "Deny", "custom_id": custom_id(prompt, False)},
    ]}]


def feedback_components(run_id: str) -> list[dict[str, Any]]:
    """👍 / 👎 buttons under a run's answer: ``maiden:f:{up|down}:{run}``."""
    return [{"type": 1, "components": [
        {"type": 2, "style": 2, "emoji": {"name": "👍"}, "custom_id": f"maiden:f:up:{run_id}"},
        {"type": 2, "style": 2, "emoji": {"name": "👎"}, "custom_id": f"maiden:f:down:{run_id}"},
    ]}]


def parse_vote_id(value: str) -> tuple[Literal["up", "down"], str] | None:
    """(vote, run id) from a feedback button's custom_id, or None."""
    found = _VOTE.match(value)
    if found is None:
        return None
    return ("up" if found["value"] == "up" else "down"), found["run"]


def is_prompt(message: dict[str, Any]) -> bool:
    """Whether a message is an approval prompt (it has Approve / Deny buttons)."""
    return any(parse_custom_id(str(button.get("custom_id") or "")) is not None
               for row in message.get("components") or []
               for button in row.get("components") or [])
