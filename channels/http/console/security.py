"""The console's sign-in, CSRF tokens and response headers.

A session is a cookie ``nonce.operator.mac``: the MAC is keyed by the API's bearer token
(so signing in proves the token, a new token ends every session, and sessions outlive a
restart), or, when no token is needed (loopback without ``token_env``, as the API), by a
key made when the process starts. The cookie is HttpOnly and SameSite=Strict and has no
expiry: it lasts the browser session. The raw token is never stored in it.

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

__all__ = ["COOKIE", "CSP", "Guard", "Session", "page_headers"]

COOKIE = "maiden_console"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")


def page_headers() -> dict[str, str]:
    """What every console response carries: self-only CSP, no sniffing, no caching."""
    return {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
            "Cache-Control": "no-store"}


@dataclass(frozen=True, slots=True)
class Session:
    nonce: str
    operator: str


class Guard:
    """Makes and checks session cookies and CSRF tokens."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self._key = (hashlib.sha256(b"maiden-console\x00" + token.encode()).digest()
                     if token else secrets.token_bytes(32))

    @property
    def needs_sign_in(self) -> bool:
        return self.token is not None

    def _mac(self, *parts: str) -> str:
        return hmac.new(self._key, "\x00".join(parts).encode(), hashlib.sha256).hexdigest()

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(),
                                                              self.token.encode())

    def new_cookie(self, operator: str) -> tuple[str, Session]:
        nonce = secrets.token_urlsafe(18)
        name = base64.urlsafe_b64encode(operator.encode()).decode().rstrip("=")
        return f"{nonce}.{name}.{self._mac('session', nonce, name)}", Session(nonce, operator)

    def session(self, request: Request) -> Session | None:
        """The request's valid session, or None."""
        raw = request.cookies.get(COOKIE, "")
        parts = raw.split(".")
        if len(parts) != 3:
            return None
        nonce, name, mac = parts
        if not hmac.compare_digest(mac.encode(), self._mac("session", nonce, name).encode()):
            return None
        try:
            operator = base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode()
        except ValueError:
            return None
        return Session(nonce, operator)

    def csrf(self, session: Session) -> str:
        return self._mac("csrf", session.nonce)

    def csrf_ok(self, session: Session, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(),
                                                         self.csrf(session).encode())
