"""`maiden check` for Slack: the token works, against ``api_url``, with the scopes it needs."""

from __future__ import annotations

import json
from pathlib import Path

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from .config import SlackConfig

__all__ = ["MANIFEST", "MANIFEST_HTTP", "check_slack", "needed_scopes"]

MANIFEST = Path(__file__).with_name("manifest.json")
"""The app manifest to create the Slack app from, for Socket Mode (docs/get-started/slack.md)."""
MANIFEST_HTTP = Path(__file__).with_name("manifest-http.json")
"""The same app for the Events API (``mode = "http"``): its URLs point at /slack/events."""


def needed_scopes() -> list[str]:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return list(manifest["oauth_config"]["scopes"]["bot"])


async def check_slack(config: SlackConfig, bot_token: str) -> tuple[bool, list[str]]:
    """(ok, lines to print): ``auth.test`` with the bot token, and the scopes it lacks.
    Only the bot token is needed: a mode's other secret, unset, is reported apart."""
    client = AsyncWebClient(token=bot_token, base_url=config.api_url)
    try:
        auth = await client.auth_test()
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else exc
        return False, [f"bot token refused by {config.api_url}: {error}"]
    except (SlackClientError, OSError) as exc:
        return False, [f"cannot reach {config.api_url}: {exc}"]
    finally:
        session = getattr(client, "session", None)
        if session is not None:
            await session.close()
    lines = [f"workspace {auth.get('team')} ({auth.get('team_id')}) as "
             f"{auth.get('user')} ({auth.get('user_id')}), mode {config.mode}"]
    granted = {s.strip() for s in str(auth.headers.get("x-oauth-scopes", "")).split(",")
               if s.strip()}
    missing = [s for s in needed_scopes() if s not in granted]
    if missing:
        manifest = MANIFEST if config.mode == "socket" else MANIFEST_HTTP
        lines.append(f"missing scopes (see channels/slack/{manifest.name}): "
                     f"{', '.join(missing)}")
        if "assistant:write" in missing:
            lines.append("no assistant:write: the app is not declared an agent (app settings, "
                         "Agents & AI Apps), so Slack keeps no agent sessions for it and shows "
                         "no stop button; maiden shows a reaction while it works instead")
    return not missing, lines
