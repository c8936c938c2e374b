"""The console's Knowledge page (``GET /knowledge``): each ``[[knowledge]]`` source with its
folder and what the store holds of it (files, passages, when a file of it was last
stored, whichever replica indexed it), and how this process's passes stand (one running
now, the last one's changes and error); and its action, ``POST /console/knowledge/index``
(the ``operate`` right): a pass started now in the background, as `maiden run`'s own, under
the indexing lease (``keep_indexed``), so that among replicas one indexes at a time."""

from __future__ import annotations

import asyncio

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from runtime import Indexer, NotFound, SourceStatus, keep_indexed

from .console import Console, back
from .security import Session

__all__ = ["KnowledgePage"]


class KnowledgePage:
    def __init__(self, console: Console) -> None:
        self.c = console
        self.indexer: Indexer | None = console.options.knowledge
        self._asked: asyncio.Task[None] | None = None
        """The pass the console started last (one at a time: an ask meanwhile starts none)."""

    async def page(self, request: Request) -> Response:
        """Every configured source, or "no knowledge sources configured"."""
        return self.c.page(request, "knowledge.html", rows=await self.rows(),
                           indexing=self.indexing(),
                           started=request.query_params.get("started") == "1")

    async def rows(self) -> list[dict[str, SourceStatus]]:
        """Each source as the store has it (``stored``) beside this process's last pass over
        it (``here``): the store is shared by replicas, only one of which indexes."""
        if self.indexer is None:
            return []
        here = {s.name: s for s in self.indexer.status()}
        return [{"stored": s, "here": here[s.name]} for s in await self.indexer.stored()]

    def indexing(self) -> bool:
        """Whether a pass runs in this process now (the console's, or `maiden run`'s)."""
        if self.indexer is None:
            return False
        asked = self._asked is not None and not self._asked.done()
        return asked or self.indexer.indexing

    async def index(self, request: Request, form: FormData, session: Session) -> Response:
        """Start a pass in the background, unless one runs already; back to the page."""
        if self.indexer is None or not self.indexer.status():
            raise NotFound("No knowledge sources are configured.")
        if not self.indexing():
            self._asked = self.c.runtime.spawn(
                keep_indexed(self.indexer, self.c.runtime.operator, 0),
                name="maiden-knowledge-index-console")
        return back("/knowledge?started=1")
