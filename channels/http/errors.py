"""Errors as ``application/problem+json``, the body size limit, and bearer-token auth."""

from __future__ import annotations

import hmac
import json
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from runtime import (
    InvalidThreadId,
    MaidenError,
    NotFound,
    RunError,
    StaleWrite,
    StoreError,
    StoreGone,
)

from .models import Problem

__all__ = [
    "PROBLEM",
    "ApiError",
    "check_bearer",
    "fix_openapi",
    "install_error_handlers",
    "problem",
    "problem_responses",
]

PROBLEM = "application/problem+json"

# Run-level refusals from the runtime, by their stable reason.
_RUN_ERRORS = {
    "not_an_approver": 403,
    "not_awaiting_approval": 409,
    "stale_approval": 409,
    "illegal_transition": 409,
    "cancel_failed": 409,
    "already_ended": 409,
    "not_resumable": 409,
    "shutting_down": 503,
    "invalid_message": 422,
    "request_timeout": 504,
}


class ApiError(MaidenError):
    """An error the API answers with on purpose."""

    def __init__(self, status: int, detail: str, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code
        self.headers = headers


def problem(status: int, detail: str, code: str | None = None,
            headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    body = Problem(title=HTTPStatus(status).phrase, status=status, detail=detail, code=code,
                   **extra)
    return JSONResponse(body.model_dump(mode="json", exclude_none=True), status_code=status,
                        media_type=PROBLEM, headers=headers)


OPENAI_PATHS = ("/v1/chat/completions", "/v1/models", "/v1/responses")
"""The OpenAI wire's routes: their errors take OpenAI's shape (the SDKs read it)."""

_OPENAI_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                 403: "permission_error", 404: "not_found_error", 409: "conflict_error",
                 413: "invalid_request_error", 415: "invalid_request_error",
                 422: "invalid_request_error", 429: "rate_limit_error"}


def openai_error(status: int, message: str, code: str | None = None,
                 headers: dict[str, str] | None = None, param: str | None = None
                 ) -> JSONResponse:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    body = {"error": {"message": message, "type": _OPENAI_TYPES.get(status, "server_error"),
                      "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def early_refusal(path: str, status: int, detail: str, code: str) -> JSONResponse:
    """A refusal before routing (a Host, a body too large), in the shape the path's
    clients read."""
    if path.startswith(OPENAI_PATHS):
        return openai_error(status, detail, code)
    return problem(status, detail, code)


def _answer(request: Request, status: int, detail: str, code: str | None = None,
            headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    """An error in the shape the route's clients read: OpenAI's on its wire, else a
    problem document."""
    if request.url.path.startswith(OPENAI_PATHS):
        # OpenAI says 400 where maiden's own routes say 422 for a malformed request.
        return openai_error(400 if status == 422 else status, detail, code, headers)
    return problem(status, detail, code, headers, **extra)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses (``openapi()`` sets the media type)."""
    return {status: {"model": Problem, "description": HTTPStatus(status).phrase}
            for status in statuses}


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return _answer(request, exc.status, exc.detail, exc.code, exc.headers)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        status = HTTPStatus(exc.status_code)
        detail = exc.detail if isinstance(exc.detail, str) else status.phrase
        code = status.phrase.lower().replace(" ", "_").replace("-", "_")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = _allowed(request) or headers.get("Allow", "")
        return _answer(request, exc.status_code, detail, code, headers=headers or None)

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [_field_error(err) for err in exc.errors()]
        detail = "; ".join(f"{e['field']}: {e['problem']}" for e in errors) or "invalid request"
        kind = request.headers.get("content-type", "")
        if request.method == "POST" and kind and "json" not in kind:
            detail = ("send the body as JSON with 'Content-Type: application/json' "
                      f"(got {kind!r}); {detail}")
        return _answer(request, 422, detail, "invalid_request", errors=errors)

    async def maiden_error(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, NotFound):
            return _answer(request, 404, str(exc), "not_found")
        if isinstance(exc, InvalidThreadId):
            return _answer(request, 422, str(exc), "invalid_thread_id")
        if isinstance(exc, StaleWrite):
            return _answer(request, 409, f"the run changed meanwhile; try again ({exc})",
                           "conflict")
        if isinstance(exc, StoreGone):  # the reason says what happened and what to do
            return _answer(request, 503, str(exc), "store_gone")
        if isinstance(exc, StoreError):
            return _answer(request, 503, f"the store is unavailable: {exc}", "store_error")
        assert isinstance(exc, RunError)
        return _answer(request, _RUN_ERRORS.get(exc.reason, 409), str(exc), exc.reason)

    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        return _answer(request, 500, f"internal error: {type(exc).__name__}", "internal_error")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(Exception, crashed)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    for kind in (StoreError, RunError):
        app.add_exception_handler(kind, maiden_error)


def _allowed(request: Request) -> str:
    """Every method the schema documents for the path of the route that took the request
    but not its method; "" for a route the schema does not hold. Starlette's 405 names only
    that one route's methods, where a path may have several routes (``GET`` and ``DELETE
    /v1/threads/{id}``)."""
    path = getattr(request.scope.get("route"), "path_format", None)
    documented = request.app.openapi().get("paths", {}).get(path, {}) if path else {}
    return ", ".join(sorted(method.upper() for method in documented))


def _field_error(err: Any) -> dict[str, str]:
    if err.get("type") == "json_invalid":
        # pydantic names the byte offset as if it were a field ("body.9").
        offset = err.get("loc", ("", "?"))[-1]
        return {"field": "body", "problem": f"the body is not valid JSON (error at character "
                                            f"{offset}: {err.get('ctx', {}).get('error', '')})"}
    return {"field": ".".join(str(p) for p in err.get("loc", ())),
            "problem": str(err.get("msg", ""))}


def check_bearer(expected: str, authorization: str | None) -> None:
    """Raise 401 unless ``authorization`` is ``Bearer <expected>`` (constant-time)."""
    scheme, _, given = (authorization or "").partition(" ")
    # Header values arrive decoded as latin-1: encoding back gives the bytes that were sent.
    ok = scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("latin-1", "replace"), expected.encode())
    if not ok:
        raise ApiError(401, "missing or wrong bearer token: send 'Authorization: Bearer "
                       "<token>' with the token from the variable named by [http] token_env",
                       "unauthorized", {"WWW-Authenticate": 'Bearer realm="maiden"'})


THREAD_ID_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"


def _thread_id_rule(schema: dict[str, Any], in_path: bool) -> None:
    # A query's empty thread_id is no filter; a path's cannot be empty.
    pattern = THREAD_ID_PATTERN if in_path else THREAD_ID_PATTERN.replace("]+$", "]*$")
    for alternative in schema.get("anyOf", [schema]):  # an optional query parameter's string
        if alternative.get("type") == "string":
            alternative["pattern"] = pattern


def fix_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """Errors are ``application/problem+json`` (FastAPI would say application/json)."""
    problem_ref = {"$ref": "#/components/schemas/Problem"}
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("name") == "thread_id" and "schema" in parameter:
                    # The one rule for thread ids (runtime check_thread_id): no control
                    # characters.
                    _thread_id_rule(parameter["schema"], parameter.get("in") == "path")
            for response in operation.get("responses", {}).values():
                ref = response.get("content", {}).get("application/json", {}).get(
                    "schema", {}).get("$ref", "")
                if ref.endswith(("/Problem", "/HTTPValidationError")):
                    response["content"] = {PROBLEM: {"schema": problem_ref}}
    schemas = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    # Round-trip so nothing FastAPI caches is shared with the caller.
    return dict(json.loads(json.dumps(schema)))
