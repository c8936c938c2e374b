"""The fake Discord, driven only by the real discord.py client.

What the Discord channel's tests will lean on: the client logs in and connects as it would to
Discord (over TLS, to discord.com and gateway.discord.gg, through the connector it is handed),
sees READY and its guild, receives messages with or without their content as its intents say,
and its sends meet Discord's rules: a repeated nonce is one message, a 429 is slept on and
retried into one message, a dropped answer raises after the message was stored. RECONNECT and
RESUME replay what the client missed — or, when told, what it already had, which is the
duplicate maiden must tell apart. Button clicks reach ``on_interaction`` and their responses
are recorded.
"""

from __future__ import annotations

import asyncio
import io
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import aiohttp
import discord
import pytest
from discord.gateway import DiscordWebSocket
from discord.http import Route

from tests.fakes.discord import (
    BOT_ID,
    DM_ID,
    GENERAL_ID,
    GUILD_ID,
    HUMAN_ID,
    THREAD_ID,
    FakeDiscord,
    World,
    message_create,
    new_id,
)

pytestmark = pytest.mark.timeout(30)

MESSAGE_CONTENT = 1 << 15
SEND = "POST /channels/{channel_id}/messages"


class Seen:
    """What the client's event handlers saw, in order, with waits that fail by name."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self._changed = asyncio.Condition()
        self.task: asyncio.Task[None] | None = None

    async def add(self, kind: str, value: Any) -> None:
        self.events.append((kind, value))
        async with self._changed:
            self._changed.notify_all()

    def of(self, kind: str) -> list[Any]:
        return [value for k, value in self.events if k == kind]

    def messages(self) -> list[discord.Message]:
        """Messages from people (the bot's own come back too, as Discord echoes them)."""
        return [m for m in self.of("message") if m.author.id != BOT_ID]

    async def until(self, predicate: Callable[[], bool], what: str,
                    timeout: float = 5.0) -> None:  # noqa: ASYNC109
        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        waiter = asyncio.ensure_future(wait())
        stopped = {self.task} if self.task is not None else set()
        done, _ = await asyncio.wait({waiter, *stopped}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if waiter in done:
            return
        waiter.cancel()
        with suppress(asyncio.CancelledError):
            await waiter
        if self.task is not None and self.task in done:
            raise AssertionError(f"the client stopped while waiting for {what}"
                                 ) from self.task.exception()
        raise AssertionError(f"the client never showed {what} in {timeout}s; "
                             f"saw {[k for k, _ in self.events]}")


class Bot(discord.Client):
    """A plain discord.Client whose handlers record what they see."""

    def __init__(self, seen: Seen, **options: Any) -> None:
        super().__init__(**options)
        self.seen = seen

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """discord.py's own sleeps 5s before every IDENTIFY but the first (Discord's identify
        rate limit); the fake has none, so a re-identify here goes at once."""

    async def on_ready(self) -> None:
        await self.seen.add("ready", self.user)

    async def on_resumed(self) -> None:
        await self.seen.add("resumed", None)

    async def on_message(self, message: discord.Message) -> None:
        await self.seen.add("message", message)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        await self.seen.add("raw_delete", payload)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.seen.add("interaction", interaction)


def intents(*, content: bool = True) -> discord.Intents:
    out = discord.Intents.default()
    out.message_content = content
    return out


@asynccontextmanager
async def running(fake: FakeDiscord, *, content: bool = True, connector: bool = True,
                  **options: Any) -> AsyncIterator[tuple[Bot, Seen]]:
    """A started client that has seen on_ready; closed (session and socket) on the way out."""
    seen = Seen()
    if connector:
        options["connector"] = fake.connector()
    # guild_ready_timeout: discord.py waits this long after the last GUILD_CREATE for more
    bot = Bot(seen, intents=intents(content=content), guild_ready_timeout=0.05, **options)
    seen.task = asyncio.create_task(bot.start(fake.token))
    try:
        await seen.until(lambda: bool(seen.of("ready")), "on_ready")
        yield bot, seen
    finally:
        await bot.close()
        await seen.task


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def general(bot: discord.Client) -> discord.TextChannel:
    channel = bot.get_channel(GENERAL_ID)
    assert isinstance(channel, discord.TextChannel)
    return channel


# -- login and the gateway handshake


async def test_the_client_logs_in_connects_and_sees_ready_with_its_guild(
        fake: FakeDiscord) -> None:
    async with running(fake) as (bot, _):
        assert bot.user is not None and bot.user.id == BOT_ID and bot.user.bot
        assert bot.application_id == BOT_ID
        guild = bot.get_guild(GUILD_ID)
        assert guild is not None and guild.name == "maiden-test"
        assert general(bot).name == "general"
        assert isinstance(bot.get_channel(THREAD_ID), discord.Thread)
        # the first heartbeat's ACK came before READY, so discord.py has measured latency
        assert math.isfinite(bot.latency)

    logins = fake.calls("GET /users/@me")
    assert len(logins) == 1 and logins[0].headers["authorization"] == f"Bot {fake.token}"
    assert fake.calls("GET /oauth2/applications/@me")[0].status == 200
    # discord.py asks for the zlib-stream transport compression, which the fake speaks
    link = fake.gateway.links[0]
    assert link.url.startswith("https://gateway.discord.gg/?")
    assert "v=10" in link.url and "encoding=json" in link.url and "compress=zlib-stream" in link.url
    ops = [r.op for r in fake.received]
    assert ops[:2] == [1, 2]  # a heartbeat at once after HELLO, then IDENTIFY
    identify = fake.gateway.identifies[0]
    assert identify["token"] == fake.token
    assert identify["intents"] & MESSAGE_CONTENT and fake.intents == identify["intents"]


async def test_a_private_channel_and_a_private_thread_reach_the_client_as_discord_sends_them(
        ) -> None:
    """resources/channel#overwrite-object and topics/permissions#permission-overwrites: a
    private channel denies VIEW_CHANNEL to @everyone (the role whose id is the guild's);
    a private thread is type 12 (resources/channel#channel-object-channel-types). discord.py
    reads both from GUILD_CREATE."""
    world = World()
    secret, plans = new_id(), new_id()
    world.add_text_channel(secret, GUILD_ID, "secret", private=True)
    world.add_thread(plans, GENERAL_ID, "plans", owner_id=HUMAN_ID, private=True)
    async with FakeDiscord(world) as fake, running(fake) as (bot, _):
        guild = bot.get_guild(GUILD_ID)
        assert guild is not None and guild.default_role.id == GUILD_ID
        channel = guild.get_channel(secret)
        assert isinstance(channel, discord.TextChannel)
        assert channel.overwrites_for(guild.default_role).view_channel is False
        assert not channel.permissions_for(guild.default_role).view_channel
        assert guild.me is not None and channel.permissions_for(guild.me).view_channel
        assert general(bot).permissions_for(guild.default_role).view_channel
        thread = guild.get_thread(plans)
        assert thread is not None and thread.type is discord.ChannelType.private_thread
        assert thread.invitable


async def test_a_wrong_token_is_a_login_failure(fake: FakeDiscord) -> None:
    client = discord.Client(intents=intents(), connector=fake.connector())
    try:
        with pytest.raises(discord.LoginFailure):
            await client.login("not-the-token")
    finally:
        await client.close()
    assert [c.status for c in fake.calls("GET /users/@me")] == [401]


async def test_privileged_intents_the_app_lacks_are_refused_with_4014() -> None:
    async with FakeDiscord(World(privileged=0)) as fake:
        client = discord.Client(intents=intents(content=True), connector=fake.connector())
        try:
            with pytest.raises(discord.PrivilegedIntentsRequired):
                await asyncio.wait_for(client.start(fake.token), 5)
        finally:
            await client.close()
        assert "4014" in fake.gateway.refused[0]


# -- receiving messages


@pytest.mark.parametrize("content", [True, False])
async def test_message_create_carries_content_only_with_the_intent(
        fake: FakeDiscord, content: bool) -> None:
    async with running(fake, content=content) as (_, seen):
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, "hello maiden")
        mention = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> are you there?",
                                          mentions=[BOT_ID])
        dm = await fake.user_message(DM_ID, HUMAN_ID, "a direct message")
        await seen.until(lambda: len(seen.messages()) == 3, "three messages")

    first, second, third = seen.messages()
    assert first.id == int(sent["id"]) and first.author.id == HUMAN_ID
    assert isinstance(first.author, discord.Member) and first.guild is not None
    assert first.content == ("hello maiden" if content else "")
    # a mention of the bot, and a DM, carry their content whatever the intents
    assert second.content == mention["content"] and bot_mentioned(second)
    assert third.content == dm["content"] and isinstance(third.channel, discord.DMChannel)


