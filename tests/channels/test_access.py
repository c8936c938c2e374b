"""The rights model (channels/access.py): the shorthand keys' rules and who may do what."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from bot.config import parse_config
from channels.access import ANYWHERE, DM, RIGHTS, Access, Place, Right, Rule, shorthand
from channels.discord.config import DiscordConfig
from channels.slack.config import SlackConfig
from runtime import ConfigError

TEAM = Place.of("C0TEAM")
OPS = Place.of("C0OPS")
OTHER = Place.of("C0OTHER")
DIRECT = Place.of("D0ALICE", direct=True)
# A Discord message in thread T1 under channel C1 of guild G1.
THREAD = Place.of("T1", "C1", "G1")

ALL: frozenset[Right] = frozenset(RIGHTS)
TALK_OPERATE: frozenset[Right] = frozenset({"talk", "operate"})

# (what, shorthand keys, user, place, right, allowed)
CASES: list[tuple[str, dict[str, Any], str, Place, Right, bool]] = [
    ("nothing configured: nobody", {}, "alice", TEAM, "talk", False),
    ("nothing configured: nobody in a DM", {}, "alice", DIRECT, "talk", False),
    ("nothing configured: nobody approves", {}, "alice", TEAM, "approve", False),
    ("open: anyone in any channel", {"open": True}, "zed", OTHER, "talk", True),
    ("open: anyone in a DM", {"open": True}, "zed", DIRECT, "talk", True),
    ("open, allow_dms = false: no DMs", {"open": True, "allow_dms": False}, "zed", DIRECT,
     "talk", False),
    ("open: anyone approves (the runtime narrows)", {"open": True}, "zed", OTHER, "approve",
     True),
    ("users only: a listed user anywhere", {"users": ["alice"]}, "alice", OTHER, "talk", True),
    ("users only: an outsider refused", {"users": ["alice"]}, "zed", OTHER, "talk", False),
    ("places only: anyone in a listed place", {"places": ["C0TEAM"]}, "zed", TEAM, "talk",
     True),
    ("places only: not in another place", {"places": ["C0TEAM"]}, "zed", OTHER, "talk", False),
    ("places only: no DMs", {"places": ["C0TEAM"]}, "zed", DIRECT, "talk", False),
    ("both: a listed user in a listed place", {"users": ["alice"], "places": ["C0TEAM"]},
     "alice", TEAM, "talk", True),
    ("both: an outsider in an allowed channel refused",
     {"users": ["alice"], "places": ["C0TEAM"]}, "zed", TEAM, "talk", False),
    ("both: a listed user outside the listed places refused",
     {"users": ["alice"], "places": ["C0TEAM"]}, "alice", OTHER, "talk", False),
    ("both: a listed user's DM is allowed", {"users": ["alice"], "places": ["C0TEAM"]},
     "alice", DIRECT, "talk", True),
    ("both: an outsider's DM refused", {"users": ["alice"], "places": ["C0TEAM"]}, "zed",
     DIRECT, "talk", False),
    ("both, allow_dms = false: no DM",
     {"users": ["alice"], "places": ["C0TEAM"], "allow_dms": False}, "alice", DIRECT, "talk",
     False),
    ("users only, allow_dms = false: channels still", {"users": ["alice"], "allow_dms": False},
     "alice", OTHER, "talk", True),
    ("users only, allow_dms = false: no DM", {"users": ["alice"], "allow_dms": False},
     "alice", DIRECT, "talk", False),
    ("a listed guild covers its threads", {"places": ["G1"]}, "zed", THREAD, "talk", True),
    ("a listed channel covers its threads", {"places": ["C1"]}, "zed", THREAD, "talk", True),
    ("approvers: an approver who may talk approves",
     {"places": ["C0TEAM"], "approvers": ["bob"]}, "bob", TEAM, "approve", True),
    ("approvers: someone else who may talk does not",
     {"places": ["C0TEAM"], "approvers": ["bob"]}, "zed", TEAM, "approve", False),
    ("approvers: they still talk and operate",
     {"places": ["C0TEAM"], "approvers": ["bob"]}, "zed", TEAM, "operate", True),
    ("approvers: not where they may not talk",
     {"places": ["C0TEAM"], "approvers": ["bob"]}, "bob", OTHER, "approve", False),
    ("approvers: must also be an allowed user",
     {"users": ["alice"], "approvers": ["bob"]}, "bob", OTHER, "approve", False),
    ("approvers: an allowed user who is one approves in a DM",
     {"users": ["alice", "bob"], "approvers": ["bob"]}, "bob", DIRECT, "approve", True),
    ("no approvers: whoever may talk approves", {"users": ["alice"]}, "alice", OTHER,
     "approve", True),
    ("operate goes with talk", {"users": ["alice"]}, "alice", OTHER, "operate", True),
    ("operate: not for outsiders", {"users": ["alice"]}, "zed", OTHER, "operate", False),
]


@pytest.mark.parametrize(("what", "keys", "user", "place", "right", "ok"), CASES,
                         ids=[row[0] for row in CASES])
def test_the_shorthand(what: str, keys: dict[str, Any], user: str, place: Place,
                       right: Right, ok: bool) -> None:
    assert Access(shorthand(**keys)).allows(user, place, right) is ok


# What each shorthand stands for, rule by rule (the table of
# docs/guides/approvals-and-rights.md says the same).
EXPANSIONS: list[tuple[dict[str, Any], tuple[Rule, ...]]] = [
    ({}, ()),
    ({"open": True}, (Rule(ANYWHERE, ALL), Rule(DM, ALL))),
    ({"open": True, "users": ["a"]}, (Rule(ANYWHERE, ALL), Rule(DM, ALL))),
    ({"users": ["a"]}, (Rule(ANYWHERE, ALL, frozenset({"a"})), Rule(DM, ALL, frozenset({"a"})))),
    ({"places": ["C1", "C1"]}, (Rule("C1", ALL),)),
    ({"users": ["a"], "places": ["C1"], "allow_dms": False},
     (Rule("C1", ALL, frozenset({"a"})),)),
    ({"places": ["C1"], "approvers": ["b"]},
     (Rule("C1", TALK_OPERATE), Rule("C1", frozenset({"approve"}), frozenset({"b"})))),
    ({"users": ["a"], "approvers": ["b"], "allow_dms": False},
     (Rule(ANYWHERE, TALK_OPERATE, frozenset({"a"})),)),
]


@pytest.mark.parametrize(("keys", "rules"), EXPANSIONS)
def test_what_the_shorthand_stands_for(keys: dict[str, Any], rules: tuple[Rule, ...]) -> None:
    assert shorthand(**keys) == rules


def test_a_rule_with_users_grants_only_to_them_only_there() -> None:
    """The example of docs/guides/approvals-and-rights.md: everyone talks in the team
    channel, two approve there, and only two people may talk in the ops channel."""
    slack = SlackConfig.model_validate({"rules": [
        {"place": "C0TEAM", "rights": ["talk", "operate"]},
        {"place": "C0TEAM", "users": ["U_ANA", "U_BEN"], "rights": ["approve"]},
        {"place": "C0OPS", "users": ["U_ANA", "U_CAT"], "rights": ["talk", "operate"]},
    ]})
    access = slack.access
    assert access.allows("U_ZED", TEAM, "talk") and not access.allows("U_ZED", TEAM, "approve")
    assert access.allows("U_BEN", TEAM, "approve") and not access.allows("U_CAT", TEAM,
                                                                          "approve")
    assert access.allows("U_CAT", OPS, "talk") and not access.allows("U_BEN", OPS, "talk")
    assert not access.allows("U_ANA", OPS, "approve")  # nothing granted there
    assert not access.allows("U_ANA", DIRECT, "talk")  # no DM rule
    assert not access.allows("U_ANA", OTHER, "talk")
    assert access.describe() == [
        "talk, operate: anyone in C0TEAM",
        "approve: U_ANA, U_BEN in C0TEAM",
        "talk, operate: U_ANA, U_CAT in C0OPS",
    ]


def test_the_star_is_every_channel_and_dm_is_direct_messages() -> None:
    access = DiscordConfig.model_validate({"rules": [
        {"place": "*", "users": ["1"], "rights": ["talk"]},
        {"place": "dm", "users": ["2"], "rights": ["talk"]},
    ]}).access
    assert access.allows("1", THREAD, "talk") and not access.allows("1", DIRECT, "talk")
    assert access.allows("2", DIRECT, "talk") and not access.allows("2", THREAD, "talk")
    assert access.describe() == ["talk: 1 in every channel (not DMs)",
                                 "talk: 2 in a DM with the bot"]


def test_rules_add_to_the_shorthand() -> None:
    access = SlackConfig.model_validate({"allow_channels": ["C0TEAM"], "rules": [
        {"place": "C0OPS", "users": ["U1"], "rights": ["talk"]}]}).access
    assert access.allows("U9", TEAM, "talk") and access.allows("U1", OPS, "talk")
    assert not access.allows("U9", OPS, "talk")
    assert not access.allows("U1", OPS, "operate")  # only what the rule lists


def test_nobody_is_said() -> None:
    assert SlackConfig().access.nobody and DiscordConfig().access.nobody
    assert SlackConfig().access.describe()[0].startswith("serving nobody")
    assert "serving nobody" in DiscordConfig().access.summary()
    assert not SlackConfig(open=True).access.nobody
    assert SlackConfig(open=True).access.summary() == "2 access rules"


@pytest.mark.parametrize(("rule", "key", "says"), [
    ({"place": "C1", "rights": ["talk", "speak"]}, "rules.0.rights.1", "'talk'"),
    ({"place": "C1", "rights": []}, "rules.0.rights", "at least 1"),
    ({"place": "C1"}, "rules.0.rights", "required"),
    ({"place": " ", "rights": ["talk"]}, "rules.0.place", "name a channel id"),
    ({"place": "C1", "users": [], "rights": ["talk"]}, "rules.0.users", "leave users out"),
    ({"place": "C1", "rights": ["talk"], "user": ["U1"]}, "rules.0.user", "not permitted"),
])
def test_a_bad_rule_is_named(rule: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(ValidationError) as bad:
        SlackConfig.model_validate({"rules": [rule]})
    (error,) = bad.value.errors()
    assert ".".join(str(p) for p in error["loc"]) == key and says in error["msg"]


@pytest.mark.parametrize(("toml", "key", "reason"), [
    ('[channels.slack]\n[[channels.slack.rules]]\nplace = "C1"\nrights = ["speak"]\n',
     "channels.slack.rules.0.rights.0", "'talk', 'approve' or 'operate'"),
    ('[channels.discord]\n[[channels.discord.rules]]\nplace = "1"\nrights = ["talk"]\n'
     '[[channels.discord.rules]]\nrights = ["talk"]\n', "channels.discord.rules.1.place",
     "required key is missing"),
])
def test_agent_toml_names_the_rule_key(toml: str, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as bad:
        parse_config(toml, "agent.toml")
    assert f"agent.toml: {key}: " in str(bad.value) and reason in str(bad.value)


def test_the_rights_a_place_grants_someone_are_what_their_runs_carry() -> None:
    access = Access((*shorthand(users=["U1", "U2"], approvers=["U1"]),
                     Rule("C0OPS", frozenset({"operate"}), frozenset({"U9"}))))
    assert OPS.rights(access, "U1") == ("talk", "approve", "operate")
    assert OPS.rights(access, "U2") == ("talk", "operate")
    assert OPS.rights(access, "U9") == ("operate",)
    assert TEAM.rights(access, "U9") == ()
    assert Place.of("C1", private=True).private and not Place.of("C1").private
