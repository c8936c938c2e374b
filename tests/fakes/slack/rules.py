"""A call held to Slack's contract (``contract.py``) before the fake's handler sees it (pure).

``enforce(method, params)`` raises the ``SlackError`` Slack would answer: a required argument
missing, an argument of the wrong type or past its documented length, none of the content
arguments (``no_text``), Block Kit that Slack refuses (``blockkit.py``), and the few rules a
page states in words, each with its method below (a stream outside a DM needs its recipient,
``markdown_text`` goes without ``text`` and ``blocks``...).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .blockkit import problem
from .contract import CONTRACT, Arg, Kind, Method
from .store import JSON, SlackError

__all__ = ["enforce"]


def enforce(method: str, params: JSON) -> None:
    """Raise what Slack answers if ``params`` break ``method``'s contract."""
    entry = CONTRACT[method]
    _required(entry, params)
    for name, arg in entry.arguments.items():
        if params.get(name) is not None:
            _typed(name, arg, params[name])
    if entry.one_of and not any(_given(params.get(name)) for name in entry.one_of):
        raise SlackError("no_text")
    if entry.blocks is not None:
        _blocks(entry, params)
    rule = _RULES.get(method)
    if rule is not None:
        rule(params)


def _given(value: Any) -> bool:
    return value not in (None, "", [], "[]")


def _invalid(*messages: str) -> SlackError:
    return SlackError("invalid_arguments", response_metadata={"messages": list(messages)})


def _required(entry: Method, params: JSON) -> None:
    missing: list[str] = []
    for name, arg in entry.required.items():
        value = params.get(name)
        if value is None or (value == "" and not arg.empty):
            if arg.missing != "invalid_arguments":
                raise SlackError(arg.missing)
            missing.append(name)
    if missing:
        raise _invalid(*(f"[ERROR] missing required field: {name}" for name in missing))


def _decoded(value: Any) -> Any:
    """An array or object argument: JSON, or a JSON string (a form body)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _fits(value: Any, kind: Kind) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "int":
        if isinstance(value, str):
            return value.strip().lstrip("-").isdigit()
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "boolean":  # JSON true/false; a form's or query's "true"/"1" (slack_sdk: 1/0)
        return isinstance(value, bool) or value in ("true", "false", "1", "0")
    return isinstance(_decoded(value), list if kind == "array" else dict)


def _typed(name: str, arg: Arg, value: Any) -> None:
    if not _fits(value, arg.kind):
        if arg.wrong != "invalid_arguments":
            raise SlackError(arg.wrong)
        raise _invalid(f"[ERROR] expected {arg.kind} [json-pointer:/{name}]")
    if arg.choices and value not in arg.choices:
        if arg.wrong != "invalid_arguments":
            raise SlackError(arg.wrong)
        raise _invalid(f"[ERROR] must be one of {', '.join(arg.choices)} "
                       f"[json-pointer:/{name}]")
    if arg.most is not None:
        size = len(value) if arg.kind == "string" else len(_decoded(value))
        if size > arg.most:
            if arg.long != "invalid_arguments":
                raise SlackError(arg.long)
            unit = "characters" if arg.kind == "string" else "items"
            raise _invalid(f"[ERROR] no more than {arg.most} {unit} allowed "
                           f"[json-pointer:/{name}]")


def _blocks(entry: Method, params: JSON) -> None:
    assert entry.blocks is not None
    name, surface = entry.blocks
    value = _decoded(params.get(name))
    if name == "view":
        value = value.get("blocks", []) if isinstance(value, dict) else None
    if value in (None, []):
        return
    found = problem(value, surface)
    if found is not None:
        code = entry.too_many_blocks if found.too_many else entry.blocks_error
        raise SlackError(code, response_metadata={"messages": [found.message]})


# -- the rules pages state in words


def _markdown_alone(params: JSON) -> None:
    """chat.postMessage, chat.update, chat.postEphemeral: markdown_text "should not be used in
    conjunction with ``blocks`` or ``text``" (markdown_text_conflict)."""
    if _given(params.get("markdown_text")) and (_given(params.get("text"))
                                                or _given(params.get("blocks"))):
        raise SlackError("markdown_text_conflict")


_CHUNK_TYPES = ("markdown_text", "task_update", "plan_update", "blocks")
_TASK_STATUSES = ("pending", "in_progress", "complete", "error")


def _chunks(params: JSON) -> None:
    """chunks (chat.startStream's page, "Using the chunks parameter"): markdown_text
    ({text}), task_update ({id, title, status}), plan_update ({title}) or blocks chunks;
    the fake holds a markdown_text chunk to the markdown_text argument's 12,000."""
    for chunk in _decoded(params.get("chunks")) or []:
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        if kind not in _CHUNK_TYPES:
            raise SlackError("invalid_chunks")
        assert isinstance(chunk, dict)
        if kind == "markdown_text":
            ok = isinstance(chunk.get("text"), str) and len(chunk["text"]) <= 12_000
        elif kind == "task_update":
            ok = all(isinstance(chunk.get(k), str) and chunk[k] for k in ("id", "title")) \
                and chunk.get("status") in _TASK_STATUSES
        elif kind == "plan_update":
            ok = isinstance(chunk.get("title"), str)
        else:
            ok = isinstance(chunk.get("blocks"), list)
        if not ok:
            raise SlackError("invalid_chunks")


def _stream_start(params: JSON) -> None:
    """chat.startStream: recipient_user_id and recipient_team_id are "Required when
    streaming to channels" (missing_recipient_team_id, missing_recipient_user_id); a
    top-level stream (no thread_ts) is "only supported in channels"."""
    _chunks(params)
    if str(params["channel"]).startswith("D"):
        if not _given(params.get("thread_ts")):
            raise _invalid("[ERROR] missing required field: thread_ts")
        return
    if not _given(params.get("recipient_team_id")):
        raise SlackError("missing_recipient_team_id")
    if not _given(params.get("recipient_user_id")):
        raise SlackError("missing_recipient_user_id")


def _reaction_target(params: JSON) -> None:
    """reactions.remove: "``file``, ``file_comment``, or combination of ``channel`` and
    ``timestamp``" (no_item_specified)."""
    if not (_given(params.get("file")) or _given(params.get("file_comment"))
            or (_given(params.get("channel")) and _given(params.get("timestamp")))):
        raise SlackError("no_item_specified")


_RULES: dict[str, Callable[[JSON], None]] = {
    "chat.postMessage": _markdown_alone, "chat.update": _markdown_alone,
    "chat.postEphemeral": _markdown_alone, "chat.startStream": _stream_start,
    "chat.appendStream": _chunks, "chat.stopStream": _chunks,
    "reactions.remove": _reaction_target,
}