def bot_mentioned(message: discord.Message) -> bool:
    return any(u.id == BOT_ID for u in message.mentions)


async def test_a_built_message_create_is_delivered_as_is(fake: FakeDiscord) -> None:
    async with running(fake) as (_, seen):
        data = message_create(GENERAL_ID, 4242, "from a payload", guild_id=GUILD_ID)
        assert await fake.dispatch("MESSAGE_CREATE", data) is not None
        await seen.until(lambda: len(seen.messages()) == 1, "the message")
    assert seen.messages()[0].id == int(data["id"])
    assert seen.messages()[0].author.name == data["author"]["username"]


# -- sending: nonces, rate limits, server errors, dropped answers


async def test_a_repeated_nonce_with_enforce_nonce_is_one_message(fake: FakeDiscord) -> None:
    async with running(fake) as (bot, _):
        first = await general(bot).send("only once", nonce="turn-1-part-1")
        again = await general(bot).send("only once", nonce="turn-1-part-1")
        other = await general(bot).send("only once", nonce="turn-1-part-2")

    assert again.id == first.id != other.id
    assert [m["content"] for m in fake.messages(GENERAL_ID)] == ["only once", "only once"]
    bodies = [c.json for c in fake.calls(SEND)]
    assert len(bodies) == 3 and all(b["enforce_nonce"] is True for b in bodies)
    assert bodies[0]["nonce"] == "turn-1-part-1"


