"""The soak's model: the OpenAI wire (``tests/fakes/openai.py``), answering from what it
is sent, and failing now and then, deterministically from the seed.

A message ``[m00042] ana asks for look+note then charge`` gets, turn by turn, a call of
each tool named for that turn (``look`` and ``note`` together, then ``charge``), then the
answer ``answer to m00042: 3 results``. Which request fails, and how (500, 429 with
``Retry-After``, a stream cut mid-way, an empty answer), is a hash of the seed, the
message's tag, the turn and how many times that turn was asked: the same on a replay, as
long as the same requests are made. An outage (a fault of the plan) fails every request
while it lasts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fakes.openai import OpenAIServer, error, stream
from tests.fakes.server import Reply

from .job_plan import REMIND_IN

__all__ = ["ASK", "JOB", "Model", "answer_text", "failure", "job_prompt"]

ASK = re.compile(r"^\[(m\d{5})\] \w+ asks for (.+)$", re.MULTILINE)
# A schedule's prompt, the same at every slot: its runs are told apart by what came before
# (the tag is ``j{name}.{hash of the history up to it}``; a slot's thread of its own, or a
# thread where the same prompt comes back every minute).
JOB = re.compile(r"^\[job ([A-Za-z0-9-]+)\] asks for (.+)$", re.MULTILINE)
CRON = "* * * * *"


def job_prompt(name: str) -> str:
    return f"[job {name}] asks for tick"


class _Gone(logging.Filter):
    """A replica killed while the model wrote to it: aiohttp logs the reset as an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], ConnectionResetError))


logging.getLogger("aiohttp.server").addFilter(_Gone())


def answer_text(tag: str, results: int) -> str:
    return f"answer to {tag}: {results} results"


