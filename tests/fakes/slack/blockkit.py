"""Block Kit shapes Slack refuses, as the Block Kit reference gives them (pure, no I/O).

``problem(blocks, surface)`` names the first rule a list of blocks breaks, as Slack's own
answers do (``[ERROR] <what> [json-pointer:/blocks/0/text/text]``), or None. Each limit cites
the reference page it comes from (https://docs.slack.dev/reference/block-kit/...). Blocks of a
type the fake knows but does not look into (``image``, ``table``, ``video``...) are only
checked for their ``block_id``: the product does not send them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["BLOCKS_PAGE", "KNOWN_TYPES", "MOST_BLOCKS", "Problem", "Surface", "problem"]

Surface = Literal["message", "home"]

BLOCKS_PAGE = "https://docs.slack.dev/reference/block-kit/blocks"
MOST_BLOCKS: dict[Surface, int] = {"message": 50, "home": 100}
"""BLOCKS_PAGE: "You can include up to 50 blocks in each message, and 100 blocks in modals
or Home tabs"."""
KNOWN_TYPES = frozenset({
    "actions", "context", "context_actions", "divider", "file", "header", "image", "input",
    "markdown", "plan", "rich_text", "section", "table", "task_card", "video"})
"""BLOCKS_PAGE's list of blocks; any other ``type`` is refused."""
_MESSAGES_ONLY = frozenset({"markdown", "context_actions", "plan", "task_card", "table"})
"""Each one's page lists "Messages" as its only surface (markdown-block,
context-actions-block, plan-block, task-card-block, table-block)."""
_NO_HOME = frozenset({"file"})  # file-block: messages only (it is read-only, remote files)

_TEXT_MOST = 3_000
"""composition-objects/text-object: "minimum length ... 1 and maximum length ... 3000"."""
_MARKDOWN_MOST = 12_000
"""blocks/markdown-block: "Limit 12,000 characters"; "the cumulative limit for all
markdown blocks in a single payload is 12,000 characters"."""


@dataclass(frozen=True)
class Problem:
    """What Slack would refuse; ``too_many``: the count of blocks, which some methods answer
    with their own code (``msg_blocks_too_many``)."""

    message: str
    too_many: bool = False


class _Refused(Exception):
    def __init__(self, what: str, pointer: str) -> None:
        super().__init__(f"[ERROR] {what} [json-pointer:{pointer}]")


def problem(blocks: Any, surface: Surface) -> Problem | None:
    """The first rule ``blocks`` break on ``surface``, or None."""
    if not isinstance(blocks, list):
        return Problem("[ERROR] must be an array [json-pointer:/blocks]")
    if len(blocks) > MOST_BLOCKS[surface]:
        return Problem(f"[ERROR] no more than {MOST_BLOCKS[surface]} items allowed "
                       "[json-pointer:/blocks]", too_many=True)
    try:
        markdown = 0
        for i, block in enumerate(blocks):
            _block(block, f"/blocks/{i}", surface)
            if block["type"] == "markdown":
                markdown += len(block["text"])
                _most(markdown, _MARKDOWN_MOST, f"/blocks/{i}/text",
                      "the markdown blocks' text together must be")
    except _Refused as refused:
        return Problem(str(refused))
    return None


def _block(block: Any, at: str, surface: Surface) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _Refused("a block must be an object with a type", at)
    kind = block["type"]
    if kind not in KNOWN_TYPES:
        raise _Refused(f"unsupported type: {kind}", f"{at}/type")
    if surface != "message" and kind in _MESSAGES_ONLY | _NO_HOME:
        raise _Refused(f"{kind} blocks are for messages only", f"{at}/type")
    if "block_id" in block:  # every block's page: "Maximum length ... 255 characters"
        _string(block["block_id"], 255, f"{at}/block_id")
    check = _BY_TYPE.get(kind)
    if check is not None:
        check(block, at)


def _most(length: int, most: int, at: str, what: str = "must be") -> None:
    if length > most:
        raise _Refused(f"{what} no more than {most} characters", at)


def _string(value: Any, most: int, at: str, *, least: int = 0) -> None:
    if not isinstance(value, str):
        raise _Refused("must be a string", at)
    if len(value) < least:
        raise _Refused(f"must be at least {least} characters", at)
    _most(len(value), most, at)


def _text(value: Any, at: str, *, most: int = _TEXT_MOST, plain: bool = False) -> None:
    """A text object (composition-objects/text-object)."""
    kinds = ("plain_text",) if plain else ("plain_text", "mrkdwn")
    if not isinstance(value, dict) or value.get("type") not in kinds:
        raise _Refused(f"must be a text object of type {' or '.join(kinds)}", at)
    _string(value.get("text"), most, f"{at}/text", least=1)


