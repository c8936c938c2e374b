"""Who may do what on a chat channel, one model for Slack and Discord: fail closed.

A right (``talk``, ``approve``, ``operate``) is granted by a rule that names a place and,
optionally, users; a rule with users grants only to those users, and only in its place.
Nothing granted, nothing allowed. The keys people already write (``open``,
``allow_users``, ``allow_channels``, ``allow_guilds``, ``approvers``, ``allow_dms``) are
shorthand for rules (``shorthand``), so each key's meaning is one table of rules that
``maiden check``, the banner and the console print as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ANYWHERE", "DM", "RIGHTS", "Access", "Place", "Right", "Rule", "RuleConfig",
           "access_of", "shorthand"]

Right = Literal["talk", "approve", "operate"]
"""talk: start and continue runs; approve: decide calls; operate: stop, resume, schedules."""
RIGHTS: tuple[Right, ...] = ("talk", "approve", "operate")

ANYWHERE = "*"
"""Every channel (and, on Discord, guild) the bot is in; direct messages are not in it."""
DM = "dm"
"""A direct message with the bot."""


@dataclass(frozen=True, slots=True)
class Place:
    """Where a message or a click comes from: the ids that name it (a Slack channel; a
    Discord channel, its parent channel and its guild) and whether it is a DM."""

    ids: tuple[str, ...] = ()
    direct: bool = False
    private: bool = False
    """A private channel (Slack's ``group`` and ``mpim``, or one ``conversations.info``
    says is private; a Discord channel ``@everyone`` cannot view, a private thread): what
    is learned there stays there (a DM is private too)."""

    @classmethod
    def of(cls, *ids: str | None, direct: bool = False, private: bool = False) -> Place:
        return cls(tuple(i for i in ids if i), direct, private)

    def rights(self, access: Access, user: str) -> tuple[Right, ...]:
        """The rights ``access`` grants ``user`` here (what a run's ``Origin`` carries)."""
        return tuple(r for r in RIGHTS if access.allows(user, self, r))


@dataclass(frozen=True, slots=True)
class Rule:
    """``rights`` for ``users`` (None: anyone) in ``place`` (an id, ``dm`` or ``*``)."""

    place: str
    rights: frozenset[Right]
    users: frozenset[str] | None = None

    def covers(self, user: str, place: Place) -> bool:
        if self.users is not None and user not in self.users:
            return False
        if self.place == DM:
            return place.direct
        if self.place == ANYWHERE:
            return not place.direct
        return self.place in place.ids

    def describe(self) -> str:
        rights = ", ".join(r for r in RIGHTS if r in self.rights)
        who = "anyone" if self.users is None else ", ".join(sorted(self.users))
        where = {DM: "a DM with the bot",
                 ANYWHERE: "every channel (not DMs)"}.get(self.place, self.place)
        return f"{rights}: {who} in {where}"


@dataclass(frozen=True, slots=True)
class Access:
    """The rules of one channel; a right is allowed when one rule grants it."""

    rules: tuple[Rule, ...] = ()

    def allows(self, user: str, place: Place, right: Right) -> bool:
        return any(right in rule.rights and rule.covers(user, place) for rule in self.rules)

    @property
    def nobody(self) -> bool:
        """True when no rule grants anything (the banner and `maiden check` say so)."""
        return not any(rule.rights for rule in self.rules)

    def describe(self) -> list[str]:
        """One line per rule, in order, for the banner, `maiden check` and the console."""
        if self.nobody:
            return ["serving nobody: no rule grants a right (set open = true, allow_users, "
                    "allow_channels or rules)"]
        return [rule.describe() for rule in self.rules]

    def summary(self) -> str:
        """A few words for the channel's banner line."""
        if self.nobody:
            return "serving nobody: set open = true, allow_users, allow_channels or rules"
        count = len(self.rules)
        return f"{count} access rule{'' if count == 1 else 's'}"


def shorthand(*, open: bool = False, users: Iterable[str] = (), places: Iterable[str] = (),
              approvers: Iterable[str] = (), allow_dms: bool = True) -> tuple[Rule, ...]:
    """The rules the shorthand keys stand for (the table of
    docs/guides/approvals-and-rights.md says the same).

    ``open``: anyone, anywhere. Users and places: the listed users in the listed places
    (both must match); users only: them in every channel; places only: anyone there.
    Listed users (or everyone, when open) may also DM the bot unless ``allow_dms`` is
    false. Whoever may talk may operate (``stop``). ``approvers`` narrows ``approve``
    to those of them who may talk there; without it, whoever may talk may approve (the
    runtime then applies ``[agent] approvers``).
    """
    listed = frozenset(users) or None
    where: list[tuple[str, frozenset[str] | None]]
    if open:
        where = [(ANYWHERE, None), *([(DM, None)] if allow_dms else [])]
    elif listed is not None:
        where = [(p, listed) for p in dict.fromkeys(places or [ANYWHERE])]
        where += [(DM, listed)] if allow_dms else []
    else:
        where = [(p, None) for p in dict.fromkeys(places)]
    deciders = frozenset(approvers)
    if not deciders:
        return tuple(Rule(p, frozenset(RIGHTS), who) for p, who in where)
    rules: list[Rule] = []
    for p, who in where:
        rules.append(Rule(p, frozenset({"talk", "operate"}), who))
        narrowed = deciders if who is None else deciders & who
        if narrowed:
            rules.append(Rule(p, frozenset({"approve"}), narrowed))
    return tuple(rules)


class RuleConfig(BaseModel):
    """One ``[[channels.<name>.rules]]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    place: str = Field(min_length=1, description="a channel id (Discord: or a guild id), "
                       "'dm' for direct messages, or '*' for every channel (not DMs)")
    users: list[str] | None = Field(
        default=None, description="user ids; left out: everyone in the place")
    rights: list[Right] = Field(min_length=1, description="talk, approve and/or operate")

    @field_validator("place")
    @classmethod
    def _a_place(cls, place: str) -> str:
        if not place.strip():
            raise ValueError("name a channel id, 'dm' or '*'")
        return place.strip()

    @field_validator("users")
    @classmethod
    def _some_users(cls, users: list[str] | None) -> list[str] | None:
        if users is not None and not users:
            raise ValueError("list at least one user id, or leave users out for everyone "
                             "in the place")
        return users

    def rule(self) -> Rule:
        return Rule(self.place, frozenset(self.rights),
                    None if self.users is None else frozenset(self.users))


def access_of(rules: Sequence[RuleConfig], *expanded: Rule) -> Access:
    """The shorthand's rules followed by the explicit ones (each only grants)."""
    return Access((*expanded, *(r.rule() for r in rules)))
