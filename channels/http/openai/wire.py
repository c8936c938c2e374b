"""The OpenAI wire's shapes: Chat Completions requests (lenient: parameters maiden does
not take are accepted and ignored), completions, chunks, models, and OpenAI's error
object. Pure: no FastAPI."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime import Run, Usage

__all__ = ["ChatMessageIn", "ChatRequest", "OpenAIError", "StreamOptions", "chunk",
           "completion", "error_responses", "model_object", "usage_of"]


class _Lenient(BaseModel):
    # A client's other parameters (temperature, top_p, n, seed, ...) are accepted and
    # ignored: the agent's own settings apply (docs/guides/openai-wire.md).
    model_config = ConfigDict(extra="allow")


class ChatMessageIn(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None


class StreamOptions(_Lenient):
    include_usage: bool = False


class ChatRequest(_Lenient):
    """``POST /v1/chat/completions``."""

    model: str = Field(description="the agent's name (GET /v1/models)")
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    metadata: dict[str, str] | None = Field(default=None, description=(
        "thread_id: the maiden thread to continue (else chosen from the history)"))
    tools: list[Any] | None = None
    functions: list[Any] | None = None


def usage_of(usage: Usage) -> dict[str, Any]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.prompt_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens}}


def completion(run: Run, model: str, content: str) -> dict[str, Any]:
    """A ``chat.completion`` answering with ``content`` (the run's visible text)."""
    return {"id": f"chatcmpl-{run.id}", "object": "chat.completion",
            "created": int(run.created_at), "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": content,
                                     "refusal": None}}],
            "usage": usage_of(run.usage),
            "system_fingerprint": None}


def chunk(run_id: str, created: int, model: str, delta: dict[str, Any],
          finish: str | None = None, usage: dict[str, Any] | None = None,
          choices: bool = True) -> dict[str, Any]:
    """A ``chat.completion.chunk``: one delta (or, with ``choices=False``, the usage)."""
    return {"id": f"chatcmpl-{run_id}", "object": "chat.completion.chunk", "created": created,
            "model": model, "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                         "logprobs": None}] if choices else [],
            "usage": usage}


def model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "maiden"}


class ErrorObject(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIError(BaseModel):
    """Every error on these routes, in OpenAI's shape (the SDKs raise their own classes)."""

    error: ErrorObject


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses, in OpenAI's shape."""
    from http import HTTPStatus

    return {status: {"model": OpenAIError, "description": HTTPStatus(status).phrase}
            for status in statuses}
