"""The fake workspace's people, as ``users.info`` answers them (no I/O).

https://api.slack.com/methods/users.info (now docs.slack.dev/reference/methods/users.info):
the answer's ``user`` carries ``tz`` (an IANA name such as ``America/Sao_Paulo``),
``tz_label`` and ``tz_offset`` (seconds east of UTC); an id nobody has is
``user_not_found``. A test sets a person up with ``FakeSlack.person``; the bot is one of
them (``is_bot``), with the zone Slack gives every bot (``America/Los_Angeles``), which
says nothing about anyone.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .methods import Workspace, flag
from .store import JSON, SlackError

__all__ = ["BOT_ZONE", "People"]

BOT_ZONE = "America/Los_Angeles"


def _offset_and_label(tz: str) -> tuple[int, str]:
    """Now's offset from UTC (seconds) and the zone's abbreviation; (0, tz) for a name the
    host's tz database does not know (Slack's may, or a test wants one it cannot load)."""
    try:
        now = datetime.now(UTC).astimezone(ZoneInfo(tz))
    except (ZoneInfoNotFoundError, ValueError):
        return 0, tz
    offset = now.utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0, now.tzname() or tz


class People:
    """Everyone ``users.info`` knows, by id."""

    def __init__(self, workspace: Workspace) -> None:
        self._team = workspace.team_id
        self.by_id: dict[str, JSON] = {}
        self.add(workspace.bot_user_id, tz=BOT_ZONE, name=workspace.bot_name, is_bot=True)

    def add(self, user: str, *, tz: str, tz_label: str | None = None,
            tz_offset: int | None = None, name: str | None = None,
            is_bot: bool = False) -> JSON:
        """Set ``user`` up (again), in ``tz``; the label and offset default to the zone's
        now (any string is taken as ``tz``: Slack's answer is what the test says it is)."""
        offset, label = _offset_and_label(tz)
        person: JSON = {
            "id": user, "team_id": self._team, "name": name or user.lower(), "deleted": False,
            "real_name": name or user, "tz": tz, "tz_label": tz_label or label,
            "tz_offset": offset if tz_offset is None else tz_offset,
            "is_admin": False, "is_owner": False, "is_primary_owner": False,
            "is_restricted": False, "is_ultra_restricted": False, "is_bot": is_bot,
            "is_app_user": False, "updated": 1_700_000_000,
            "profile": {"real_name": name or user, "display_name": name or user,
                        "team": self._team},
        }
        self.by_id[user] = person
        return copy.deepcopy(person)

    def info(self, params: JSON) -> JSON:
        """``users.info``: the person (``locale`` with ``include_locale``)."""
        person = self.by_id.get(str(params["user"]))
        if person is None:
            raise SlackError("user_not_found")
        answer = copy.deepcopy(person)
        if flag(params, "include_locale"):
            answer["locale"] = "en-US"
        return {"user": answer}
