"""The files store's share of the control plane: requests between processes, heartbeats.

``requests/{id:012d}.json`` one file per request (ids from a counter file under a
lock), ``instances/{id}.json`` one file per serving runtime.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from ..control import ControlRequest, Instance
from ..errors import CorruptStore, NotFound

__all__ = ["FilesControl"]

P = ParamSpec("P")
T = TypeVar("T")


class FilesControl:
    """Mixed into ``FilesStore``; uses its root, locks and atomic writes."""

    root: Path

    def _lock(self, path: Path) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    def _write(self, path: Path, data: bytes) -> None:
        raise NotImplementedError

    async def _io(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        raise NotImplementedError

    async def add_request(self, request: ControlRequest) -> ControlRequest:
        return await self._io(_add_request, self, request)

    async def requests(self) -> list[ControlRequest]:
        found = await self._io(_list_requests, self)
        return [r for r in found if r.handled_at is None]

    async def get_request(self, request_id: int) -> ControlRequest:
        return await self._io(_get_request, self, request_id)

    async def finish_request(self, request: ControlRequest) -> bool:
        return await self._io(_finish_request, self, request)

    async def beat(self, instance: Instance, *, gone: bool = False) -> None:
        await self._io(_beat, self, instance, gone)

    async def instances(self) -> list[Instance]:
        return await self._io(_instances, self)


def _folder(store: FilesControl, name: str) -> Path:
    folder = store.root / name
    folder.mkdir(exist_ok=True)
    return folder


def _request_path(store: FilesControl, request_id: int) -> Path:
    return _folder(store, "requests") / f"{int(request_id):012d}.json"


def _parse(path: Path, model: Any) -> Any:
    try:
        return model.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise CorruptStore(f"{path}: {exc}") from exc


def _add_request(store: FilesControl, request: ControlRequest) -> ControlRequest:
    folder = _folder(store, "requests")
    with store._lock(folder / "counter.lock"):
        counter = folder / "counter"
        last = int(counter.read_text() or 0) if counter.exists() else 0
        stored = request.model_copy(update={"id": last + 1})
        store._write(_request_path(store, stored.id), stored.model_dump_json().encode())
        store._write(counter, str(stored.id).encode())
    return stored


def _list_requests(store: FilesControl) -> list[ControlRequest]:
    paths = sorted(p for p in _folder(store, "requests").glob("*.json")
                   if not p.name.startswith("."))
    return [_parse(p, ControlRequest) for p in paths]


def _get_request(store: FilesControl, request_id: int) -> ControlRequest:
    path = _request_path(store, request_id)
    if not path.exists():
        raise NotFound(f"no request {request_id}")
    return _parse(path, ControlRequest)  # type: ignore[no-any-return]


def _finish_request(store: FilesControl, request: ControlRequest) -> bool:
    path = _request_path(store, request.id)
    with store._lock(path.with_suffix(".lock")):
        if _parse(path, ControlRequest).handled_at is not None:
            return False
        store._write(path, request.model_dump_json().encode())
    return True


def _beat(store: FilesControl, instance: Instance, gone: bool) -> None:
    path = _folder(store, "instances") / f"{instance.id}.json"
    if gone:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        store._write(path, instance.model_dump_json().encode())


def _instances(store: FilesControl) -> list[Instance]:
    folder = _folder(store, "instances")
    return [_parse(p, Instance) for p in sorted(folder.glob("*.json"))
            if not p.name.startswith(".")]
