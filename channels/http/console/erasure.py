"""The console's share of a person's data: a thread's Export link (``GET /console/export``,
a download of its JSON lines, for whoever may see the thread) and its Delete button (``POST
/console/threads/delete``, ``operate``, with a box to tick: the form says what goes)."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from runtime import MaidenError, NotFound

from ..blobs import export_response
from .console import Console
from .security import Session, page_headers

__all__ = ["Erasure"]


class Erasure:
    def __init__(self, console: Console) -> None:
        self.c = console
        self.rt = console.runtime

    async def export(self, request: Request) -> Response:
        """The thread named by ``?thread=`` as JSON lines, the configured tokens redacted."""
        thread_id = request.query_params.get("thread", "")
        try:
            if not await self.c.sees(request, thread_id):
                raise NotFound(f"no thread {thread_id!r}")
            export = await self.rt.records.export(
                thread_id, secrets=[c.token for c in self.c.guard.credentials])
        except NotFound:
            return self.c.page(request, "error.html", status=404,
                               message=f"There is no thread {thread_id!r}.")
        return export_response(export.lines(), thread_id, page_headers())

    async def delete(self, request: Request, form: FormData, session: Session) -> Response:
        """Erase the thread the form names, once its box is ticked (a run of it in progress
        is cancelled first); the page says what went."""
        thread_id = form.get("thread")
        if not isinstance(thread_id, str):
            raise MaidenError("the form has no 'thread'")
        if form.get("confirm") != "yes":
            return self.c.render(request, "error.html", session, status=422,
                                 message="Tick the box to confirm that the thread and "
                                         "everything of it should be deleted.")
        erased = await self.rt.delete_thread(thread_id, by=session.operator)
        return self.c.render(request, "deleted.html", session, thread_id=thread_id,
                             erased=erased)
