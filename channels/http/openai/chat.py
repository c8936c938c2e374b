"""``POST /v1/chat/completions`` and ``GET /v1/models``: the agent behind the OpenAI wire.

maiden runs its own tools; the client sees the run's text (each turn's, the turns
joined by a blank line), streamed as it is written with ``stream: true``. A run that
waits for a person answers with a line saying what waits and how to decide; one that
fails or is cancelled answers with why (docs/guides/openai-wire.md)."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from runtime import (
    Origin,
    Run,
    RunState,
    StoreError,
)

from ..api import HttpApi, caller_key, check_reuse
from ..deps import Api, Talker, secured
from ..errors import ApiError
from .answers import (
    agent,
    answer,
    answered_by,
    console_of,
    images,
    patiently,
    refuse_client_tools,
    stopped,
    turns_in,
    written,
)
from .threads import THREAD_HEADER, choose, record_tip, said_of
from .wire import (
    ChatRequest,
    chunk,
    completion,
    error_responses,
    model_object,
    usage_of,
)

__all__ = ["router"]

log = logging.getLogger("maiden.http")

router = APIRouter(tags=["openai"])


_STREAM_DOC: dict[str, Any] = {
    "description": "the completion; with `stream`, its chunks as server-sent events "
                   "(`data: {...}`, then `data: [DONE]`)",
    "content": {"application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": {"type": "string"}}}}


@router.get("/v1/models", dependencies=secured, responses=error_responses(401))
async def list_models(api: Api) -> dict[str, Any]:
    """The agents this process serves, each a model (``id``: its name), the default first."""
    agents = api.runtime.operator.agents
    names = dict.fromkeys([agents.default.name, *agents.by_name])
    return {"object": "list", "data": [model_object(name) for name in names]}


@router.get("/v1/models/{model}", dependencies=secured, responses=error_responses(401, 404))
async def get_model(model: str, api: Api) -> dict[str, Any]:
    agent(api, model)
    return model_object(model)


@router.post("/v1/chat/completions", response_model=None, responses={
    200: _STREAM_DOC, **error_responses(400, 401, 403, 404, 409, 413, 415, 503)})
async def chat_completions(
    body: ChatRequest, request: Request, who: Talker, api: Api,
    idempotency_key: Annotated[str | None, Header(
        alias="Idempotency-Key", max_length=200,
        description="a retried request with the same key is the same run")] = None,
    thread: Annotated[str | None, Header(
        alias=THREAD_HEADER, max_length=1000,
        description="the maiden thread to continue (else chosen from the history)")] = None,
) -> Response:
    """A Chat Completions request answered by the agent (streamed with ``stream``)."""
    model = agent(api, body.model)
    settings = api.openai
    refuse_client_tools(api, body.tools or body.functions)
    last = body.messages[-1]
    if last.role != "user":
        raise ApiError(400, f"the last message must be the user's (it is {last.role!r}): "
                            "maiden answers a user message", "last_message")
    said = said_of(body.messages, ignore_tools=settings.client_tools == "ignore")
    before = said[:-1]
    chosen = await choose(api.runtime, body, before, thread,
                          from_user=settings.thread_from_user, caller=who.name,
                          visible=lambda t, write: api.owners.may_see(who, t, write=write))
    files = await images(api, last.content if isinstance(last.content, list) else [])
    run = await api.runtime.submit(
        chosen.thread_id, said[-1].text, origin=Origin(channel="http", user=who.name,
                                                 rights=tuple(sorted(who.rights))),
        idempotency_key=caller_key("openai", who, idempotency_key),
        files=files, context=chosen.context, agent=model,
        trace=request.headers.get("traceparent", ""))
    check_reuse(idempotency_key, run, said[-1].text, files, thread)
    model = answered_by(api, run)
    if body.stream:
        include = bool(body.stream_options and body.stream_options.include_usage)
        console = console_of(api, str(request.base_url))
        return StreamingResponse(_chunks(api, run, model, include, console),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no",
                                          "X-Maiden-Thread": run.thread_id,
                                          "X-Maiden-Run": run.id})
    run = await api.settle(run.id)
    content = await answer(api, run, console_of(api, str(request.base_url)))
    return JSONResponse(completion(run, model, content),
                        headers={"X-Maiden-Thread": run.thread_id, "X-Maiden-Run": run.id})


async def _chunks(api: HttpApi, run: Run, model: str, include_usage: bool, console: str
                  ) -> AsyncIterator[bytes]:
    """Chunks as the run writes: each turn's text, turns apart by a blank line; then the
    way it stopped if it did not complete; ``[DONE]``."""
    created = int(time.time())
    yield _data(chunk(run.id, created, model, {"role": "assistant", "content": ""}))
    wrote = False
    async for text in written(api, run):
        wrote = True
        yield _data(chunk(run.id, created, model, {"content": text}))
    ended = await patiently(lambda: api.runtime.records.get_run(run.id))
    if ended.state is RunState.COMPLETED:
        entries = await patiently(lambda: api.runtime.records.entries(ended.thread_id))
        try:
            await patiently(lambda: record_tip(api.runtime, ended.thread_id, entries))
        except StoreError as exc:  # the answer is shown all the same
            log.warning("run %s: its thread could not be noted under its history (%s): a "
                        "client that sends that history again without the %s header "
                        "begins a new thread", run.id, exc, THREAD_HEADER)
        if not wrote:  # an answer from before (a retried key), or one not streamed
            yield _data(chunk(run.id, created, model,
                              {"content": "\n\n".join(turns_in(entries, ended))}))
    else:
        note = stopped(ended, console)
        yield _data(chunk(run.id, created, model, {"content": ("\n\n" if wrote else "") + note}))
    yield _data(chunk(run.id, created, model, {}, finish="stop"))
    if include_usage:
        yield _data(chunk(run.id, created, model, {}, usage=usage_of(ended.usage),
                          choices=False))
    yield b"data: [DONE]\n\n"


def _data(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()