async def test_a_429_is_slept_on_and_retried_into_one_message(fake: FakeDiscord) -> None:
    fake.fail(SEND, status=429, retry_after=0.2)
    async with running(fake) as (bot, _):
        started = time.monotonic()
        sent = await general(bot).send("after the limit")
        waited = time.monotonic() - started

    assert waited >= 0.18  # discord.py slept retry_after (less a clock tick)
    assert [c.status for c in fake.calls(SEND)] == [429, 200]
    assert [m["id"] for m in fake.messages(GENERAL_ID)] == [str(sent.id)]
    assert fake.pending_faults(SEND) == 0


async def test_server_errors_500_is_retried_503_is_raised(fake: FakeDiscord) -> None:
    fake.fail(f"POST /channels/{GENERAL_ID}/messages", status=500)  # this channel only
    async with running(fake) as (bot, _):
        await general(bot).send("after a 500")  # discord.py retries 500s after 1s
        fake.fail(SEND, status=503)
        with pytest.raises(discord.DiscordServerError) as caught:
            await general(bot).send("into a 503")

    assert caught.value.status == 503
    assert [c.status for c in fake.calls(SEND)] == [500, 200, 503]
    assert [m["content"] for m in fake.messages(GENERAL_ID)] == ["after a 500"]


async def test_a_dropped_answer_raises_after_the_message_was_stored(fake: FakeDiscord) -> None:
    fake.fail(SEND, drop=True)
    async with running(fake) as (bot, _):
        with pytest.raises(aiohttp.ClientError):
            await general(bot).send("did it go out?", nonce="turn-7")
        stored = fake.messages(GENERAL_ID)
        assert [m["content"] for m in stored] == ["did it go out?"]
        # sending again with the same nonce finds the original: still one message
        again = await general(bot).send("did it go out?", nonce="turn-7")

    assert str(again.id) == stored[0]["id"]
    assert len(fake.messages(GENERAL_ID)) == 1
    assert [(c.status, c.dropped) for c in fake.calls(SEND)] == [(200, True), (200, False)]


