"""The console's sign-in, CSRF tokens and response headers.

A session is a cookie ``nonce.name.mac``: ``name`` is the token's name (``[[http.tokens]]``,
or ``operator`` for ``[http] token_env``) and the MAC is keyed by that token (so signing in
proves the token, a changed or removed token ends its sessions, and sessions outlive a
restart), or, when no token is needed (loopback without tokens, as the API), the name is
``local`` and the key is made when the process starts. The operator shown, and the name
decisions are made under, is the session's name: nobody types it. The cookie is HttpOnly
and SameSite=Strict and has no expiry: it lasts the browser session. The raw token is never
stored in it.

Every state-changing request is a POST carrying the session's CSRF token (a form field,
or the ``X-CSRF-Token`` header htmx sends), a MAC of the session's nonce.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from starlette.requests import Request

from ...access import Right
from ..auth import LOCAL, Credential, Credentials, Unauthorized

__all__ = ["COOKIE", "CSP", "Guard", "Session", "page_headers"]

COOKIE = "maiden_console"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")


def page_headers() -> dict[str, str]:
    """What every console response carries: self-only CSP, no sniffing, no caching.

    The referrer policy is ``same-origin``, not ``no-referrer``: under ``no-referrer`` a
    browser sends ``Origin: null`` with the console's own forms, which the server's origin
    check (rightly) refuses; ``same-origin`` still tells other sites nothing."""
    return {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY",
            "Cache-Control": "no-store"}


@dataclass(frozen=True, slots=True)
class Session:
    nonce: str
    caller: Credential

    @property
    def operator(self) -> str:
        return self.caller.name

    def may(self, right: Right) -> bool:
        return self.caller.may(right)


class Guard:
    """Makes and checks session cookies and CSRF tokens."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self._local_key = secrets.token_bytes(32)

    @property
    def needs_sign_in(self) -> bool:
        return self.credentials.required

    def _key(self, caller: Credential) -> bytes:
        if not caller.token:
            return self._local_key
        return hashlib.sha256(b"maiden-console\x00" + caller.token.encode()).digest()

    def _mac(self, caller: Credential, *parts: str) -> str:
        return hmac.new(self._key(caller), "\x00".join(parts).encode(),
                        hashlib.sha256).hexdigest()

    def sign_in(self, given: str) -> Credential | None:
        """The holder of the token ``given``, or None."""
        try:
            return self.credentials.identify(given) if given else None
        except Unauthorized:
            return None

    def local(self) -> Credential:
        """The caller when no token is configured."""
        return self.credentials.identify(None)

    def new_cookie(self, caller: Credential) -> tuple[str, Session]:
        nonce = secrets.token_urlsafe(18)
        name = base64.urlsafe_b64encode(caller.name.encode()).decode().rstrip("=")
        mac = self._mac(caller, "session", nonce, name)
        return f"{nonce}.{name}.{mac}", Session(nonce, caller)

    def session(self, request: Request) -> Session | None:
        """The request's valid session, or None (a session of a token no longer configured
        is not valid)."""
        raw = request.cookies.get(COOKIE, "")
        parts = raw.split(".")
        if len(parts) != 3:
            return None
        nonce, name, mac = parts
        try:
            operator = base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode()
        except ValueError:
            return None
        if self.needs_sign_in:
            caller = self.credentials.named(operator)
        else:
            caller = self.local() if operator == LOCAL else None
        if caller is None or not hmac.compare_digest(
                mac.encode(), self._mac(caller, "session", nonce, name).encode()):
            return None
        return Session(nonce, caller)

    def csrf(self, session: Session) -> str:
        return self._mac(session.caller, "csrf", session.nonce)

    def csrf_ok(self, session: Session, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(),
                                                         self.csrf(session).encode())