def failure(seed: int, tag: str, turn: int, attempt: int) -> str | None:
    """How the model fails this request, if it does: ``500``, ``429``, ``cut`` or
    ``empty`` (about one request in ten)."""
    digest = hashlib.sha256(f"{seed}:{tag}:{turn}:{attempt}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    for limit, kind in ((0.04, "500"), (0.07, "429"), (0.085, "cut"), (0.10, "empty")):
        if u < limit:
            return kind
    return None


def _latency(seed: int, tag: str, turn: int, attempt: int) -> float:
    digest = hashlib.sha256(f"latency:{seed}:{tag}:{turn}:{attempt}".encode()).digest()
    return digest[0] / 255 * 0.15


class Model(OpenAIServer):
    """``outcomes`` counts what it answered (``calls``, ``answer``, each failure kind);
    ``malformed`` keeps every request the real API's rules refused."""

    def __init__(self, seed: int, log: Path | None = None) -> None:
        super().__init__(api_key="sk-chaos")
        self.seed = seed
        self.log = log  # every request's messages and what it was answered, one JSON line
        self.outage_until = 0.0
        self.outage_status = 500
        self.attempts: Counter[tuple[str, int]] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.malformed: list[str] = []
        self.unknown: list[str] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        key = _turn(body) if isinstance(body, dict) else None
        if key is not None:
            tag, turn = key[0], key[1]
            await asyncio.sleep(_latency(self.seed, tag, turn, self.attempts[(tag, turn)] + 1))
        return await super()._handle(request)

    def validate(self, headers: dict[str, str], body: Any) -> Reply | None:
        refused = super().validate(headers, body)
        if refused is not None:
            self.malformed.append(json.dumps(refused.json)[:300])
            self.outcomes["refused"] += 1
            return refused
        if time.monotonic() < self.outage_until:
            self.outcomes[f"outage_{self.outage_status}"] += 1
            return _failed(str(self.outage_status))
        key = _turn(body)
        if key is None:
            self.unknown.append(json.dumps(body["messages"][-1])[:300])
            self.outcomes["unknown"] += 1
            return error(400, "chaos model: no tagged message in the request")
        tag, turn, steps, results = key[0], key[1], key[2], key[3]
        self.attempts[(tag, turn)] += 1
        if self.log is not None:
            with self.log.open("a") as log:
                log.write(json.dumps({"tag": tag, "turn": turn, "attempt": self.attempts[
                    (tag, turn)], "messages": body["messages"][1:]}) + "\n")
        kind = failure(self.seed, tag, turn, self.attempts[(tag, turn)])
        if kind is not None and kind != "cut":
            self.outcomes[kind] += 1
            return _failed(kind)
        cut = kind == "cut"
        if turn < len(steps):
            self.outcomes["cut" if cut else "calls"] += 1
            calls = []
            for j, name in enumerate(steps[turn]):
                name, arguments = _arguments(name, tag, turn * 10 + j)
                calls.append((f"call_{tag}_{turn}_{j}", name,
                              [arguments[:9], arguments[9:]]))
            if cut:
                return stream(calls=calls[:1], done=False, end="abort")
            return stream(calls=calls)
        self.outcomes["cut" if cut else "answer"] += 1
        text = answer_text(tag, results)
        pieces = [text[:8], text[8:16], text[16:]]
        return stream(pieces[:2], done=False, end="abort") if cut else stream(pieces)


def _arguments(step: str, tag: str, n: int) -> tuple[str, str]:
    """The tool a step names and its arguments: ``note`` -> ``{"tag", "n"}``; the schedule
    tools name their schedule, ``schedule_create=chat-0``, which runs ``tick`` every
    minute; ``remind=rem-0`` asks ``schedule_create`` for a reminder in a minute."""
    tool, _, name = step.partition("=")
    if tool == "remind":  # a reminder in a minute, of words posted as they are
        return "schedule_create", json.dumps({"name": name, "in": REMIND_IN,
                                              "say": f"reminder {name}"})
    if tool == "schedule_create":
        return tool, json.dumps({"name": name, "cron": CRON, "prompt": job_prompt(name)})
    if tool.startswith("schedule_"):
        return tool, json.dumps({"name": name})
    return tool, json.dumps({"tag": tag, "n": n})


def _failed(kind: str) -> Reply:
    if kind == "500":
        return error(500, "The server had an error while processing your request.",
                     kind="server_error")
    if kind == "429":
        return error(429, "Rate limit reached for requests.", kind="requests",
                     code="rate_limit_exceeded", **{"retry-after": "1"})
    return stream([])  # empty: no text, no calls


def _turn(body: dict[str, Any]) -> tuple[str, int, list[list[str]], int] | None:
    """The request's message tag, which of its turns is asked for, the tools it asks for
    turn by turn, and how many of its calls have results.

    The run asked for is found from the end: a tool result names its call (whose id
    names the message and turn); a result that came back after the thread moved on (an
    approval decided after its run timed out) is beside its call, with a ``late_result``
    notice where it came quoting the run's message (the run goes on after its last turn
    with results; so does a run resumed after its thread went on, from the notice it left
    quoting its message), or, its call cut out of the history, a ``[notice] an earlier call to
    NAME``, whose call is the one the history shows with no result; else the last message
    of ours (a cancelled run's message and the next one are sent as one user message)."""
    messages = body.get("messages") or []
    texts = [_text(m.get("content")) for m in messages]
    for i in range(len(messages) - 1, -1, -1):
        m, text = messages[i], texts[i]
        late = (_LATE.search(text) or _RESUMED.search(text)) if m.get("role") == "user" \
            else None
        if late is not None and any(a.start() > late.start() for a in ASK.finditer(text)):
            late = None  # a message of ours after the notice (joined to it) is asked
        if m.get("role") == "tool":
            found = _CALL.match(m.get("tool_call_id", ""))
            if found:
                return _state(messages, texts, found.group(1), int(found.group(2)) + 1)
        elif late is not None:
            tag = late.group(1)
            turns = [int(found.group(2)) for t in messages if t.get("role") == "tool"
                     and (found := _CALL.match(t.get("tool_call_id", "")))
                     and found.group(1) == tag]
            if turns or late.re is _RESUMED:  # resumed: from its next turn, or its first
                return _state(messages, texts, tag, max(turns, default=-1) + 1)
        elif m.get("role") == "user" and text.startswith(_ORPHAN):
            name = text[len(_ORPHAN):].split(" ", 1)[0]
            for j in range(i - 1, -1, -1):
                for call in messages[j].get("tool_calls") or ():
                    answer = next((t for k, t in enumerate(texts) if messages[k].get(
                        "tool_call_id") == call["id"]), "")
                    found = _CALL.match(call["id"])
                    if found and call["function"]["name"] == name and _UNRECORDED in answer:
                        return _state(messages, texts, found.group(1), int(found.group(2)) + 1)
        elif m.get("role") == "user":
            asked = list(ASK.finditer(text))
            job = list(JOB.finditer(text))
            # Messages sent as one (a run's and the next one's): the last is asked about.
            if job and (not asked or job[-1].start() > asked[-1].start()):
                seen = hashlib.sha256(json.dumps(messages[1:i + 1], sort_keys=True).encode())
                return _state(messages, texts, f"j{job[-1].group(1)}.{seen.hexdigest()[:8]}", 0)
            if asked:
                return _state(messages, texts, asked[-1].group(1), 0)
    return None


def _text(content: Any) -> str:
    """A message's text: a message with files has content parts (its text first, a text
    file as a text part of its own), joined."""
    if isinstance(content, list):
        return "\n\n".join(str(p.get("text") or "") for p in content
                             if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


_CALL = re.compile(r"^call_(m\d{5}|j[A-Za-z0-9-]+\.[0-9a-f]{8})_(\d+)_\d+$")
_LATE = re.compile(r"\[notice\] The result of your call to .* That message: "
                   r"\"\[(m\d{5})\] ", re.DOTALL)
# A run resumed after its thread went on: a notice in the thread quotes its message.
_RESUMED = re.compile(r"\[notice\] This request was taken up again .* That message: "
                      r"\"\[(m\d{5})\] ", re.DOTALL)
_ORPHAN = "[notice] an earlier call to "
_UNRECORDED = "no result was recorded for this call"


def _state(messages: list[dict[str, Any]], texts: list[str], tag: str, turn: int
           ) -> tuple[str, int, list[list[str]], int] | None:
    if tag.startswith("j"):  # a schedule's run: its prompt, by the schedule's name
        name = tag[1:].rsplit(".", 1)[0]
        asks = next((a.group(2) for t in texts for a in JOB.finditer(t) if a.group(1) == name),
                    None)
    else:
        asks = next((a.group(2) for t in texts for a in ASK.finditer(t) if a.group(1) == tag),
                    None)
    if asks is None:
        return None
    steps = [] if asks == "nothing" else [t.split("+") for t in asks.split(" then ")]
    results = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"
               and str(m.get("tool_call_id", "")).startswith(f"call_{tag}_")}
    return tag, turn, steps, len(results)
