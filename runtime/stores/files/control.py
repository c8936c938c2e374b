"""The files store's control plane: ``requests/{id:012d}.json`` one file per request (ids
from a counter file under a lock), ``instances/{id}.json`` one file per serving runtime."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from ...errors import NotFound
from ...model.requests import ControlRequest, Instance
from ..base import ControlStore, unlistened
from .core import FilesCore, parse_file

__all__ = ["FilesControl"]


class FilesControl(FilesCore, ControlStore):
    """The files store's ``ControlStore``."""

    async def listen_requests(self, wake: Callable[[], None]) -> Callable[[], Awaitable[None]]:
        return unlistened  # readers poll: a folder cannot tell another process

    async def add_request(self, request: ControlRequest) -> ControlRequest:
        return await self._disk.io(self._add_request, request)

    async def requests(self) -> list[ControlRequest]:
        found = await self._disk.io(self._list_requests)
        return [r for r in found if r.handled_at is None]

    async def get_request(self, request_id: int) -> ControlRequest:
        return await self._disk.io(self._get_request, request_id)

    async def finish_request(self, request: ControlRequest) -> bool:
        return await self._disk.io(self._finish_request, request)

    async def beat(self, instance: Instance, *, gone: bool = False) -> None:
        await self._disk.io(self._beat, instance, gone)

    async def instances(self) -> list[Instance]:
        return await self._disk.io(self._instances)

    # -- synchronous work, run in a worker thread

    def _request_path(self, request_id: int) -> Path:
        return self._folder("requests") / f"{int(request_id):012d}.json"

    def _add_request(self, request: ControlRequest) -> ControlRequest:
        folder = self._folder("requests")
        with self._disk.lock(folder / "counter.lock"):
            counter = folder / "counter"
            last = int(counter.read_text() or 0) if counter.exists() else 0
            stored = request.model_copy(update={"id": last + 1})
            # The counter first: dying in between then only skips an id, instead of
            # leaving a request its asker never heard of for a server to carry out,
            # under an id the next request would take over.
            self._disk.write(counter, str(stored.id).encode())
            self._disk.write(self._request_path(stored.id), stored.model_dump_json().encode())
        return stored

    def _list_requests(self) -> list[ControlRequest]:
        paths = sorted(p for p in self._folder("requests").glob("*.json")
                       if not p.name.startswith("."))
        return [parse_file(p, ControlRequest) for p in paths]

    def _get_request(self, request_id: int) -> ControlRequest:
        path = self._request_path(request_id)
        if not path.exists():
            raise NotFound(f"no request {request_id}")
        return parse_file(path, ControlRequest)

    def _finish_request(self, request: ControlRequest) -> bool:
        path = self._request_path(request.id)
        with self._disk.lock(path.with_suffix(".lock")):
            if parse_file(path, ControlRequest).handled_at is not None:
                return False
            self._disk.write(path, request.model_dump_json().encode())
        return True

    def _beat(self, instance: Instance, gone: bool) -> None:
        path = self._folder("instances") / f"{instance.id}.json"
        if gone:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        else:
            self._disk.write(path, instance.model_dump_json().encode())

    def _instances(self) -> list[Instance]:
        folder = self._folder("instances")
        return [parse_file(p, Instance) for p in sorted(folder.glob("*.json"))
                if not p.name.startswith(".")]
