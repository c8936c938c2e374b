"""The soak's plan: every message, cancel, decision, schedule toggle and fault, drawn from
one seed.

A plan is pure data made by ``make_plan(seed, ...)`` before anything starts, and written
to the work dir as JSON: the same seed gives the same plan, and ``--replay FILE`` runs a
plan again as it was written. What a plan cannot fix is the timing of real processes
(how long a replica takes to start, which request a kill lands in): see chaos/README.md.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .chat_toggles import draw_chat_runs, draw_chat_toggles
from .discord_plan import DiscordActs, draw_discord_acts, draw_resumes
from .fault_plan import (
    Fault,
    FaultKind,
    draw_faults,
    draw_platform_faults,
    draw_server_disk,
    draw_skews,
    draw_store_outages,
)
from .files import draw_files, draw_last_files, draw_more_files
from .hook_plan import HookSend, draw_hooks
from .job_plan import Reminder, draw_chat_reminders, draw_reminders
from .ops import Decide, Op, Route
from .slack_plan import Command, Stop, Vote, draw_slack

__all__ = ["PEOPLE", "TOOLS", "Command", "Decide", "Op", "Plan", "RunNow", "Stop", "Toggle",
           "Vote", "make_plan"]

PEOPLE = ("ana", "ben", "cy", "dee")
"""Who talks to maiden in the soak."""

# tool name -> effect class (the tools module, chaos/effects.py, declares the same)
TOOLS = {"look": "read_only", "note": "idempotent_write", "charge": "non_idempotent",
         "email": "non_idempotent", "deploy": "non_idempotent", "tick": "non_idempotent",
         "report": "read_only", "probe": "non_idempotent"}

# What a message asks the model for: the tools of each turn, in order ([] : just answer).
# Weights are per mille.
_SHAPES: list[tuple[int, list[list[str]]]] = [
    (300, []), (150, [["look"]]), (130, [["note"]]), (130, [["charge"]]), (60, [["email"]]),
    (90, [["deploy"]]), (70, [["look", "note"], ["charge"]]), (40, [["note"], ["note"]]),
    (30, [["charge", "email"]]),
]
_ROUTES: list[tuple[int, Route]] = [(350, "http"), (150, "http_stream"), (150, "openai"),
                                    (100, "openai_stream"), (250, "slack")]
SLACK_CHANNELS = ["C0CHAOS001", "C0CHAOS002", "C0CHAOS003"]


def _pick(rng: random.Random, table: list[tuple[int, Any]]) -> Any:
    return rng.choices([v for _, v in table], weights=[w for w, _ in table])[0]


@dataclass
class Toggle:
    """A schedule paused or resumed through the HTTP API (``POST /v1/schedules/{name}/
    pause``), at ``at`` s, by ``replica`` (the next one up if it is down)."""

    at: float
    schedule: str
    pause: bool
    replica: int


@dataclass
class RunNow:
    """A schedule run now through the HTTP API (``POST /v1/schedules/{name}/run``, with an
    ``Idempotency-Key`` of its own), at ``at`` s, by ``person`` at ``replica`` (another one
    on a transport error or a 5xx); ``again``: the same request sent a second time at once
    (a double click, a client's impatient retry), which must be the same run."""

    at: float
    tag: str  # n0000: its Idempotency-Key is chaos:{seed}:{tag}
    schedule: str
    person: str
    replica: int
    again: bool = False


@dataclass
class Plan:
    seed: int
    seconds: float
    store: str
    replicas: int
    threads: list[str]
    people: list[str]
    concurrency: str = "global"  # [runtime] concurrency of every replica
    ops: list[Op] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    toggles: list[Toggle] = field(default_factory=list)
    runs_now: list[RunNow] = field(default_factory=list)
    hooks: list[HookSend] = field(default_factory=list)  # webhook deliveries (chaos/hooks.py)
    reminders: list[Reminder] = field(default_factory=list)  # config one-shots (chaos/jobs.py)
    slack_http: list[int] = field(default_factory=list)  # replicas taking Slack over HTTP
    stops: list[Stop] = field(default_factory=list)  # Slack runs stopped (chaos/slack_plan.py)
    votes: list[Vote] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    # Discord's clicks, stops, votes and commands (chaos/discord_plan.py)
    discord_acts: DiscordActs = field(default_factory=DiscordActs)

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Plan:
        raw = json.loads(path.read_text())
        ops = [Op(**{**o, "decide": Decide(**o["decide"]) if o["decide"] else None})
               for o in raw.pop("ops")]
        faults = [Fault(**f) for f in raw.pop("faults")]
        toggles = [Toggle(**t) for t in raw.pop("toggles", [])]  # none in older plans
        runs_now = [RunNow(**r) for r in raw.pop("runs_now", [])]
        hooks = [HookSend(**h) for h in raw.pop("hooks", [])]
        reminders = [Reminder(**r) for r in raw.pop("reminders", [])]
        stops = [Stop(**s) for s in raw.pop("stops", [])]
        votes = [Vote(**v) for v in raw.pop("votes", [])]
        commands = [Command(**c) for c in raw.pop("commands", [])]
        discord_acts = DiscordActs.load(raw.pop("discord_acts", {}))
        return cls(**raw, ops=ops, faults=faults, toggles=toggles, runs_now=runs_now,
                   hooks=hooks, reminders=reminders, stops=stops, votes=votes,
                   commands=commands, discord_acts=discord_acts)



def make_plan(seed: int, seconds: float, store: str, replicas: int) -> Plan:
    """The whole soak for ``seed``: about two messages a second, over ``seconds``."""
    rng = random.Random(f"{seed}:{store}")
    n_threads = max(4, int(seconds // 5))
    people = list(PEOPLE)
    http = [f"chaos/{seed}/t{i:02d}" for i in range(n_threads)]
    slack = [f"slack/{seed}/{rng.choice(SLACK_CHANNELS)}/s{i:02d}"
             for i in range(max(2, n_threads // 2))]
    plan = Plan(seed, seconds, store, replicas, threads=http + slack, people=people)
    plan.concurrency = rng.choice(["global", "thread"])
    owner = {t: rng.choice(people) for t in plan.threads}
    at, i = 0.5, 0
    while at < seconds:
        route: Route = _pick(rng, _ROUTES)
        thread = rng.choice(slack if route == "slack" else http)
        steps = _pick(rng, _SHAPES)
        # In Slack, anyone in the channel may write in a thread.
        person = rng.choice(people) if route == "slack" else owner[thread]
        op = Op(at=round(at, 3), tag=f"m{i:05d}", thread=thread, person=person,
                route=route, replica=rng.randrange(replicas), steps=steps)
        if op.route == "http" and rng.random() < 0.3:
            op.wait = False
        if rng.random() < 0.07:
            op.cancel_after_s = round(rng.uniform(0.0, 1.5), 3)
        if any("deploy" in turn for turn in steps):
            late = rng.random() < 0.15
            op.decide = Decide(approve=rng.random() < 0.7,
                               after_s=round(rng.uniform(9, 14) if late
                                             else rng.uniform(0.1, 3), 3),
                               twice=rng.random() < 0.2)
        plan.ops.append(op)
        at += rng.expovariate(2.0)
        i += 1
    plan.faults = draw_faults(rng, seconds, replicas)
    # What came later (schedules, clock skews, Discord, the chat platforms' faults) is
    # drawn from streams of its own, so that a seed's earlier plan stays as it was.
    _schedules(random.Random(f"{seed}:{store}:schedules"), plan, http, owner)
    _discord(random.Random(f"{seed}:{store}:discord"), plan)
    _responses(random.Random(f"{seed}:{store}:responses"), plan, http, owner)
    _runs_now(random.Random(f"{seed}:{store}:runs-now"), plan)
    plan.hooks = draw_hooks(random.Random(f"{seed}:{store}:hooks"), seconds, replicas)
    plan.faults = sorted(plan.faults + draw_skews(random.Random(f"{seed}:{store}:skew"),
                                                  seconds, replicas), key=lambda f: f.at)
    platforms: tuple[FaultKind, ...] = ("slack", "discord")
    for platform in platforms:
        if any(op.route == platform for op in plan.ops):
            plan.faults = sorted(plan.faults + draw_platform_faults(random.Random(
                f"{seed}:{store}:{platform}-faults"), seconds, platform), key=lambda f: f.at)
    plan.faults = sorted(plan.faults + draw_store_outages(random.Random(
        f"{seed}:{store}:store-outages"), seconds, store), key=lambda f: f.at)
    if store == "postgres":  # the server's own disk full (chaos/disk.py, pgserver.py)
        plan.faults = sorted(plan.faults + draw_server_disk(random.Random(
            f"{seed}:{store}:server-disk"), seconds), key=lambda f: f.at)
    if store == "sqlite" and plan.concurrency == "global":
        _within_reach(random.Random(f"{seed}:{store}:reach"), plan)
    draw_slack(seed, plan, SLACK_CHANNELS)
    draw_discord_acts(seed, plan, DISCORD_PLACES)
    in_slack, in_discord = draw_chat_toggles(
        random.Random(f"{seed}:{store}:chat-toggles"), {op.route for op in plan.ops},
        plan.people, plan.seconds, plan.replicas, SLACK_CHANNELS, DISCORD_PLACES)
    run_slack, run_discord = draw_chat_runs(
        random.Random(f"{seed}:{store}:chat-runs"), {op.route for op in plan.ops},
        plan.people, plan.seconds, plan.replicas, SLACK_CHANNELS, DISCORD_PLACES)
    plan.commands = sorted(plan.commands + in_slack + run_slack, key=lambda c: c.at)
    plan.discord_acts.commands = sorted(plan.discord_acts.commands + in_discord + run_discord,
                                        key=lambda c: c.at)
    draw_files(seed, plan)  # last: it adds a turn to some messages (chaos/files.py)
    draw_more_files(seed, plan)  # the PDF, refused files, how each goes (chaos/files.py)
    draw_last_files(seed, plan)  # one file too many, Discord's held downloads (the same)
    jobs = random.Random(f"{seed}:{store}:jobs")  # reminders (chaos/jobs.py)
    plan.reminders = draw_reminders(jobs, seconds)
    plan.ops = sorted(plan.ops + draw_chat_reminders(jobs, seconds, replicas, http, owner),
                      key=lambda o: o.at)
    plan.faults = sorted(plan.faults + [  # the gateway RESUMEd (chaos/discord_resume.py)
        Fault(at, "discord_resume", duration_s=gap, mode=how)
        for at, gap, how in draw_resumes(seed, plan, DISCORD_PLACES)], key=lambda f: f.at)
    return plan


REACH = 0.5
"""The share of the messages kept for one replica running one loop at a time (SQLite,
``concurrency = "global"``): the whole workload, drawn for three replicas, offered it about
170 runs a minute, and it drove about 100 on a loaded machine; the backlog then outlasted
any settle (chaos/README.md, the long run on 0efea9e)."""


def _within_reach(rng: random.Random, plan: Plan) -> None:
    """Keep ``REACH`` of the messages (each drawn apart, from a stream of its own), so that
    a single replica that runs one loop at a time can keep up."""
    plan.ops = [op for op in plan.ops if rng.random() < REACH]


def _cancel_or_decide(rng: random.Random, op: Op) -> None:
    """A later stream's message: cancelled by its person now and then; a deploy decided,
    sometimes late (past its approval's timeout), sometimes twice. (The first messages'
    draws, in ``make_plan``, are in an order of their own, kept for their seeds' plans.)"""
    if rng.random() < 0.07:
        op.cancel_after_s = round(rng.uniform(0.0, 1.5), 3)
    if any("deploy" in turn for turn in op.steps):
        op.decide = Decide(approve=rng.random() < 0.7, after_s=round(
            rng.uniform(9, 14) if rng.random() < 0.15 else rng.uniform(0.1, 3), 3),
            twice=rng.random() < 0.2)


# The schedules every replica's agent.toml has (chaos/schedules.py writes them): ``minute``
# each slot in a thread of its own, every missed slot caught up (``misfire = "all"``);
# ``pulse`` in one thread, the newest missed slot only, paused and resumed through the HTTP
# API. Chat schedules are made, paused and resumed by messages (``schedule_create=NAME``).
CONFIG_SCHEDULES = {"minute": "all", "pulse": "once"}
# Schedules delivering their answers into a chat platform's channel (``deliver``), in a pass
# that has the platform: ``herald`` to Slack, ``crier`` to Discord (chaos/delivering.py).
DELIVERING = {"herald": "slack", "crier": "discord"}
CONFIG_SCHEDULES.update({name: "once" for name in DELIVERING})
CHAT_TAG = 90000  # chat schedule messages are m90000 on, after any message of the plan


def _schedules(rng: random.Random, plan: Plan, http: list[str], owner: dict[str, str]) -> None:
    """``pulse`` paused and resumed through the HTTP API now and then; chat schedules
    created in HTTP threads, later paused and resumed there."""
    seconds, at, pause = plan.seconds, rng.uniform(3, 20), True
    while at < seconds:
        plan.toggles.append(Toggle(round(at, 3), "pulse", pause, rng.randrange(plan.replicas)))
        at += rng.uniform(20, 70)
        pause = not pause
    ops: list[Op] = []
    at, i = rng.uniform(0.5, min(20.0, max(1.0, seconds / 3))), 0
    while at < seconds:
        thread = rng.choice(http)
        name = f"chat-{i}"
        steps = [("schedule_create", at), ("schedule_pause", at + rng.uniform(5, 40))]
        steps.append(("schedule_resume", steps[-1][1] + rng.uniform(5, 40)))
        for tool, when in steps:
            if when < seconds:
                ops.append(Op(at=round(when, 3), tag=f"m{CHAT_TAG + len(ops):05d}",
                              thread=thread, person=owner[thread], route="http",
                              replica=rng.randrange(plan.replicas),
                              steps=[[f"{tool}={name}"]]))
        at += rng.uniform(40, 120)
        i += 1
    plan.ops = sorted(plan.ops + ops, key=lambda o: o.at)


DISCORD_TAG = 80000  # Discord messages are m80000 on
# The CI soak's short passes leave Discord out: connecting to the gateway costs every start
# of the replica that holds it 2-3 s (discord.py waits for the guilds), on 2 cores.
DISCORD_MIN_S = 20.0
DISCORD_PLACES = ["c0", "c1", "h0", "h1", "h2"]  # guild channels (c) and threads (h)


def _discord(rng: random.Random, plan: Plan) -> None:
    """People mentioning the bot in Discord, about one message every three seconds, in a
    few guild channels and threads (``discord/{seed}/{place}``), asking for what the others
    ask for; decided (through the HTTP API) and cancelled as the others are."""
    ops: list[Op] = []
    at = rng.uniform(0.5, 3.0)
    while at < plan.seconds and plan.seconds >= DISCORD_MIN_S:
        steps = _pick(rng, _SHAPES)
        op = Op(at=round(at, 3), tag=f"m{DISCORD_TAG + len(ops):05d}",
                thread=f"discord/{plan.seed}/{rng.choice(DISCORD_PLACES)}",
                person=rng.choice(plan.people), route="discord",
                replica=rng.randrange(plan.replicas), steps=steps)
        _cancel_or_decide(rng, op)
        ops.append(op)
        at += rng.expovariate(1 / 3.0)
    plan.ops = sorted(plan.ops + ops, key=lambda o: o.at)


RESPONSES_TAG = 87000  # messages through POST /v1/responses are m87000 on
RESPONSES_EVERY_S = 5.0


def _responses(rng: random.Random, plan: Plan, http: list[str], owner: dict[str, str]
               ) -> None:
    """People asking through the OpenAI Responses wire (``POST /v1/responses``, naming one
    of the HTTP threads as its ``conversation``), streamed and not, about one message every
    five seconds; cancelled and decided as the others are."""
    ops: list[Op] = []
    at = rng.uniform(0.5, 4.0)
    while at < plan.seconds:
        thread, steps = rng.choice(http), _pick(rng, _SHAPES)
        route: Route = "responses_stream" if rng.random() < 0.4 else "responses"
        op = Op(at=round(at, 3), tag=f"m{RESPONSES_TAG + len(ops):05d}", thread=thread,
                person=owner[thread], route=route, replica=rng.randrange(plan.replicas),
                steps=steps)
        _cancel_or_decide(rng, op)
        ops.append(op)
        at += rng.expovariate(1 / RESPONSES_EVERY_S)
    plan.ops = sorted(plan.ops + ops, key=lambda o: o.at)


def _runs_now(rng: random.Random, plan: Plan) -> None:
    """A schedule run now through the HTTP API every 8-25 s, a third of the time twice
    quickly (a second request of its own), a fifth of the time sent again at once with its
    key; of the schedules every replica has (a delivering one only in a pass that has its
    platform)."""
    routes = {op.route for op in plan.ops}
    names = [n for n in CONFIG_SCHEDULES if n not in DELIVERING or DELIVERING[n] in routes]
    at = rng.uniform(4, 15)
    while at < plan.seconds:
        name = rng.choice(names)
        for when in [at] + ([at + rng.uniform(0.05, 0.5)] if rng.random() < 0.3 else []):
            plan.runs_now.append(RunNow(
                round(when, 3), f"n{len(plan.runs_now):04d}", name, rng.choice(plan.people),
                rng.randrange(plan.replicas), again=rng.random() < 0.2))
        at += rng.uniform(8, 25)
