"""``POST /v1/responses`` and ``GET /v1/responses/{id}``: the Responses API, stateful as
maiden is. A response is a run (``resp_`` + its id): ``previous_response_id`` continues
that run's thread, ``conversation`` names a thread; without either a new thread starts,
seeded with the input's earlier messages. Streamed as the API streams
(``response.created`` ... ``response.output_text.delta`` ... ``response.completed``)."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from runtime import NotFound, Origin, Run, RunState, Said

from ..api import HttpApi, caller_key, check_reuse
from ..auth import Credential
from ..deps import Api, Caller, Talker, secured
from ..errors import ApiError
from .answers import (
    agent,
    answered_by,
    console_of,
    images,
    patiently,
    refuse_client_tools,
    stopped,
    turns,
    written,
)
from .wire import error_responses

__all__ = ["router"]

router = APIRouter(tags=["openai"])
PREFIX = "resp_"


class ResponsesRequest(BaseModel):
    """``POST /v1/responses`` (parameters maiden does not take are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    model: str
    input: str | list[dict[str, Any]] = Field(description="a text, or message items")
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None
    stream: bool | None = False
    tools: list[Any] | None = None


_STREAM_DOC: dict[str, Any] = {
    "description": "the response; with `stream`, its events as server-sent events",
    "content": {"application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": {"type": "string"}}}}


@router.post("/v1/responses", response_model=None, responses={
    200: _STREAM_DOC, **error_responses(400, 401, 403, 404, 409, 413, 415, 503)})
async def create_response(
    body: ResponsesRequest, request: Request, who: Talker, api: Api,
    idempotency_key: Annotated[str | None, Header(
        alias="Idempotency-Key", max_length=200,
        description="a retried request with the same key is the same response")] = None,
) -> Response:
    """A response of the agent: a run on the thread it continues (or a new one)."""
    model = agent(api, body.model)
    console = console_of(api, str(request.base_url))
    refuse_client_tools(api, body.tools)
    said, parts = _input(body.input)
    thread, seeded = await _thread(api, body, who), said[:-1]
    files = await images(api, parts)
    run = await api.runtime.submit(
        thread or f"openai:{uuid.uuid4().hex}", said[-1].text,
        origin=Origin(channel="http", user=who.name, rights=tuple(sorted(who.rights))),
        idempotency_key=caller_key("openai", who, idempotency_key),
        files=files, context=tuple(seeded), agent=model,
        trace=request.headers.get("traceparent", ""))
    check_reuse(idempotency_key, run, said[-1].text, files, thread)
    model = answered_by(api, run)
    if body.stream:
        return StreamingResponse(_events(api, run, model, body.previous_response_id, console),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})
    run = await api.settle(run.id)
    return JSONResponse(await _response(api, run, model, body.previous_response_id, console))


@router.get("/v1/responses/{response_id}", dependencies=secured,
            responses=error_responses(401, 404))
async def get_response(response_id: str, request: Request, api: Api,
                       who: Caller) -> dict[str, Any]:
    """A response by id: where its run stands (finished, paused, or still going)."""
    try:
        run = await api.runtime.records.get_run(response_id.removeprefix(PREFIX))
        if not await api.owners.may_see(who, run.thread_id):
            raise NotFound(response_id)
    except NotFound:
        raise ApiError(404, f"No response found with id '{response_id}'.", "not_found") \
            from None
    return await _response(api, run, answered_by(api, run), None,
                           console_of(api, str(request.base_url)))


def _input(given: str | list[dict[str, Any]]) -> tuple[list[Said], list[dict[str, Any]]]:
    """The input as messages (the last one the user's), and the last one's content parts."""
    if isinstance(given, str):
        return [Said(role="user", text=given)], []
    said: list[Said] = []
    parts: list[dict[str, Any]] = []
    for i, item in enumerate(given):
        kind, role = item.get("type", "message"), item.get("role")
        if kind != "message" or role not in ("user", "assistant", "system", "developer"):
            raise ApiError(400, f"input[{i}] is a {kind!r} item: maiden takes message items "
                                "(its tools are its own)", "input")
        if role in ("system", "developer"):
            continue
        content = item.get("content")
        parts = content if isinstance(content, list) else []
        text = content if isinstance(content, str) else "\n".join(
            str(p.get("text") or "") for p in parts
            if p.get("type") in ("input_text", "output_text", "text"))
        said.append(Said(role=role, text=text))
    if not said or said[-1].role != "user":
        raise ApiError(400, "the input must end with the user's message", "input")
    return said, parts


