"""The console's Memory page (``GET /memory``): what the agent remembers, searched by word,
each memory with its scope, its source (a link to the thread and run it was learned in,
where the session may see them), expiry and last editor; and its actions (``POST
/console/memories/edit``, ``/console/memories/forget``, htmx swapping the row, a plain
form going back to the page). Who sees, edits and forgets which is the API's rule
(``recollect``): ``operate``, every memory; any other session, its own."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from runtime import SCOPE_KINDS, Listing, Memory, MemoryRefused, NotFound, source_words

from ..recollect import editing_refusal, names, sees
from .console import BadQuery, Console, back, query_int
from .security import Session

__all__ = ["MemoryPage"]

SHOWN = 100
"""Memories a page shows by default (the newest); ``?limit=`` up to ``MOST``."""
MOST = 1_000


class MemoryPage:
    def __init__(self, console: Console) -> None:
        self.c = console
        self.memories = console.runtime.kept.memories

    async def page(self, request: Request) -> Response:
        """The memories the session may see, newest first, ``?q=`` a search, ``?scope=``."""
        session, _ = self.c.session(request)
        q = request.query_params.get("q", "")[:1000]
        scope = request.query_params.get("scope") or None
        if scope is not None and scope not in SCOPE_KINDS:
            raise BadQuery(f"scope must be one of {', '.join(SCOPE_KINDS)}, not {scope!r}")
        limit = query_int(request, "limit", SHOWN, ge=1, le=MOST)
        listing = Listing.model_validate({
            "query": q, "kind": scope, "at": self.memories.now(),
            "people": None if session.may("operate") else names(session.caller)})
        found = await self.memories.listing(listing, limit)
        return self.c.page(request, "memory.html", q=q, scope=scope or "",
                           kinds=SCOPE_KINDS, rows=[await self._row(request, session, m)
                                                    for m in found], limit=limit)

    async def _row(self, request: Request, session: Session, memory: Memory) -> dict[str, object]:
        thread = memory.provenance.thread_id
        return {"memory": memory, "source": source_words(memory),
                "linked": await self.c.sees(request, thread),
                "may_edit": editing_refusal(session.caller, memory) is None}

    async def _seen(self, form: FormData, session: Session) -> Memory:
        memory_id = form.get("id")
        found = await self.memories.lookup(memory_id) if isinstance(memory_id, str) else None
        if found is None or not sees(session.caller, found):
            raise NotFound(f"There is no memory {memory_id!r}.")
        return found

    async def edit(self, request: Request, form: FormData, session: Session) -> Response:
        """Correct a memory's text (who said it, or ``operate``), as the console's holder."""
        found = await self._seen(form, session)
        why = editing_refusal(session.caller, found)
        text = form.get("text")
        if why is not None or not isinstance(text, str):
            return self.c.render(request, "error.html", session, status=403 if why else 422,
                                 message=why or "The form has no text.")
        try:
            edited = await self.memories.rewrite(found.id, text, f"console:{session.operator}")
        except MemoryRefused as exc:
            return self.c.render(request, "error.html", session, status=422,
                                 message=str(exc))
        if edited is None:
            raise NotFound(f"There is no memory {found.id!r}.")
        if request.headers.get("HX-Request"):
            return self.c.render_fragment(self.c.fragment(
                "_memory.html", row=await self._row(request, session, edited),
                csrf=self.c.guard.csrf(session)))
        return back("/memory")

    async def forget(self, request: Request, form: FormData, session: Session) -> Response:
        """Forget a memory the session sees (its own; any, with ``operate``)."""
        found = await self._seen(form, session)
        await self.memories.erase(found.id)
        if request.headers.get("HX-Request"):
            return self.c.render_fragment("")  # the row goes
        return back("/memory")
