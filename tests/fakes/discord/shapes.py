"""The bodies Discord documents, as ``schema`` shapes: messages (content, embeds, allowed
mentions, replies, attachments, components), interaction responses, application commands.

Each shape names the reference page it was read from; ``contract.py`` puts them on routes.
Message flags are checked where the docs list what may be set (``CREATE_FLAGS``...); an edit
may send any, as "unsupported flag changes are currently ignored without error".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .schema import (
    Field,
    Problem,
    Rule,
    Shape,
    array,
    boolean,
    integer,
    join,
    number,
    obj,
    problems,
    snowflake,
    string,
)

DOCS = "https://discord.com/developers/docs/"
MESSAGE = DOCS + "resources/message"
COMPONENTS = DOCS + "components/reference"
RESPONDING = DOCS + "interactions/receiving-and-responding"
COMMANDS = DOCS + "interactions/application-commands"

# Message flags (MESSAGE#message-object-message-flags)
SUPPRESS_EMBEDS, EPHEMERAL, SUPPRESS_NOTIFICATIONS = 1 << 2, 1 << 6, 1 << 12
IS_VOICE_MESSAGE, IS_COMPONENTS_V2 = 1 << 13, 1 << 15
CREATE_FLAGS = SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS | IS_VOICE_MESSAGE | IS_COMPONENTS_V2
"""MESSAGE#create-message: "only SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS, IS_VOICE_MESSAGE,
and IS_COMPONENTS_V2 can be set"."""
EXECUTE_FLAGS = SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS | IS_COMPONENTS_V2 | EPHEMERAL
"""webhook#execute-webhook's three, and EPHEMERAL for a follow-up (RESPONDING#create-followup-
message)."""
RESPONSE_FLAGS = SUPPRESS_EMBEDS | EPHEMERAL | IS_COMPONENTS_V2 | IS_VOICE_MESSAGE \
    | SUPPRESS_NOTIFICATIONS
"""RESPONDING#interaction-response-object-messages."""

# -- embeds (MESSAGE#embed-object-embed-limits: counted without surrounding whitespace)

_IMAGE = Shape({"url": string(required=True)})
EMBED = Shape({
    "title": string(256, trim=True), "type": string(), "description": string(4096, trim=True),
    "url": string(), "timestamp": string(), "color": integer(least=0, most=0xFFFFFF),
    "footer": obj(Shape({"text": string(2048, required=True, trim=True),
                         "icon_url": string()})),
    "image": obj(_IMAGE), "thumbnail": obj(_IMAGE),
    "author": obj(Shape({"name": string(256, required=True, trim=True), "url": string(),
                         "icon_url": string()})),
    "fields": array(obj(Shape({"name": string(256, required=True, trim=True),
                               "value": string(1024, required=True, trim=True),
                               "inline": boolean()})), 25),
})
EMBEDS_TOTAL = 6_000


def _embed_chars(embed: dict[str, Any]) -> int:
    texts = [embed.get("title"), embed.get("description"),
             (embed.get("footer") or {}).get("text"), (embed.get("author") or {}).get("name")]
    for f in embed.get("fields") or []:
        texts += [f.get("name"), f.get("value")]
    return sum(len(t.strip()) for t in texts if isinstance(t, str))


def embeds_total(body: dict[str, Any], path: str) -> list[Problem]:
    """All of a message's embeds together: at most 6,000 characters."""
    total = sum(_embed_chars(e) for e in body.get("embeds") or [])
    return [Problem(join(path, "embeds"), "MAX_EMBED_SIZE_EXCEEDED",
                    f"Embed size exceeds maximum size of {EMBEDS_TOTAL}")] \
        if total > EMBEDS_TOTAL else []


# -- allowed mentions and replies

def _parse_exclusive(mentions: dict[str, Any], path: str) -> list[Problem]:
    """"parse" naming a type, and a list of that type's ids, are mutually exclusive."""
    parse = mentions.get("parse") or []
    return [Problem(path, "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE",
                    f'parse:["{kind}"] and {kind}: [ids...] are mutually exclusive.')
            for kind in ("users", "roles") if kind in parse and mentions.get(kind)]


ALLOWED_MENTIONS = Shape({
    "parse": array(string(choices=("roles", "users", "everyone"))),
    "roles": array(snowflake(), 100), "users": array(snowflake(), 100),
    "replied_user": boolean(),
}, rules=(_parse_exclusive,))
"""MESSAGE#allowed-mentions-object."""