async def test_discord_rules_on_a_message_reach_the_client(fake: FakeDiscord) -> None:
    async with running(fake) as (bot, _):
        with pytest.raises(discord.HTTPException) as too_long:
            await general(bot).send("x" * 2001)
        with pytest.raises(discord.NotFound) as unknown:
            await bot.http.send_message(123, params=discord.http.handle_message_parameters(
                content="nowhere"))
    assert too_long.value.code == 50035 and "content" in str(too_long.value)
    assert unknown.value.code == 10003
    assert fake.messages(GENERAL_ID) == []


# -- reading and changing messages, channels, typing


async def test_history_edit_reply_mentions_channels_and_typing(fake: FakeDiscord) -> None:
    async with running(fake) as (bot, _):
        channel = general(bot)
        asked = fake.post_as_user(GENERAL_ID, HUMAN_ID, "question")
        question = await channel.fetch_message(int(asked["id"]))
        quiet = await channel.send(f"<@{HUMAN_ID}> see above", reference=question,
                                   allowed_mentions=discord.AllowedMentions(
                                       users=False, replied_user=False))
        loud = await question.reply("answer")
        edited = await quiet.edit(content="edited")
        await channel.typing()
        newest = [m.content async for m in channel.history(limit=2)]
        oldest = [m.content async for m in channel.history(limit=10, oldest_first=True)]
        after = [m.content async for m in channel.history(after=question, oldest_first=True)]
        thread = await bot.fetch_channel(THREAD_ID)
        dm = await bot.fetch_channel(DM_ID)

    assert newest == ["answer", "edited"]
    assert oldest == ["question", "edited", "answer"]
    assert after == ["edited", "answer"]
    assert edited.edited_at is not None
    stored = {m["id"]: m for m in fake.messages(GENERAL_ID)}
    assert stored[str(quiet.id)]["type"] == 19 and stored[str(quiet.id)]["mentions"] == []
    assert stored[str(quiet.id)]["message_reference"]["message_id"] == asked["id"]
    assert [u["id"] for u in stored[str(loud.id)]["mentions"]] == [str(HUMAN_ID)]
    assert len(fake.typing(GENERAL_ID)) == 1
    assert isinstance(thread, discord.Thread) and thread.parent_id == GENERAL_ID
    assert isinstance(dm, discord.DMChannel) and dm.recipient is not None
    assert dm.recipient.id == HUMAN_ID


async def test_reactions_files_deletes_and_a_new_dm(fake: FakeDiscord) -> None:
    async with running(fake) as (bot, seen):
        sent = await general(bot).send("report", file=discord.File(
            io.BytesIO(b"all good"), filename="report.txt"))
        await sent.add_reaction("\N{EYES}")
        stored = fake.messages(GENERAL_ID)[0]
        assert stored["attachments"][0]["filename"] == "report.txt"
        assert stored["attachments"][0]["size"] == 8
        assert stored["reactions"][0]["emoji"]["name"] == "\N{EYES}"
        await sent.remove_reaction("\N{EYES}", discord.Object(BOT_ID))
        assert "reactions" not in fake.messages(GENERAL_ID)[0]
        await sent.delete()
        await seen.until(lambda: bool(seen.of("raw_delete")), "on_raw_message_delete")
        person = await bot.fetch_user(HUMAN_ID)
        dm = await person.create_dm()
        await dm.send("hello in private")

    assert sent.attachments[0].url.startswith("https://cdn.discordapp.com/attachments/")
    assert fake.messages(GENERAL_ID) == []
    assert dm.id == DM_ID and fake.messages(DM_ID)[0]["content"] == "hello in private"


# -- RECONNECT, RESUME, INVALID_SESSION


