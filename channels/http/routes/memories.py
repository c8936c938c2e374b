"""/v1/memories: what the agent remembers, to see and correct (DESIGN §6, who sees what).

A token with ``operate`` sees every memory; any other sees the memories that are its own
(``recollect.sees``): those it said (through the API its identity is ``http:NAME``,
through the console ``console:NAME``) and the person memories about it. One it may not
see is a 404, as one that is not there, so its existence does not leak. Forgetting follows
the ``forget`` tool's rule (who said it, who it is about, or ``operate``); editing, who
said it or ``operate`` (``edit_refusal``). Forgetting a person, every memory they said or
that is about them, needs ``operate``."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
import re
from typing import Annotated

from fastapi import APIRouter, Path, Query

from runtime import Listing, Memory, MemoryRefused, ScopeKind

from ..auth import Credential
from ..deps import Api, Caller, Operator, secured
from ..errors import ApiError, problem_responses
from ..models import MemoryEditIn, MemoryForgotten, MemoryOut, MemoryPage, PersonForgotten
from ..recollect import editing_refusal, names, sees
from .common import DENIED

__all__ = ["router"]

router = APIRouter(tags=["memories"])

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""What no thread id holds (the API's one rule for them, ``errors.THREAD_ID_PATTERN``)."""

MemoryId = Annotated[str, Path(max_length=200, description="the memory's id")]


async def _seen(api: Api, who: Credential, memory_id: str) -> Memory:
    """The memory, if the caller may see it; else a 404 that says no more than absence."""
    found = await api.runtime.kept.memories.lookup(memory_id)
    if found is None or not sees(who, found):
        raise ApiError(404, f"there is no memory {memory_id!r}", "not_found")
    return found


@router.get("/v1/memories", dependencies=secured, responses=problem_responses(*DENIED, 422))
async def list_memories(
    api: Api,
    who: Caller,
    q: Annotated[str, Query(max_length=1000, description="only memories holding a word of "
                                                         "this")] = "",
    scope: Annotated[ScopeKind | None, Query(description="only memories of this scope")] = None,
    thread_id: Annotated[str | None, Query(max_length=1000, description=(
        "only memories learned in this thread or kept for it"))] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> MemoryPage:
    """The memories the caller may see, the most recently changed first (expired ones
    left out): with ``operate``, all; else those it said and those about it."""
    if thread_id is not None and _CONTROL.search(thread_id):
        raise ApiError(422, "a thread id holds no control characters", "invalid_thread_id")
    memories = api.runtime.kept.memories
    listing = Listing(query=q, kind=scope, thread_id=thread_id or None, at=memories.now(),
                      people=None if who.may("operate") else names(who))
    return MemoryPage(memories=[MemoryOut.of(m) for m in
                                await memories.listing(listing, limit)])


@router.get("/v1/memories/{memory_id}", dependencies=secured,
            responses=problem_responses(*DENIED, 404, 422))
async def get_memory(memory_id: MemoryId, api: Api, who: Caller) -> MemoryOut:
    """One memory the caller may see."""
    return MemoryOut.of(await _seen(api, who, memory_id))


@router.patch("/v1/memories/{memory_id}", dependencies=secured,
              responses=problem_responses(*DENIED, 403, 404, 422))
async def edit_memory(memory_id: MemoryId, body: MemoryEditIn, api: Api,
                      who: Caller) -> MemoryOut:
    """Correct a memory's text (who said it, or ``operate``), recording the caller as
    ``edited_by``."""
    found = await _seen(api, who, memory_id)
    why = editing_refusal(who, found)
    if why is not None:
        raise ApiError(403, why, "forbidden")
    try:
        edited = await api.runtime.kept.memories.rewrite(memory_id, body.text,
                                                         f"http:{who.name}")
    except MemoryRefused as exc:
        raise ApiError(422, str(exc), "invalid_memory") from None
    if edited is None:  # forgotten meanwhile
        raise ApiError(404, f"there is no memory {memory_id!r}", "not_found")
    return MemoryOut.of(edited)


@router.delete("/v1/memories/{memory_id}", dependencies=secured,
               responses=problem_responses(*DENIED, 404, 422))
async def forget_memory(memory_id: MemoryId, api: Api, who: Caller) -> MemoryForgotten:
    """Forget a memory the caller may see: one it said, one about it, or, with
    ``operate``, any."""
    await _seen(api, who, memory_id)
    existed = await api.runtime.kept.memories.erase(memory_id)
    return MemoryForgotten(id=memory_id, existed=existed)


@router.delete("/v1/memories", responses=problem_responses(*DENIED, 403, 422))
async def forget_person(
    who: Operator,
    api: Api,
    person: Annotated[str, Query(min_length=1, max_length=1000, description=(
        "whose memories: a person as memories name them (slack:U0ANA, discord:1234, "
        "http:NAME)"))],
) -> PersonForgotten:
    """Forget a person (``operate``): every memory they said and every memory about them,
    with the records of the calls that put them, in one write. Repeating it succeeds,
    with nothing left to remove."""
    if _CONTROL.search(person):
        raise ApiError(422, "a person's name holds no control characters", "invalid_person")
    gone = await api.runtime.kept.memories.erase_person(person)
    return PersonForgotten(person=person, memories=gone)
