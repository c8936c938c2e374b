"""The OpenAI Responses wire (``POST /v1/responses``) as the soak's people use it: one
message, its ``conversation`` the plan's HTTP thread, with an ``Idempotency-Key``, answered
whole or streamed (``response.created`` ... ``response.completed``).

A response is a run (``resp_`` + its id): what the client saw goes into an ``Answer`` like
every other route's, so the invariants hold it to what they hold the ``openai`` route to
(one run per accepted message, answered once, its own answer).
"""

from __future__ import annotations

from typing import Any

import httpx

from .client import Answer, Client, _status, sse
from .plan import Op

__all__ = ["respond"]

PREFIX = "resp_"
# A response's status as a run's state (``incomplete``: it waits for a person's decision;
# ``in_progress``: a whole answer's wait ran out first, the run goes on).
_STATES = {"completed": "completed", "failed": "failed", "incomplete": "awaiting_approval"}
_ENDS = {"response.completed", "response.failed", "response.incomplete"}


async def respond(client: Client, base: str, op: Op, key: str) -> Answer:
    """Send ``op`` once through ``POST /v1/responses`` to the replica at ``base``; raises
    httpx errors and ``Refused``; an ``Answer`` with no run id for a status to send again
    on (5xx, 429)."""
    headers = {**Client._auth(op.person), "Idempotency-Key": key}
    streamed = op.route == "responses_stream"
    body = {"model": "chaos", "input": op.text, "conversation": op.thread, "stream": streamed}
    url = base + "/v1/responses"
    if streamed:
        headers["Accept"] = "text/event-stream"
        async with client.http.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                return _status(response)
            return await _events(response)
    response = await client.http.post(url, json=body, headers=headers)
    if response.status_code != 200:
        return _status(response)
    return _answer(response.json(), ended=True)


def _answer(found: dict[str, Any], *, ended: bool) -> Answer:
    """What a response object says: its run, its run's state and its text."""
    state = _STATES.get(str(found.get("status")))
    texts = [part.get("text") or "" for item in found.get("output") or ()
             for part in item.get("content") or ()]
    return Answer(str(found["id"]).removeprefix(PREFIX), state,
                  "".join(texts) if state else None, 200, ended=ended)


async def _events(response: httpx.Response) -> Answer:
    """The stream's run (from ``response.created``) and its end; ``ended`` False if the
    stream was cut off before one of ``_ENDS``."""
    answer = Answer(None, status=200, ended=False)
    async for event, data in sse(response):
        if event == "response.created":
            answer.run_id = str(data["response"]["id"]).removeprefix(PREFIX)
        elif event in _ENDS:
            answer = _answer(data["response"], ended=True)
    return answer