async def test_reconnect_resumes_and_replays_so_the_client_sees_a_duplicate(
        fake: FakeDiscord) -> None:
    async with running(fake) as (_, seen):
        first = await fake.user_message(GENERAL_ID, HUMAN_ID, "before the reconnect")
        await seen.until(lambda: len(seen.messages()) == 1, "the first message")
        session = fake.gateway.current
        assert session is not None
        seq_of_first = session.seq

        # Discord replays from before the first message: the client gets it once more
        await fake.reconnect(replay_from=seq_of_first - 1)
        missed = await fake.user_message(GENERAL_ID, HUMAN_ID, "while away")
        resume = await fake.resumed()
        await seen.until(lambda: len(seen.messages()) == 3 and bool(seen.of("resumed")),
                         "the replay and on_resumed")

    assert resume["session_id"] == session.id and resume["token"] == fake.token
    assert resume["seq"] == seq_of_first
    assert [m.id for m in seen.messages()] == [int(first["id"]), int(first["id"]),
                                               int(missed["id"])]
    # it resumed where READY said to, not at the default gateway
    assert fake.gateway.links[1].url.startswith("https://gateway-us-east1-b.discord.gg/?")
    assert len(fake.gateway.identifies) == 1


async def test_an_invalid_session_makes_the_client_identify_again(fake: FakeDiscord) -> None:
    async with running(fake) as (_, seen):
        await fake.invalidate(resumable=False)
        await fake.identified(2)
        await seen.until(lambda: len(seen.of("ready")) == 2, "a second on_ready")
        after = await fake.user_message(GENERAL_ID, HUMAN_ID, "on the new session")
        await seen.until(lambda: len(seen.messages()) == 1, "the message")
    assert seen.messages()[0].id == int(after["id"])
    assert fake.gateway.resumes == []


async def test_unanswered_heartbeats_make_the_client_reconnect_and_resume() -> None:
    async with FakeDiscord(heartbeat_interval=50) as fake, \
            running(fake, heartbeat_timeout=0.3) as (_, seen):
        fake.gateway.ack_heartbeats = False  # a zombied connection: nothing comes back
        await fake.resumed()
        fake.gateway.ack_heartbeats = True
        await seen.until(lambda: bool(seen.of("resumed")), "on_resumed")
    beats = [r for r in fake.received if r.op == 1 and r.connection == 1]
    assert len(beats) >= 2 and all(isinstance(r.d, int) for r in beats[1:])


async def test_a_closed_socket_is_resumed(fake: FakeDiscord) -> None:
    async with running(fake) as (_, seen):
        await fake.close_gateway(4000)
        await fake.resumed()
        await seen.until(lambda: bool(seen.of("resumed")), "on_resumed")


# -- buttons and interactions


async def test_a_button_click_reaches_on_interaction_and_its_responses_are_recorded(
        fake: FakeDiscord) -> None:
    async with running(fake) as (bot, seen):
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(label="Approve", custom_id="approve:run-1",
                                        style=discord.ButtonStyle.success))
        asking = await general(bot).send("run the tool?", view=view)
        stored = fake.messages(GENERAL_ID)[0]
        assert stored["components"][0]["components"][0]["custom_id"] == "approve:run-1"

        clicked = await fake.click(stored, "approve:run-1")
        await seen.until(lambda: bool(seen.of("interaction")), "on_interaction")
        interaction: discord.Interaction = seen.of("interaction")[0]
        assert interaction.type is discord.InteractionType.component
        assert interaction.data is not None
        assert interaction.data.get("custom_id") == "approve:run-1"
        assert interaction.user.id == HUMAN_ID and interaction.message is not None
        assert interaction.message.id == asking.id

        await interaction.response.defer(thinking=True)
        await interaction.edit_original_response(content="approved")
        await interaction.followup.send("just for you", ephemeral=True)

    [response] = fake.interaction_responses()
    assert (response.interaction_id, response.type, response.custom_id) == (
        clicked["id"], 5, "approve:run-1")
    answer = fake.messages(GENERAL_ID)[-1]
    assert answer["content"] == "approved" and answer["flags"] == 0
    assert answer["interaction_metadata"]["interacted_message_id"] == str(asking.id)
    assert [m["content"] for m in fake.ephemerals(GENERAL_ID)] == ["just for you"]