def _forward_names_its_channel(ref: dict[str, Any], path: str) -> list[Problem]:
    if ref.get("type") == 1 and ref.get("channel_id") is None:
        return [Problem(join(path, "channel_id"), "BASE_TYPE_REQUIRED",
                        "This field is required")]
    return []


MESSAGE_REFERENCE = Shape({
    "type": integer(choices=(0, 1)), "message_id": snowflake(), "channel_id": snowflake(),
    "guild_id": snowflake(), "fail_if_not_exists": boolean(),
}, rules=(_forward_names_its_channel,))
"""MESSAGE#message-reference-structure (``channel_id`` "Required for forwards")."""

ATTACHMENT = Shape({
    "id": snowflake(required=True), "filename": string(), "title": string(),
    "description": string(1024), "duration_secs": number(), "waveform": string(),
    "is_spoiler": boolean(),
})
"""MESSAGE#attachment-object-attachment-request-structure."""

# -- components (COMPONENTS; "Legacy messages allow up to 5 action rows", 40 in all in v2)

_CUSTOM_ID = string(100, min_len=1)
_EMOJI = obj(Shape({"id": snowflake(), "name": string(), "animated": boolean()}))
BUTTON = Shape({
    "type": integer(required=True), "id": integer(),
    "style": integer(required=True, choices=(1, 2, 3, 4, 5, 6)), "label": string(80),
    "emoji": _EMOJI, "custom_id": _CUSTOM_ID, "sku_id": snowflake(), "url": string(512),
    "disabled": boolean(),
})
SELECT = Shape({
    "type": integer(required=True), "id": integer(), "custom_id": string(100, min_len=1,
                                                                         required=True),
    "options": array(obj(Shape({"label": string(100, required=True),
                                 "value": string(100, required=True),
                                 "description": string(100), "emoji": _EMOJI,
                                 "default": boolean()})), 25),
    "placeholder": string(150), "min_values": integer(least=0, most=25),
    "max_values": integer(least=1, most=25), "disabled": boolean(),
    "channel_types": array(integer()), "default_values": array(obj()),
})
ROW = Shape({"type": integer(required=True), "id": integer(),
             "components": array(obj(), 5, min_len=1, required=True)})
_SELECTS = (3, 5, 6, 7, 8)
_V2_TOP = (1, 9, 10, 12, 13, 14, 17)  # the message types of COMPONENTS#component-object


def _required(path: str, name: str) -> Problem:
    return Problem(join(path, name), "BASE_TYPE_REQUIRED", "This field is required")


def _not_here(path: str, name: str, why: str) -> Problem:
    return Problem(join(path, name), "BASE_TYPE_INVALID", why)


def _button(button: dict[str, Any], path: str) -> list[Problem]:
    """COMPONENTS#button: a non-link, non-premium button has a ``custom_id`` and no ``url``
    or ``sku_id``; a link (5) has a ``url`` and no ``custom_id``; premium (6) an ``sku_id``
    and no ``custom_id``, ``label``, ``url`` or ``emoji``."""
    style = button["style"]
    needs = {5: "url", 6: "sku_id"}.get(style, "custom_id")
    found = [] if button.get(needs) is not None else [_required(path, needs)]
    banned = {5: ("custom_id", "sku_id"), 6: ("custom_id", "label", "url", "emoji")}.get(
        style, ("url", "sku_id"))
    return found + [_not_here(path, name, f"A button of style {style} cannot have {name}.")
                    for name in banned if button.get(name) is not None]


def _row(row: dict[str, Any], path: str) -> list[Problem]:
    children = row["components"]
    found = problems(ROW, row, path)
    if found:
        return found
    if any(c.get("type") in _SELECTS for c in children) and len(children) > 1:
        return [Problem(join(path, "components"), "BASE_TYPE_MAX_LENGTH",
                        "An action row holds one select menu, alone.")]
    for i, child in enumerate(children):
        where = join(join(path, "components"), i)
        if child.get("type") == 2:
            found += problems(BUTTON, child, where) or _button(child, where)
        elif child.get("type") in _SELECTS:
            found += problems(SELECT, child, where)
            if child["type"] == 3 and not child.get("options"):
                found.append(_required(where, "options"))
        else:
            found.append(Problem(join(where, "type"), "BASE_TYPE_CHOICES",
                                 "Value must be one of (2, 3, 5, 6, 7, 8)."))
    return found


