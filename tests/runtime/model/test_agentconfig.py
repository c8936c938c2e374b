"""``[[agents]]`` and ``[[providers]]`` entries (runtime/model/agentconfig.py): an agent's
settings over ``[agent]``'s, whether it names the tools it may use, and names refused."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from runtime.model.agentconfig import AgentEntry, ProviderEntry
from runtime.model.config import AgentConfig


def test_an_agents_settings_are_those_it_sets_over_the_base() -> None:
    base = AgentConfig(name="maiden", max_turns=20, approvers=["ann"], timezone="Europe/Paris")
    entry = AgentEntry(name="support", max_turns=5, description="answers customers",
                       tools=["lookup"])
    settings = entry.settings(base)
    assert type(settings) is AgentConfig
    assert (settings.name, settings.max_turns) == ("support", 5)
    assert (settings.approvers, settings.timezone) == (["ann"], "Europe/Paris")  # the base's
    # Set to what the default is, it is still set: the base's value does not show through.
    assert AgentEntry(name="eng", max_turns=12).settings(base).max_turns == 12


@pytest.mark.parametrize(("fields", "restricted"), [
    ({}, False),
    ({"tools": []}, True),  # may use none of the modules' tools
    ({"builtins": ["clock"]}, True),
    ({"mcp_servers": ["files"]}, True),
])
def test_an_agent_that_names_its_tools_is_restricted(fields: dict[str, Any],
                                                      restricted: bool) -> None:
    assert AgentEntry(name="a", **fields).restricted is restricted


@pytest.mark.parametrize("name", ["", "-lead", "two words", "a" * 65, "ünï"])
def test_names_must_be_plain(name: str) -> None:
    with pytest.raises(ValidationError, match="name"):
        AgentEntry(name=name)
    with pytest.raises(ValidationError, match="name"):
        ProviderEntry(name=name)


def test_an_agent_refuses_keys_it_does_not_know() -> None:
    with pytest.raises(ValidationError, match="budgets"):
        AgentEntry.model_validate({"name": "a", "budgets": {}})
    assert AgentEntry.model_validate({"name": "a.b_c-1", "default": True}).default