def _elements(block: dict[str, Any], at: str, most: int) -> list[Any]:
    elements = block.get("elements")
    if not isinstance(elements, list) or not elements:
        raise _Refused("elements must be a non-empty array", f"{at}/elements")
    if len(elements) > most:
        raise _Refused(f"no more than {most} items allowed", f"{at}/elements")
    return elements


def _section(block: dict[str, Any], at: str) -> None:
    """blocks/section-block: ``text`` up to 3,000 characters, or ``fields`` (at most 10,
    each up to 2,000); ``accessory`` one element."""
    if "text" not in block and "fields" not in block:
        raise _Refused("a section needs text or fields", at)
    if "text" in block:
        _text(block["text"], f"{at}/text")
    if "fields" in block:
        fields = block["fields"]
        if not isinstance(fields, list) or not fields or len(fields) > 10:
            raise _Refused("fields must hold 1 to 10 text objects", f"{at}/fields")
        for i, field in enumerate(fields):
            _text(field, f"{at}/fields/{i}", most=2_000)
    if "accessory" in block:
        _element(block["accessory"], f"{at}/accessory")


def _header(block: dict[str, Any], at: str) -> None:
    """blocks/header-block: plain_text, "Maximum length for the text in this field is 150"."""
    _text(block.get("text"), f"{at}/text", most=150, plain=True)


def _markdown(block: dict[str, Any], at: str) -> None:
    """blocks/markdown-block: ``text`` required, at most 12,000 characters."""
    _string(block.get("text"), _MARKDOWN_MOST, f"{at}/text", least=1)


def _context(block: dict[str, Any], at: str) -> None:
    """blocks/context-block: 1 to 10 elements, each an image element or a text object."""
    for i, element in enumerate(_elements(block, at, 10)):
        where = f"{at}/elements/{i}"
        if isinstance(element, dict) and element.get("type") == "image":
            continue
        _text(element, where)


def _actions(block: dict[str, Any], at: str) -> None:
    """blocks/actions-block: "A maximum of 25 elements are allowed"."""
    for i, element in enumerate(_elements(block, at, 25)):
        _element(element, f"{at}/elements/{i}")


def _context_actions(block: dict[str, Any], at: str) -> None:
    """blocks/context-actions-block: 1 to 5 feedback_buttons or icon_button elements."""
    for i, element in enumerate(_elements(block, at, 5)):
        where = f"{at}/elements/{i}"
        kind = element.get("type") if isinstance(element, dict) else None
        if kind == "feedback_buttons":
            _feedback_buttons(element, where)
        elif kind == "icon_button":
            _button(element, where)
        else:
            raise _Refused("must be a feedback_buttons or icon_button element", where)


def _rich_text(block: dict[str, Any], at: str) -> None:
    """blocks/rich-text-block: ``elements`` required (sections, lists, quotes...)."""
    if not isinstance(block.get("elements"), list):
        raise _Refused("elements must be an array", f"{at}/elements")


def _element(element: Any, at: str) -> None:
    if isinstance(element, dict) and element.get("type") == "button":
        _button(element, at)
    elif not isinstance(element, dict) or not isinstance(element.get("type"), str):
        raise _Refused("an element must be an object with a type", at)


def _button(element: dict[str, Any], at: str) -> None:
    """block-elements/button-element: ``text`` plain_text up to 75 characters, ``action_id``
    up to 255, ``value`` up to 2,000, ``url`` up to 3,000, ``style`` primary or danger."""
    _text(element.get("text"), f"{at}/text", most=75, plain=True)
    for name, most in (("action_id", 255), ("value", 2_000), ("url", 3_000),
                       ("accessibility_label", 75)):
        if name in element:
            _string(element[name], most, f"{at}/{name}")
    if element.get("style", "primary") not in ("primary", "danger"):
        raise _Refused("style must be primary or danger", f"{at}/style")


def _feedback_buttons(element: dict[str, Any], at: str) -> None:
    """block-elements/feedback-buttons-element: ``positive_button`` and ``negative_button``,
    each ``text`` (plain_text, 75) and ``value`` (2,000) required, ``accessibility_label``
    (75); ``action_id`` up to 255."""
    if "action_id" in element:
        _string(element["action_id"], 255, f"{at}/action_id")
    for side in ("positive_button", "negative_button"):
        button, where = element.get(side), f"{at}/{side}"
        if not isinstance(button, dict):
            raise _Refused("required", where)
        _text(button.get("text"), f"{where}/text", most=75, plain=True)
        _string(button.get("value"), 2_000, f"{where}/value", least=1)
        if "accessibility_label" in button:
            _string(button["accessibility_label"], 75, f"{where}/accessibility_label")


_BY_TYPE: dict[str, Callable[[dict[str, Any], str], None]] = {
    "section": _section, "header": _header, "markdown": _markdown, "context": _context,
    "actions": _actions, "context_actions": _context_actions, "rich_text": _rich_text}
