"""A fake Slack that the real slack-sdk and slack-bolt clients talk to.

``FakeSlack`` serves the Web API and Socket Mode on 127.0.0.1 (``web.py``, ``socket.py``), and
POSTs to an app's Request URL as Slack does in HTTP mode (``request_url.py``), over an
in-memory workspace (``store.py``, ``methods.py``, ``streams.py``, ``sessions.py``,
``files.py``, ``people.py``), holding every call to Slack's documented contract first
(``contract.py``, ``rules.py``, ``blockkit.py``); ``payloads.py`` builds what Slack sends an
app — events, interactions, envelopes — and signs HTTP deliveries.
"""

from .methods import SCOPES, Workspace
from .payloads import (
    APP,
    BOT,
    BOT_USER,
    TEAM,
    ChannelType,
    agent_session_stopped_event,
    app_home_opened,
    app_mention_event,
    block_actions_payload,
    event_callback,
    feedback_click,
    message_event,
    sign,
    signed_command,
    signed_event,
    signed_interaction,
    slash_command,
    url_verification,
)
from .request_url import Delivery, RequestUrl, command_message
from .store import SlackError, make_ts
from .web import FakeSlack
from .wire import Call, Fault

__all__ = [
    "APP",
    "BOT",
    "BOT_USER",
    "SCOPES",
    "TEAM",
    "Call",
    "ChannelType",
    "Delivery",
    "FakeSlack",
    "Fault",
    "RequestUrl",
    "SlackError",
    "Workspace",
    "agent_session_stopped_event",
    "app_home_opened",
    "app_mention_event",
    "block_actions_payload",
    "command_message",
    "event_callback",
    "feedback_click",
    "make_ts",
    "message_event",
    "sign",
    "signed_command",
    "signed_event",
    "signed_interaction",
    "slash_command",
    "url_verification",
]
