"""The PostgreSQL store's control plane: requests between processes, announced with
``pg_notify`` on a channel per schema so the other replicas' readers wake at once, and
heartbeats."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...errors import NotFound
from ...model.requests import ControlRequest, Instance
from ..base import ControlStore, unlistened
from .core import PostgresCore

__all__ = ["PostgresControl"]


class PostgresControl(PostgresCore, ControlStore):
    """The PostgreSQL store's ``ControlStore``."""

    async def add_request(self, request: ControlRequest) -> ControlRequest:
        async with self._transaction() as conn:
            stored = request.model_copy(update={"id": await conn.fetchval(
                "SELECT nextval('requests_id')")})
            await conn.execute("INSERT INTO requests (id, data) VALUES ($1, $2)",
                               stored.id, stored.model_dump_json())
            # Delivered to the listeners when the transaction commits, not before.
            await conn.execute("SELECT pg_notify($1, $2)", self._requests, str(stored.id))
        return stored

    async def listen_requests(self, wake: Callable[[], None]) -> Callable[[], Awaitable[None]]:
        """``LISTEN`` on the store's listening connection (``listen``); while it cannot,
        the readers' polling carries on alone, and the next call listens again."""
        stop = await self._listening.listen(self._requests, lambda _: wake())
        return unlistened if stop is None else stop

    async def requests(self) -> list[ControlRequest]:
        return await self._parsed(ControlRequest.model_validate_json,
                                  "SELECT data FROM requests WHERE NOT handled ORDER BY id")

    async def get_request(self, request_id: int) -> ControlRequest:
        data = await self._value("SELECT data FROM requests WHERE id = $1", request_id)
        if data is None:
            raise NotFound(f"no request {request_id}")
        return ControlRequest.model_validate_json(data)

    async def finish_request(self, request: ControlRequest) -> bool:
        done = await self._value("UPDATE requests SET handled = true, data = $1 "
                                 "WHERE id = $2 AND NOT handled RETURNING true",
                                 request.model_dump_json(), request.id)
        return done is not None

    async def beat(self, instance: Instance, *, gone: bool = False) -> None:
        async with self._connection() as conn:
            if gone:
                await conn.execute("DELETE FROM instances WHERE id = $1", instance.id)
            else:
                await conn.execute("INSERT INTO instances VALUES ($1, $2) ON CONFLICT (id) "
                                   "DO UPDATE SET data = excluded.data",
                                   instance.id, instance.model_dump_json())

    async def instances(self) -> list[Instance]:
        return await self._parsed(Instance.model_validate_json,
                                  "SELECT data FROM instances ORDER BY id")
