"""Slack's side of the words: Block Kit for replies and approval prompts (pure).

Replies go in a ``markdown`` block, which Slack renders from standard Markdown
(the model's output) itself: no hand-made conversion to mrkdwn. The top-level
``text`` stays as the notification and fallback.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from slack_sdk.models.blocks import ContextActionsBlock, FeedbackButtonsElement

from runtime import ApprovalDelivery

from ..prompts import prompt_text, short_json

__all__ = ["APPROVE", "DENY", "FEEDBACK", "approval_blocks", "decided_blocks",
           "feedback_blocks", "markdown_blocks", "parse_choice", "parse_vote", "plain"]

APPROVE = "maiden_approve"
DENY = "maiden_deny"
FEEDBACK = "maiden_feedback"


def markdown_blocks(text: str) -> list[dict[str, Any]]:
    return [{"type": "markdown", "text": text}]


def feedback_blocks(run_id: str) -> list[dict[str, Any]]:
    """Slack's 👍 / 👎 feedback buttons for a run's answer; each value names the run."""
    block = ContextActionsBlock(block_id=f"{FEEDBACK}:{run_id}", elements=[
        FeedbackButtonsElement(
            action_id=FEEDBACK,
            positive_button={"text": {"type": "plain_text", "text": "👍"},
                             "value": f"up:{run_id}",
                             "accessibility_label": "This answer helped"},
            negative_button={"text": {"type": "plain_text", "text": "👎"},
                             "value": f"down:{run_id}",
                             "accessibility_label": "This answer did not help"})])
    return [block.to_dict()]


def parse_vote(action: dict[str, Any]) -> tuple[Literal["up", "down"], str] | None:
    """(vote, run id) from a click on the feedback buttons, or None."""
    if action.get("action_id") != FEEDBACK:
        return None
    value, _, run_id = str(action.get("value") or "").partition(":")
    if value not in ("up", "down") or not run_id:
        return None
    return ("up" if value == "up" else "down"), run_id


def plain(prompt: ApprovalDelivery) -> str:
    return f"Approval needed: {prompt.name} {short_json(prompt.arguments, 200)}"


def approval_blocks(prompt: ApprovalDelivery) -> list[dict[str, Any]]:
    """The prompt with Approve / Deny buttons; each button's value binds the decision to
    the run, the call and the arguments the person saw."""
    value = json.dumps({"run": prompt.run_id, "call": prompt.tool_call_id,
                        "hash": prompt.arguments_hash, "name": prompt.name},
                       separators=(",", ":"))
    return [
        {"type": "markdown", "text": prompt_text(prompt)},
        {"type": "actions", "block_id": "maiden_approval", "elements": [
            {"type": "button", "action_id": APPROVE, "style": "primary", "value": value,
             "text": {"type": "plain_text", "text": "Approve"}},
            {"type": "button", "action_id": DENY, "style": "danger", "value": value,
             "text": {"type": "plain_text", "text": "Deny"}},
        ]},
    ]


def decided_blocks(name: str, approve: bool, user: str) -> list[dict[str, Any]]:
    verb = "Approved" if approve else "Denied"
    return [{"type": "section", "text": {"type": "mrkdwn",
                                         "text": f"{verb} by <@{user}>: `{name}`"}}]


def parse_choice(action: dict[str, Any]) -> tuple[bool, dict[str, str]] | None:
    """(approve?, {"run", "call", "hash", "name"}) from a button click, or None."""
    if action.get("action_id") not in (APPROVE, DENY):
        return None
    try:
        value = json.loads(action.get("value") or "")
    except ValueError:
        return None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str)
                                              for k in ("run", "call", "hash")):
        return None
    return action["action_id"] == APPROVE, {k: str(v) for k, v in value.items()}
