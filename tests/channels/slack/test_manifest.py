"""The Slack app manifests docs/get-started/slack.md says to paste: valid JSON that Slack
accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from channels.slack.check import MANIFEST, MANIFEST_HTTP, needed_scopes

KEYS = {"_metadata", "display_information", "features", "oauth_config", "settings"}


def load(path: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return manifest


@pytest.mark.parametrize("path", [MANIFEST, MANIFEST_HTTP], ids=["socket", "http"])
def test_each_manifest_has_what_slack_requires(path: Any) -> None:
    manifest = load(path)
    assert set(manifest) == KEYS
    assert manifest["display_information"]["name"]
    assert manifest["features"]["bot_user"]["display_name"]
    scopes = manifest["oauth_config"]["scopes"]["bot"]
    assert scopes == needed_scopes()  # what `maiden check` asks for
    # Slack refuses assistant:write unless the app has the assistant view.
    if "assistant:write" in scopes:
        assert manifest["features"]["assistant_view"]["assistant_description"]
    (command,) = manifest["features"]["slash_commands"]  # needs the commands scope
    assert command["command"] == "/maiden" and "commands" in scopes
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert {"app_mention", "message.channels", "message.im"} <= set(events)
    # Slack's stop button on an agent session sends this; unsubscribed, the button is a
    # spinner (docs.slack.dev/reference/events/agent_session_stopped).
    assert "agent_session_stopped" in events
    assert manifest["settings"]["interactivity"]["is_enabled"] is True


def test_socket_mode_and_http_mode_differ_only_in_how_slack_reaches_maiden() -> None:
    socket, http = load(MANIFEST), load(MANIFEST_HTTP)
    assert socket["settings"]["socket_mode_enabled"] is True
    assert "request_url" not in socket["settings"]["event_subscriptions"]
    assert http["settings"]["socket_mode_enabled"] is False
    assert http["settings"]["event_subscriptions"]["request_url"].endswith("/slack/events")
    assert http["settings"]["interactivity"]["request_url"].endswith("/slack/events")
    assert "url" not in socket["features"]["slash_commands"][0]
    assert http["features"]["slash_commands"][0]["url"].endswith("/slack/events")
    http["features"]["slash_commands"][0].pop("url")
    for manifest in (socket, http):
        settings = manifest.pop("settings")
        settings["event_subscriptions"].pop("request_url", None)
        settings["interactivity"].pop("request_url", None)
        settings.pop("socket_mode_enabled")
        manifest["settings"] = settings
    assert socket == http