def _all(components: list[Any], path: str) -> list[tuple[dict[str, Any], str]]:
    """Every component, nested ones too, with its path."""
    out = []
    for i, c in enumerate(components):
        if isinstance(c, dict):
            out.append((c, join(path, i)))
            for key in ("components", "accessory"):
                inner = c.get(key)
                inner = [inner] if isinstance(inner, dict) else inner
                if isinstance(inner, list):
                    out += _all(inner, join(join(path, i), key))
    return out


def components(body: dict[str, Any], path: str) -> list[Problem]:
    """A message's ``components``: action rows of buttons or a select (up to 5 rows), or with
    IS_COMPONENTS_V2 any message component (up to 40 in all); custom ids unique."""
    top = body.get("components") or []
    where = join(path, "components")
    v2 = bool((body.get("flags") or 0) & IS_COMPONENTS_V2)
    if not v2 and len(top) > 5:
        return [Problem(where, "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")]
    everything = _all(top, where)
    if v2 and len(everything) > 40:
        return [Problem(where, "BASE_TYPE_MAX_LENGTH", "Must be 40 or fewer in total.")]
    found: list[Problem] = []
    for i, c in enumerate(top):
        at = join(where, i)
        if c.get("type") == 1:
            found += _row(c, at)
        elif c.get("type") not in (_V2_TOP if v2 else (1,)):
            found.append(Problem(join(at, "type"), "BASE_TYPE_CHOICES",
                                 f"Value must be one of {_V2_TOP if v2 else '(1)'}."))
    seen: set[str] = set()
    for c, at in everything:
        custom = c.get("custom_id")
        if isinstance(custom, str) and custom in seen:
            found.append(Problem(join(at, "custom_id"), "COMPONENT_CUSTOM_ID_DUPLICATED",
                                 "Component custom id cannot be duplicated"))
        if isinstance(custom, str):
            seen.add(custom)
    return found


def v2_alone(body: dict[str, Any], path: str) -> list[Problem]:
    """With IS_COMPONENTS_V2 a message "can only contain components"."""
    if not (body.get("flags") or 0) & IS_COMPONENTS_V2:
        return []
    return [Problem(join(path, name), "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2",
                    f"The '{name}' field cannot be used when using "
                    "MessageFlags.IS_COMPONENTS_V2")
            for name in ("content", "embeds", "sticker_ids", "poll") if body.get(name)]


def flags_within(allowed: int) -> Callable[[Any, str], list[Problem]]:
    def rule(body: dict[str, Any], path: str) -> list[Problem]:
        if (body.get("flags") or 0) & ~allowed:
            return [Problem(join(path, "flags"), "MESSAGE_FLAGS_INVALID",
                            "Invalid message flags.")]
        return []
    return rule


def message(allowed_flags: int | None, **more: Field) -> Shape:
    """A message body's fields (create, edit, webhook, interaction response) and its rules;
    ``allowed_flags`` None: any flags (an edit)."""
    fields: dict[str, Field] = {
        "content": string(2000), "embeds": array(obj(EMBED), 10),
        "allowed_mentions": obj(ALLOWED_MENTIONS), "components": array(obj()),
        "attachments": array(obj(ATTACHMENT)), "flags": integer(least=0), "poll": obj(),
        **more}
    rules: tuple[Rule, ...] = (embeds_total, components, v2_alone)
    if allowed_flags is not None:
        rules += (flags_within(allowed_flags),)
    return Shape(fields, rules)


CREATE_MESSAGE = message(
    CREATE_FLAGS, nonce=Field(("integer", "string"), max_len=25), tts=boolean(),
    message_reference=obj(MESSAGE_REFERENCE), sticker_ids=array(snowflake(), 3),
    enforce_nonce=boolean(), shared_client_theme=obj())
EDIT_MESSAGE = message(None)
EXECUTE_WEBHOOK = message(EXECUTE_FLAGS, username=string(80), avatar_url=string(),
                          tts=boolean(), thread_name=string(100),
                          applied_tags=array(snowflake()))
EDIT_WEBHOOK_MESSAGE = message(None)
RESPONSE_MESSAGE = message(RESPONSE_FLAGS, tts=boolean())
