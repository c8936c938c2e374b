"""Words every chat channel uses the same way (approval prompts, refusals, status)."""

from __future__ import annotations

import json
from typing import Any

from runtime import ApprovalDelivery

__all__ = ["prompt_text", "refusal_text", "short_json"]


def short_json(value: Any, limit: int = 600) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def prompt_text(prompt: ApprovalDelivery) -> str:
    """The question a person is asked, in Markdown."""
    if prompt.reason == "uncertain_side_effect":
        why = ("The process stopped while this call was running, so it may or may not have "
               "happened. Run it again?")
    else:
        why = "This call needs a person's approval before it runs."
    asked = f" (asked by {prompt.asked_by})" if prompt.asked_by else ""
    return (f"**Approval needed**{asked}: `{prompt.name}`\n"
            f"```\n{short_json(prompt.arguments)}\n```\n{why}")


def refusal_text(what: str) -> str:
    return f"Sorry, you may not {what} here."
