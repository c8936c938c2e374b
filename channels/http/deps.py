"""The FastAPI dependencies every router shares: the app's ``HttpApi``, the caller's
``Credential`` (401 without a valid token), ``needs(right)`` (403 without the right) and
the thread-id path check.

They read the app they serve from ``request.app.state.maiden``, not from a closure, so
the routers are plain module-level objects that any app can include.
"""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
from collections.abc import Awaitable, Callable
from typing import Annotated
from urllib.parse import unquote_to_bytes

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.convertors import PathConvertor, register_url_convertor

from ..access import Right
from .api import HttpApi
from .auth import Credential, Unauthorized
from .errors import ApiError

__all__ = ["Api", "Approver", "Caller", "Operator", "Talker", "caller", "http_api", "needs",
           "secured", "thread_path"]


def http_api(request: Request) -> HttpApi:
    """The ``HttpApi`` of the app serving this request."""
    api: HttpApi = request.app.state.maiden
    return api


Api = Annotated[HttpApi, Depends(http_api)]

# Always declared, so the schema can name it; an app without tokens drops it from its
# schema (``app.openapi``) and ``caller`` ignores the header.
_bearer = HTTPBearer(auto_error=False,
                     description="a token from [http] token_env or [[http.tokens]]")


async def caller(
    api: Api, given: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Credential:
    """Who the request is: with tokens configured, the one its bearer token names (401
    without a valid one); without, ``local`` (the app only allows that on loopback)."""
    credentials = api.credentials
    if not credentials.required:
        return credentials.identify(None)
    try:
        return credentials.identify(given.credentials if given else None)
    except Unauthorized:
        raise ApiError(401, "missing or wrong bearer token: send 'Authorization: "
                       "Bearer <token>' with a token from [http] token_env or "
                       "[[http.tokens]]", "unauthorized",
                       {"WWW-Authenticate": 'Bearer realm="maiden"'}) from None


Caller = Annotated[Credential, Depends(caller)]
secured = [Depends(caller)]
"""``dependencies=`` of a route any authenticated caller may use."""


def needs(right: Right) -> Callable[..., Awaitable[Credential]]:
    """A dependency: the caller, who must hold ``right`` (403 otherwise)."""

    async def holder(who: Caller) -> Credential:
        if not who.may(right):
            raise ApiError(403, f"{who.name!r} may not do this: it needs the {right!r} "
                                "right ([[http.tokens]] rights)", "forbidden")
        return who

    return holder


Talker = Annotated[Credential, Depends(needs("talk"))]
Approver = Annotated[Credential, Depends(needs("approve"))]
Operator = Annotated[Credential, Depends(needs("operate"))]


class _ThreadIdConvertor(PathConvertor):
    """A thread id in a route: anything, a newline included. With ``path`` (``.*``) an id
    holding one would match no route, a 404, where the runtime's rule answers 422 saying
    why."""

    regex = "(?s:.*)"


register_url_convertor("thread_id", _ThreadIdConvertor())


def thread_path(request: Request) -> None:
    """Refuse a thread id that is empty or not valid UTF-8 in the URL: decoded with
    replacement characters, ``a%FEb`` and ``a%FFb`` would be one thread."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(422, "the thread id in the URL is not valid UTF-8 once decoded",
                       "invalid_thread_id") from None
    if not request.path_params.get("thread_id"):
        raise ApiError(422, "the thread id is empty; list threads with GET /v1/threads",
                       "invalid_thread_id")