async def _thread(api: HttpApi, body: ResponsesRequest, who: Credential) -> str | None:
    """The thread a response continues: its previous response's, or the conversation it
    names; one the caller may not see is as missing as one that does not exist."""
    if body.previous_response_id:
        try:
            earlier = await api.runtime.records.get_run(
                body.previous_response_id.removeprefix(PREFIX))
            if not await api.owners.may_see(who, earlier.thread_id):
                raise NotFound(body.previous_response_id)
        except NotFound:
            raise ApiError(404, f"Previous response with id '{body.previous_response_id}' "
                                "not found.", "previous_response_not_found",
                           ) from None
        return earlier.thread_id
    conversation = body.conversation
    if isinstance(conversation, dict):
        conversation = str(conversation.get("id") or "") or None
    if conversation and not await api.owners.may_see(who, conversation, write=True):
        raise ApiError(404, f"Conversation with id '{conversation}' not found.", "not_found")
    return conversation or None


def _status(run: Run) -> str:
    if run.state is RunState.COMPLETED:
        return "completed"
    if run.state is RunState.AWAITING_APPROVAL:
        return "incomplete"  # why, in incomplete_details: a client can tell without the text
    if run.state in (RunState.QUEUED, RunState.RUNNING, RunState.AWAITING_TOOL):
        return "in_progress"
    return "failed"


def _incomplete(run: Run) -> dict[str, Any] | None:
    """Why a response is ``incomplete``: its run waits for a person's decision on a call
    (``reason`` as the API has it, and what a client needs to decide it or show it)."""
    pending = run.pending_approval
    if run.state is not RunState.AWAITING_APPROVAL or pending is None:
        return None
    return {"reason": "awaiting_approval", "run_id": run.id,
            "tool_call_id": pending.tool_call_id, "tool": pending.name,
            "arguments": pending.arguments,
            "decide": f"/v1/runs/{run.id}/approvals/{pending.tool_call_id}"}


async def _response(api: HttpApi, run: Run, model: str, previous: str | None,
                    console: str, text: str | None = None) -> dict[str, Any]:
    """The response object of a run, as it stands."""
    status = _status(run)
    if text is None:
        text = "\n\n".join(await turns(api, run))
        if run.state is not RunState.COMPLETED and status != "in_progress":
            text = "\n\n".join(filter(None, [text, stopped(run, console)]))
    usage = run.usage
    output = [] if status == "in_progress" and not text else [_message(run, text, status)]
    return {
        "id": PREFIX + run.id, "object": "response", "created_at": run.created_at,
        "status": status, "model": model, "output": output, "previous_response_id": previous,
        "conversation": {"id": run.thread_id},
        "error": {"code": "server_error", "message": f"{run.reason}: {run.error or ''}"}
        if status == "failed" else None,
        "incomplete_details": _incomplete(run), "instructions": None, "metadata": {},
        "parallel_tool_calls": False, "temperature": None, "top_p": None,
        "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": usage.prompt_tokens, "output_tokens": usage.output_tokens,
                  "total_tokens": usage.prompt_tokens + usage.output_tokens,
                  "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
                  "output_tokens_details": {"reasoning_tokens": 0}}}


def _message(run: Run, text: str, status: str) -> dict[str, Any]:
    shown = status if status in ("in_progress", "incomplete") else "completed"
    return {"type": "message", "id": f"msg_{run.id}", "role": "assistant",
            "status": shown,
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


async def _events(api: HttpApi, run: Run, model: str, previous: str | None, console: str
                  ) -> AsyncIterator[bytes]:
    """The Responses API's stream of events for the run, until it ends or pauses."""
    number = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal number
        number += 1
        data = {"type": kind, "sequence_number": number, **fields}
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

    item = f"msg_{run.id}"
    where = {"item_id": item, "output_index": 0, "content_index": 0}
    started = await _response(api, run, model, previous, console, text="")
    started["status"], started["output"] = "in_progress", []
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    yield event("response.output_item.added", output_index=0, item={
        "type": "message", "id": item, "role": "assistant", "status": "in_progress",
        "content": []})
    yield event("response.content_part.added", **where,
                part={"type": "output_text", "text": "", "annotations": []})
    shown = ""
    async for delta in written(api, run):
        shown += delta
        yield event("response.output_text.delta", **where, delta=delta, logprobs=[])
    ended = await patiently(lambda: api.runtime.records.get_run(run.id))
    whole = shown or "\n\n".join(await turns(api, ended))
    if ended.state is not RunState.COMPLETED:
        whole = "\n\n".join(filter(None, [whole, stopped(ended, console)]))
    if whole != shown:  # what was not streamed (a paused run's note, an earlier answer)
        yield event("response.output_text.delta", **where, delta=whole[len(shown):]
                    if whole.startswith(shown) else whole, logprobs=[])
    part = {"type": "output_text", "text": whole, "annotations": []}
    yield event("response.output_text.done", **where, text=whole, logprobs=[])
    yield event("response.content_part.done", **where, part=part)
    yield event("response.output_item.done", output_index=0,
                item=_message(ended, whole, _status(ended)))
    final = await _response(api, ended, model, previous, console, text=whole)
    ending = {"failed": "response.failed", "incomplete": "response.incomplete"}
    yield event(ending.get(final["status"], "response.completed"), response=final)
