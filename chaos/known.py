"""Findings the extended soak brought up, recognised after the other checks ran (so the
modules whose labels are being removed as their fixes land are left alone): each label
names a row of chaos/README.md's Findings table.
"""

from __future__ import annotations

import ast

from tests.fakes.slack import FakeSlack

from .invariants import Violation

__all__ = ["STREAM_LOST", "label_known"]

# Finding 6: the store cut just as a reply's stream opened in Slack. The platform opened the
# message, recording its id failed, and the process forgot it: the reply is posted again as
# a message of its own and the opened one is left streaming (runtime/live.py).
STREAM_LOST = "stream-lost-in-a-store-cut"


def _answers(what: str) -> tuple[list[str], list[str]] | None:
    """The answers a Slack thread shows and those it should, from check_slack's text."""
    try:
        got = what.split("Slack shows the answers ", 1)[1].split("; its completed", 1)[0]
        want = what.split("in order, are ", 1)[1].split(" (decided after", 1)[0]
        return list(ast.literal_eval(got)), list(ast.literal_eval(want))
    except (IndexError, ValueError, SyntaxError):
        return None


def label_known(found: list[Violation], slack: FakeSlack | None) -> list[Violation]:
    """``found`` with finding 6 labelled (a Slack thread with a message left streaming
    whose answers are the right ones, one of them twice)."""
    if slack is None:
        return found
    left: set[tuple[str, str]] = set()  # (channel, thread root) of messages left streaming
    for channel, ts in slack.api.streams.streaming:
        message = next((m for m in slack.messages(channel) if m.get("ts") == ts), {})
        left.add((channel, str(message.get("thread_ts") or ts)))
    for v in found:
        if v.known is not None:
            continue
        if v.invariant == 4 and v.what.startswith("a Slack message left streaming"):
            channel, _, ts = v.thread.partition(":")
            message = next((m for m in slack.messages(channel) if m.get("ts") == ts), {})
            root = str(message.get("thread_ts") or ts)
            if any(_twice(w, channel, root) for w in found):
                v.known = STREAM_LOST
        elif v.invariant == 1:
            parts = v.thread.split(":", 3)
            if len(parts) == 4 and (parts[2], parts[3]) in left and \
                    _twice(v, parts[2], parts[3]):
                v.known = STREAM_LOST
    return found


def _twice(v: Violation, channel: str, root: str) -> bool:
    """``v`` says the Slack thread ``root`` of ``channel`` shows its answers, one of them
    twice, and nothing else."""
    parts = v.thread.split(":", 3)
    if v.invariant != 1 or len(parts) != 4 or parts[0] != "slack" or (
            parts[2], parts[3]) != (channel, root):
        return False
    answers = _answers(v.what)
    if answers is None:
        return False
    got, want = answers
    return len(got) > len(set(got)) and sorted(set(got)) == sorted(want)
