"""``search_knowledge``: passages of the team's own documents (``[[knowledge]]``), each with
where it is, so that an answer can cite it (``read_only``).

Only the sources open to the run are searched: those naming its agent (or none), in its
place (or anywhere). The passages come from the ``knowledge`` service (the store's
full-text search), which the indexing pass fills.
"""

from __future__ import annotations

from typing import Any

from ..serving.knowledge import KnowledgeSearch
from ..tools.base import Tool, ToolContext, tool

__all__ = ["make_search_knowledge"]

_MOST = 20


def make_search_knowledge() -> Tool:
    @tool(name="search_knowledge", effect="read_only", timeout_s=20, needs=["knowledge"])
    async def search_knowledge(ctx: ToolContext, query: str, limit: int = 5
                               ) -> dict[str, Any]:
        """Search the team's documents (runbooks, docs, notes) for passages about `query`
        (any of its words; best matches first). Each passage comes with `cite`: where it
        is (source/path, section or page); cite the passages you rely on."""
        if not 1 <= limit <= _MOST:
            raise ValueError(f"limit is 1 to {_MOST}")
        knowledge: KnowledgeSearch = ctx.service("knowledge")
        sources, passages = await knowledge.search(query, ctx.agent, ctx.origin, limit=limit)
        if not sources:
            return {"passages": [], "note": "no knowledge source is open to this "
                    "conversation (see [[knowledge]] agents and places)"}
        return {"passages": passages, "searched": sources}

    return search_knowledge
