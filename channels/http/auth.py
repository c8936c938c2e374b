"""Who a request is: the named token it carries, never a field of its body.

``[[http.tokens]]`` gives each holder a name and rights (``talk``, ``approve``,
``operate``); ``[http] token_env`` is one more, named ``operator``, with every right. With
no token configured (loopback only) every caller is ``local`` with every right, and the
runtime's ``[agent] approvers`` (if set) must name ``local`` for HTTP approvals to pass.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from runtime import MaidenError

from ..access import RIGHTS, Right

__all__ = ["LOCAL", "Credential", "Credentials", "Unauthorized"]

LOCAL = "local"
"""The identity of every caller when no token is configured."""


@dataclass(frozen=True, slots=True)
class Credential:
    """A token's holder: the name requests are recorded under, and what it may do."""

    name: str
    token: str
    rights: frozenset[Right]
    threads: tuple[str, ...] = ()
    """Patterns (``support/*``) of the threads made over HTTP it may see besides its own
    (``owners.may_see``)."""

    def may(self, right: Right) -> bool:
        return right in self.rights


LOCAL_CALLER = Credential(LOCAL, "", frozenset(RIGHTS))


class Unauthorized(MaidenError):
    """The request carries no token, or one that is not configured."""


class Credentials:
    """The configured tokens; ``identify`` finds whose a presented token is."""

    def __init__(self, credentials: Iterable[Credential] = ()) -> None:
        self._all = tuple(credentials)

    @classmethod
    def single(cls, token: str | None, name: str = "operator") -> Credentials:
        """One token with every right (None: no token at all)."""
        return cls([Credential(name, token, frozenset(RIGHTS))] if token else [])

    @property
    def required(self) -> bool:
        """Whether callers must present a token (False: every caller is ``local``)."""
        return bool(self._all)

    def __iter__(self) -> Iterator[Credential]:
        return iter(self._all)

    def named(self, name: str) -> Credential | None:
        return next((c for c in self._all if c.name == name), None)

    def identify(self, given: str | None) -> Credential:
        """The holder of ``given`` (``local`` when no token is configured).

        Every configured token is compared, in constant time, so the time taken does not
        say which one nearly matched. ``Unauthorized`` if none does.
        """
        if not self._all:
            return LOCAL_CALLER
        presented = (given or "").encode("latin-1", "replace")
        found = None
        for credential in self._all:
            if hmac.compare_digest(presented, credential.token.encode()) and given:
                found = credential
        if found is None:
            raise Unauthorized
        return found

    def identify_header(self, authorization: str | None) -> Credential:
        """``identify`` for an ``Authorization: Bearer <token>`` header."""
        scheme, _, given = (authorization or "").partition(" ")
        if self._all and scheme.lower() != "bearer":
            raise Unauthorized
        return self.identify(given.strip())