async def test_an_update_message_response_edits_the_clicked_message(fake: FakeDiscord) -> None:
    async with running(fake) as (bot, seen):
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(label="Deny", custom_id="deny:run-2"))
        await general(bot).send("run it?", view=view)
        await fake.click(fake.messages(GENERAL_ID)[0], "deny:run-2")
        await seen.until(lambda: bool(seen.of("interaction")), "on_interaction")
        interaction: discord.Interaction = seen.of("interaction")[0]
        await interaction.response.edit_message(content="denied", view=None)
        with pytest.raises(discord.InteractionResponded):
            await interaction.response.defer()

    [response] = fake.interaction_responses()
    assert response.type == 7 and not response.ephemeral
    [message] = fake.messages(GENERAL_ID)
    assert message["content"] == "denied" and message["components"] == []


async def test_a_deferred_update_is_followed_by_an_edit_of_the_clicked_message(
        fake: FakeDiscord) -> None:
    """receiving-and-responding: type 6 DEFERRED_UPDATE_MESSAGE "for components, ACK an
    interaction and edit the original message later; the user does not see a loading
    state"; the original, reached by PATCH .../messages/@original, is then the message the
    button is on; a follow-up (POST /webhooks/{application.id}/{interaction.token}) is a new
    message, ephemeral with flags 64."""
    async with running(fake) as (bot, seen):
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(label="Go", custom_id="go:run-3"))
        await general(bot).send("go?", view=view)
        clicked = await fake.click(fake.messages(GENERAL_ID)[0], "go:run-3")
        await seen.until(lambda: bool(seen.of("interaction")), "on_interaction")
        interaction: discord.Interaction = seen.of("interaction")[0]
        await interaction.response.defer()
        assert fake.shown(clicked) == []  # nothing said yet: the prompt stands as it was
        await interaction.edit_original_response(content="went", view=None)
        await interaction.followup.send("only you see this", ephemeral=True)

    assert [r.type for r in fake.interaction_responses()] == [6]
    [message] = fake.messages(GENERAL_ID)
    assert message["content"] == "went" and message["components"] == []
    edited, private = fake.shown(clicked)
    assert (edited["id"], private["content"], private["flags"]) == (
        message["id"], "only you see this", 64)


async def test_each_response_type_is_recorded_and_late_ones_are_unknown() -> None:
    async with FakeDiscord(interaction_deadline=1.0) as fake, running(fake) as (bot, seen):
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(label="Go", custom_id="go"))
        await general(bot).send("go?", view=view)
        shown = fake.messages(GENERAL_ID)[0]
        for _ in range(4):
            await fake.click(shown, "go")
        await seen.until(lambda: len(seen.of("interaction")) == 4, "four interactions")
        public, private, silent, late = seen.of("interaction")
        await public.response.send_message("for everyone")
        await private.response.send_message("for you", ephemeral=True)
        await silent.response.defer()
        fake.rest.interactions.deadline = 0.0  # Discord forgets an unanswered one after 3s
        with pytest.raises(discord.NotFound) as caught:
            await late.response.defer(thinking=True)

    assert caught.value.code == 10062
    kinds = [(r.type, r.ephemeral) for r in fake.interaction_responses()]
    assert kinds == [(4, False), (4, True), (6, False)]
    assert [m["content"] for m in fake.messages(GENERAL_ID)] == ["go?", "for everyone"]
    assert [m["content"] for m in fake.ephemerals(GENERAL_ID)] == ["for you"]


# -- the fallback: discord.py's globals, for code that takes no connector


async def test_discord_py_globals_point_every_client_at_the_plain_port(
        fake: FakeDiscord) -> None:
    base, gateway = Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    with fake.discord_py_globals():
        async with running(fake, connector=False) as (bot, seen):
            await general(bot).send("over plain HTTP")
            await fake.close_gateway(4000)
            await seen.until(lambda: bool(seen.of("resumed")), "on_resumed")
            shards, url, _ = await bot.http.get_bot_gateway()
    restored = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    assert restored == (base, gateway)
    assert url == fake.gateway_url and shards == 1
    assert fake.gateway.links[0].url.startswith(f"http://127.0.0.1:{fake.port}/gateway?")
    assert fake.gateway.links[1].url.startswith(f"http://127.0.0.1:{fake.port}/resume?")
    assert [m["content"] for m in fake.messages(GENERAL_ID)] == ["over plain HTTP"]
