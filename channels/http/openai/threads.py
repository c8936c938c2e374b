"""Which maiden thread a Chat Completions request continues (pure, but for the store reads
``choose`` makes through the runtime's public API).

A client resends the whole conversation every time; maiden keeps its own. A request may
name its thread (header ``X-Maiden-Thread``, ``metadata.thread_id``, or ``user`` with
``[openai_api] thread_from_user``): then only its last user message is new, and what it
sends before must be what the thread holds (else 409). Unnamed, it continues the thread
whose history is exactly what it sends before its last user message (found by that
history's digest, which each answered request records as the thread's tip), or starts a
new thread seeded with it: a regenerate or an edited earlier turn branches, and no thread
holds a message twice.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from runtime import AssistantTurn, Entry, Runtime, Said, UserMessage

from ..auth import LOCAL
from ..errors import ApiError
from .wire import ChatMessageIn, ChatRequest

__all__ = [
    "THREAD_HEADER",
    "Choice",
    "choose",
    "conversation",
    "record_tip",
    "said_of",
    "text_of",
    "tip_scope",
]

THREAD_HEADER = "X-Maiden-Thread"
TIP_KEY = "thread"


@dataclass(frozen=True, slots=True)
class Choice:
    thread_id: str
    context: tuple[Said, ...] = ()
    """Earlier messages to seed a new thread with."""


def text_of(message: ChatMessageIn) -> str:
    """A message's text: its string, or its text parts joined (images aside)."""
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text") or p.get("refusal") or "") for p in content
                     if p.get("type") in ("text", "input_text", "refusal"))


def said_of(messages: Sequence[ChatMessageIn], *, ignore_tools: bool) -> list[Said]:
    """The conversation as maiden keeps it: user and assistant texts, system messages left
    out (the agent's prompt is its own); tool messages refused unless ``ignore_tools``."""
    said: list[Said] = []
    for i, message in enumerate(messages):
        if message.role in ("system", "developer"):
            continue
        if message.role in ("tool", "function"):
            if ignore_tools:
                continue
            raise ApiError(400, f"messages[{i}] is a {message.role} message: maiden runs its "
                                "own tools (set [openai_api] client_tools = \"ignore\" to "
                                "leave such messages out)", "client_tools")
        text = text_of(message)
        if message.role == "assistant" and not text:
            continue  # an assistant's tool calls only: nothing said
        said.append(Said(role="user" if message.role == "user" else "assistant", text=text))
    return said


def conversation(entries: Sequence[Entry]) -> list[Said]:
    """What a thread holds, as a client sees it: each message, and each turn's text."""
    out: list[Said] = []
    for entry in entries:
        if isinstance(entry, UserMessage):
            out.append(Said(role="user", text=entry.text))
        elif isinstance(entry, AssistantTurn) and entry.text:
            out.append(Said(role="assistant", text=entry.text))
    return _joined(out)


def _joined(said: Sequence[Said]) -> list[Said]:
    """Consecutive assistant texts as one (a run's turns are one answer on the wire)."""
    out: list[Said] = []
    for s in said:
        if out and s.role == "assistant" and out[-1].role == "assistant":
            out[-1] = Said(role="assistant", text=out[-1].text + "\n\n" + s.text)
        else:
            out.append(s)
    return out


def tip_scope(said: Sequence[Said]) -> str:
    """Where the thread whose history is ``said`` is noted (a note scope, one per tip)."""
    data = json.dumps([[s.role, s.text] for s in _joined(said)], ensure_ascii=False)
    return "openai:tip:" + hashlib.sha256(data.encode()).hexdigest()


def named(request: ChatRequest, header: str | None, from_user: bool,
          caller: str = LOCAL) -> str | None:
    """The thread a request names, if it names one; a ``user`` names one of the caller's
    own (``openai:user:CALLER:USER``; without tokens, ``openai:user:USER``)."""
    if header:
        return header
    if request.metadata and request.metadata.get("thread_id"):
        return request.metadata["thread_id"]
    if from_user and request.user:
        mine = "" if caller == LOCAL else f"{caller}:"
        return f"openai:user:{mine}{request.user}"
    return None


Visible = Callable[[str, bool], Awaitable[bool]]
"""Whether the caller may see a thread (``True``: to write into it, which makes a new one
its own)."""


async def choose(runtime: Runtime, request: ChatRequest, before: list[Said],
                 header: str | None, *, from_user: bool, caller: str = LOCAL,
                 visible: Visible | None = None) -> Choice:
    """The thread the request's last message goes to, and what to seed a new one with: a
    named thread the caller may see (else 404, as if it did not exist), or one of the
    caller's own threads whose history is what the request sends."""
    name = named(request, header, from_user, caller)
    if name is not None and visible is not None and not await visible(name, True):
        raise ApiError(404, f"no thread {name!r}", "not_found")
    if name is not None:
        held = conversation(await runtime.records.entries(name))
        if not before or _joined(before) == held:
            return Choice(name)
        if not held:
            return Choice(name, tuple(before))
        raise ApiError(409, f"the messages before the last do not match the history of "
                            f"thread {name!r} ({len(held)} messages held); send only the new "
                            "message with this thread, or leave the thread unnamed to branch",
                       "history_mismatch")
    if before:
        notes = await runtime.kept.notes.notes(tip_scope(before))
        for note in notes:
            if visible is not None and not await visible(note.text, False):
                continue  # another caller's thread with the same history: not this one
            held = conversation(await runtime.records.entries(note.text))
            if held == _joined(before):
                return Choice(note.text)
    return Choice(f"openai:{uuid.uuid4().hex}", tuple(before))


async def record_tip(runtime: Runtime, thread_id: str,
                     entries: Sequence[Entry] | None = None) -> None:
    """Note the thread under its history now (``entries``, if they are read already), for
    the request that continues it."""
    held = conversation(entries if entries is not None
                        else await runtime.records.entries(thread_id))
    if held:
        await runtime.kept.notes.remember(tip_scope(held), TIP_KEY, thread_id)
