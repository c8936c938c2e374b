"""GET /v1/feedback (docs/guides/live-replies.md, Feedback on answers): people's votes on
answers, paged by time, behind the same token, Host and Origin checks as every route."""

from __future__ import annotations

from pathlib import Path

from runtime import EchoProvider, Origin, Runtime, RuntimeConfig, SQLiteStore
from tests.http_helpers import served

TOKEN = "feedback-token-0123456789"
SLACK = Origin(channel="slack", user="U1", target={"channel": "C1", "thread_ts": "1.2"})


async def test_votes_are_listed_by_time_in_pages(tmp_path: Path) -> None:
    now = [50.0]  # the runtime's clock: each vote its own instant, but two given at once
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), settings=RuntimeConfig(poll_interval_s=0.1),
                    clock=lambda: now[0]) as rt:
        runs = [await rt.submit(f"slack:T:C1:{i}", "hi", origin=SLACK) for i in range(2)]
        for run in runs:
            await rt.wait(run.id)
        async with served(rt, token=TOKEN) as (client, _):
            assert (await client.get("/v1/feedback")).json() == {"votes": [],
                                                                 "next_since": None}
            for i, user in enumerate(("U1", "U2", "U3", "U4")):
                now[0] = 100.0 + i
                await rt.kept.feedback.vote(runs[i % 2].id, "up", user=user, channel="slack",
                                       place="C1", message="171.1")
            await rt.kept.feedback.vote(runs[0].id, "down", user="U1", channel="slack")  # changed

            everything = (await client.get("/v1/feedback")).json()
            shown = [(v["user"], v["value"]) for v in everything["votes"]]
            # U4's vote and U1's change came at the same instant: in either order.
            assert shown[:2] == [("U2", "up"), ("U3", "up")]
            assert sorted(shown[2:]) == [("U1", "down"), ("U4", "up")]
            assert everything["next_since"] is None
            assert everything["votes"][0] == {
                "run_id": runs[1].id, "user": "U2", "value": "up", "at": everything[
                    "votes"][0]["at"], "thread_id": runs[1].thread_id, "channel": "slack",
                "place": "C1", "message": "171.1"}

            first = (await client.get("/v1/feedback", params={"limit": 2})).json()
            assert [v["user"] for v in first["votes"]] == ["U2", "U3"]
            # U4 and U1's change came at the same instant: one page holds both.
            rest = (await client.get("/v1/feedback", params={
                "limit": 1, "since": first["next_since"]})).json()
            assert sorted(v["user"] for v in rest["votes"]) == ["U1", "U4"]
            assert rest["next_since"] is None

            assert (await client.get("/v1/feedback", params={"limit": 0})).status_code == 422
            assert (await client.get("/v1/feedback", params={"since": "x"})).status_code == 422
            refused = await client.get("/v1/feedback", headers={"Authorization": ""})
            assert refused.status_code == 401
            port = client.base_url.port
            rebound = await client.get("/v1/feedback", headers={"Host": f"evil.example:{port}"})
            assert rebound.status_code == 400 and rebound.json()["code"] == "invalid_host"
