"""The fake workspace's conversations, as ``conversations.info`` answers them (no I/O).

docs.slack.dev/reference/methods/conversations.info: the answer's ``channel`` is a
conversation object (docs.slack.dev/reference/objects/conversation-object) saying
``is_channel``, ``is_group``, ``is_im``, ``is_mpim`` and ``is_private``; the bot token needs
the scope of the conversation's kind (``channels:read`` for a public channel,
``groups:read`` for a private one, ``im:read``, ``mpim:read``), else ``missing_scope``; an
id that names no conversation is ``channel_not_found``. A test sets a conversation up with
``FakeSlack.conversation``; one it did not, but where messages were posted, is taken by its
id as Slack's ids read (``C``: a public channel, ``G``: a private channel made before March
2021, ``D``: a DM).
"""

from __future__ import annotations

import re

from .methods import Workspace
from .payloads import ChannelType as ChannelKind
from .store import JSON, SlackError, Store

__all__ = ["Conversations"]

_ID = re.compile(r"^[CDG][A-Z0-9]{2,}$")
_BY_PREFIX: dict[str, ChannelKind] = {"C": "channel", "G": "group", "D": "im"}
_SCOPE: dict[ChannelKind, str] = {"channel": "channels:read", "group": "groups:read",
                                  "im": "im:read", "mpim": "mpim:read"}


class Conversations:
    """Every conversation's kind, by id."""

    def __init__(self, workspace: Workspace, store: Store) -> None:
        self._workspace = workspace
        self._store = store
        self.kinds: dict[str, ChannelKind] = {}

    def set(self, channel: str, kind: ChannelKind) -> None:
        """``channel`` is (now) of ``kind``: a public channel made private is ``group``."""
        self.kinds[channel] = kind

    def kind(self, channel: str) -> ChannelKind:
        if channel in self.kinds:
            return self.kinds[channel]
        if not _ID.match(channel) or not self._store.has(channel):
            raise SlackError("channel_not_found")
        return _BY_PREFIX[channel[0]]

    def info(self, params: JSON) -> JSON:
        """``conversations.info``: the conversation object, its kind's scope needed."""
        channel = str(params["channel"])
        kind = self.kind(channel)
        scopes = self._workspace.scopes
        if _SCOPE[kind] not in scopes:
            raise SlackError("missing_scope", needed=_SCOPE[kind], provided=",".join(scopes))
        answer: JSON = {"id": channel, "created": 1_700_000_000, "is_archived": False,
                        "is_im": kind == "im", "is_mpim": kind == "mpim",
                        "is_private": kind != "channel", "context_team_id":
                        self._workspace.team_id}
        if kind == "im":
            answer |= {"user": "U0FRIEND01", "is_user_deleted": False}
        else:
            legacy = kind == "group" and channel.startswith("G")  # a "private group"
            answer |= {"name": channel.lower(), "is_channel": kind != "mpim" and not legacy,
                       "is_group": legacy, "is_general": False, "is_member": True,
                       "is_shared": False, "is_ext_shared": False, "is_org_shared": False}
        return {"channel": answer}
