"""The routers are module-level, shared by every app built in a process: each app still
answers with its own tokens, its own message limit and its own schema (a router reaches
its app through ``request.app.state``, never through state of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.http_helpers import echo_runtime, served, thread_url

TOKEN = "one-app-token-0123456789"
MESSAGES = "/v1/threads/{thread_id}/messages"


def _operations(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for path in schema["paths"].values() for op in path.values()]


async def test_two_apps_in_one_process_keep_their_own_auth_limits_and_schema(
    tmp_path: Path,
) -> None:
    async with echo_runtime(tmp_path / "a.db", max_message_chars=10) as rt_a, \
            echo_runtime(tmp_path / "b.db", max_message_chars=20) as rt_b, \
            served(rt_a, token=TOKEN) as (tokened, _), served(rt_b) as (open_, _):
        # The tokened app refuses a request without its token; the other lets it in.
        assert (await tokened.get("/v1/threads", headers={"Authorization": ""})) \
            .status_code == 401
        assert (await open_.get("/v1/threads")).status_code == 200
        # Each app's message limit is its own (the message route is built per app).
        eleven = {"text": "x" * 11}
        assert (await tokened.post(thread_url("t", "/messages"), json=eleven)) \
            .status_code == 422
        assert (await open_.post(thread_url("t", "/messages"), json=eleven)) \
            .status_code == 200

        with_tokens = (await tokened.get("/openapi.json")).json()
        without = (await open_.get("/openapi.json")).json()
        assert "HTTPBearer" in with_tokens["components"]["securitySchemes"]
        assert "401" in with_tokens["paths"]["/v1/threads"]["get"]["responses"]
        assert with_tokens["paths"]["/v1/threads"]["get"]["security"]
        # Without tokens no route asks for one, and none answers 401.
        assert "securitySchemes" not in without["components"]
        for op in _operations(without):
            assert "security" not in op, op["operationId"]
            assert "401" not in op["responses"], op["operationId"]
        # Without tokens the schema still lists every route the other app has.
        assert without["paths"].keys() == with_tokens["paths"].keys()
        lengths = [s["components"]["schemas"]["MessageIn"]["properties"]["text"]["maxLength"]
                   for s in (with_tokens, without)]
        assert lengths == [10, 20]
