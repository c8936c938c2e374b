"""What the OpenAI routes share: the agent a request names, the images it carries, and
what a run says back (its turns' text, and how it stopped if it did not complete)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from runtime import (
    AssistantTurn,
    Entry,
    FileRef,
    FileRefused,
    Run,
    RunEnded,
    RunState,
    StoreError,
    TextDelta,
    ToolCallStarted,
    UserMessage,
    retrying,
    within,
)

from ..api import HttpApi
from ..errors import ApiError
from .threads import record_tip

__all__ = ["agent", "answer", "answered_by", "console_of", "images", "patiently",
           "refuse_client_tools", "stopped", "turns", "turns_in", "written"]

PATIENCE_S = 30.0
"""How long a stream's reads and writes after its run's events are tried again while the
store is out of reach (PostgreSQL cut or restarting, a full disk): the stream has begun, so
a 503 can no longer be said."""

T = TypeVar("T")


def agent(api: HttpApi, model: str) -> str:
    """The agent a request names as its model (``model_not_found`` if none is called so)."""
    names = api.runtime.operator.agents.by_name
    if model not in names:
        listed = ", ".join(f"'{n}'" for n in names)
        raise ApiError(404, f"The model '{model}' does not exist: this server's agents are "
                            f"{listed} (GET /v1/models)", "model_not_found")
    return model


def answered_by(api: HttpApi, run: Run) -> str:
    """The agent that answers a run: its thread's, which may not be the one asked for."""
    return run.agent or api.runtime.operator.agents.default.name


async def images(api: HttpApi, parts: list[dict[str, Any]]) -> list[FileRef]:
    """The images of a message's content parts (``image_url`` / ``input_image``, data URLs
    only), stored."""
    urls = [_url(p) for p in parts if p.get("type") in ("image_url", "input_image")]
    files = []
    for n, url in enumerate(urls, 1):
        head, _, data = url.partition(",")
        if not head.startswith("data:") or not head.endswith(";base64"):
            raise ApiError(400, "an image_url must be a data URL (data:image/png;base64,...): "
                                "maiden fetches no URL a request names", "image_url")
        try:
            raw = base64.b64decode(data, validate=True)
        except binascii.Error:
            raise ApiError(400, f"image {n}: its data URL is not base64", "image_url") from None
        media = head[5:].removesuffix(";base64")
        try:
            files.append(await api.runtime.kept.files.put(f"image-{n}", media, raw))
        except FileRefused as exc:
            raise ApiError(413 if exc.limit == "size" else 415, str(exc), "file_refused") \
                from None
    return files


async def answer(api: HttpApi, run: Run, console: str) -> str:
    """What the client is answered with: the run's text, and how it stopped if it did not
    complete. The thread is noted under its new history for the next request."""
    entries = await api.runtime.records.entries(run.thread_id)
    text = "\n\n".join(turns_in(entries, run))
    if run.state is RunState.COMPLETED:
        await record_tip(api.runtime, run.thread_id, entries)
        return text
    return "\n\n".join(filter(None, [text, stopped(run, console)]))


def refuse_client_tools(api: HttpApi, given: object) -> None:
    """A request that brings tools: a 400 unless ``[openai_api] client_tools = "ignore"``."""
    if given and api.openai.client_tools == "refuse":
        raise ApiError(400, "maiden runs its own tools: this request's tools would never be "
                            "called (leave them out, or set [openai_api] client_tools = "
                            "\"ignore\")", "client_tools")


async def patiently(call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` (a stream's step with the store once its run's events are over), made
    again for ``PATIENCE_S`` at most while the store is out of reach."""
    return await retrying(call, on=StoreError, pause=within(PATIENCE_S, 0.25, 4.0))


async def written(api: HttpApi, run: Run) -> AsyncIterator[str]:
    """The run's text as it is written, until it ends or pauses: each turn's deltas, the
    turns apart by a blank line (what ``turns`` joins, once they are stored)."""
    wrote, between = False, False
    async for event in api.runtime.follow(run.id, accepted=run.state is RunState.QUEUED):
        if isinstance(event, TextDelta) and event.text:
            yield ("\n\n" if between and wrote else "") + event.text
            wrote, between = True, False
        elif isinstance(event, ToolCallStarted):
            between = True
        elif isinstance(event, RunEnded):
            return


async def turns(api: HttpApi, run: Run) -> list[str]:
    return turns_in(await api.runtime.records.entries(run.thread_id), run)


def turns_in(entries: Sequence[Entry], run: Run) -> list[str]:
    """The text of each of the run's turns, after its message."""
    start = max((i for i, e in enumerate(entries)
                 if isinstance(e, UserMessage) and e.run_id == run.id), default=len(entries))
    return [e.text for e in entries[start:]
            if isinstance(e, AssistantTurn) and e.run_id == run.id and e.text]


def console_of(api: HttpApi, base_url: str) -> str:
    """Where the console is, as the client reached this server ("" without a console)."""
    return base_url.rstrip("/") if api.config.console else ""


def stopped(run: Run, console: str) -> str:
    pending = run.pending_approval
    if run.state is RunState.AWAITING_APPROVAL and pending is not None:
        return (f"⏸ {pending.name} {json.dumps(pending.arguments, ensure_ascii=False)} waits "
                f"for a person ({pending.reason}). Decide it "
                + (f"in the console at {console}/runs/{run.id}, " if console else "")
                + f"with `maiden approve {run.id} {pending.tool_call_id}` (or --deny), or POST "
                f"/v1/runs/{run.id}/approvals/{pending.tool_call_id}; the run goes on then.")
    if run.state in (RunState.QUEUED, RunState.RUNNING, RunState.AWAITING_TOOL):
        return f"(run {run.id} is still {run.state.value}: GET /v1/runs/{run.id} for its end)"
    why = f": {run.error}" if run.error else ""
    return f"(run {run.id} {run.state.value}: {run.reason}{why})"




def _url(part: dict[str, Any]) -> str:
    found = part.get("image_url")
    if isinstance(found, dict):
        found = found.get("url")
    return str(found or "")
