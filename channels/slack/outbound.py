"""What reaches Slack from maiden, made before the runtime: the Web API client, where the
channel stands with Slack (``link``), the agent sessions a reply sets, the deliverer that
posts and the downloader that fetches. The runtime is built with the deliverer and the
fetcher (``Runtime(deliverers=..., fetchers=...)``), then the channel with the runtime and
this (``SlackChannel``): nothing is added to either afterwards."""

from __future__ import annotations

import functools

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from runtime import Records

from ..base import Link
from ..downloads import Downloader
from ..origins import SLACK_FILE_ORIGINS
from .config import SlackConfig, SlackSecrets
from .deliverer import SlackDeliverer
from .sessions import Sessions
from .streamer import SlackStreamer

__all__ = ["NO_ACCESS", "SlackOutbound"]

NO_ACCESS = ("Slack sent its sign-in page instead of the file: the bot token may not read "
             "it (the app needs the files:read scope; add it and reinstall the app)")


class SlackOutbound:
    """Slack's deliverer and fetcher with what they share; ``records``: the store's runs as
    the runtime reads them (a reply sets its thread's session from them)."""

    name = "slack"

    def __init__(self, config: SlackConfig, secrets: SlackSecrets, records: Records, *,
                 pace_s: float = 1.0) -> None:
        self.config = config
        self.secrets = secrets
        self.client = AsyncWebClient(
            token=secrets.bot_token, base_url=config.api_url,
            # Rate limits only: a connection error may hide a stored post (see deliverer.py).
            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=3)])
        self.link = Link()
        """Not connected until the channel says so (``SlackConnection``)."""
        self.sessions = Sessions(self.client, records)
        """Slack's agent sessions of the threads answered here, and its stop button (a
        run's end or pause is said with its reply, by the deliverer)."""
        streaming = None if config.stream == "off" else functools.partial(
            SlackStreamer, mode=config.stream, append_every_s=config.stream_every_s,
            edit_every_s=config.edit_every_s)
        self.deliverer = SlackDeliverer(self.client, link=self.link, pace_s=pace_s,
                                        sessions=self.sessions, streaming=streaming)
        self.fetcher = Downloader(
            "Slack", (*SLACK_FILE_ORIGINS, *config.file_hosts),
            headers={"Authorization": f"Bearer {secrets.bot_token}"}, no_access=NO_ACCESS)
