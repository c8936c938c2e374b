"""maiden's exceptions, one tree.

    MaidenError
    ├── ConfigError               a bad agent.toml: names the key path and the reason
    ├── ProviderError             the model could not produce a turn (status, retry_after)
    │   ├── ContextTooLong        the request did not fit the model's context window
    │   └── ScriptExhausted       a scripted provider ran out of turns
    ├── StoreError
    │   ├── StaleWrite            an append whose expected position/version is stale
    │   ├── CorruptStore          a row or snapshot that cannot be read back
    │   ├── StoreGone             the database was deleted or replaced under a running process
    │   ├── StoreUnreachable      the store's server could not be reached (it may be starting)
    │   ├── StoreFull             the store's disk has no room for a write (it may be freed)
    │   ├── InvalidThreadId       a thread id that breaks the rule (not valid Unicode, a control
    │   │                         character)
    │   ├── NotFound              an unknown run or thread
    │   ├── Unsure *              a store's identity that cannot be read back now (busy)
    │   └── _Busy *               SQLite's write lock held by another process
    ├── RunError                  a run-level failure (reason is the machine-readable code)
    │   └── IllegalTransition     a run state change the state machine forbids
    ├── DeliveryError             a channel could not post or look up a message (retried)
    │   └── SlackCallError *      a Slack Web API call that failed, with Slack's error code
    ├── FileRefused               a shared file not taken in (too big, a type not allowed,
    │                             a sign-in page instead of the file), and why
    ├── FileUnreachable           a shared file's platform did not answer (tried again)
    ├── HookRefused               a webhook delivery not taken (no valid signature, too big)
    ├── MemoryRefused             a memory its writer may not keep in that scope, and why
    ├── ToolDefinitionError       a tool function the registry cannot describe
    ├── ToolFailure               a tool's own words to the model on why a call failed
    │   └── FetchError *          http_fetch could not fetch a URL
    │       └── FetchRefused *    a URL http_fetch may not fetch
    ├── McpToolError *            an MCP server answered a call with an error
    ├── McpServerDown *           a call to an MCP server that is not running
    ├── StartError *              an MCP server that cannot be started as configured
    ├── ChannelRefused *          a platform refused a channel's token, scope or intent
    ├── Unreachable *             a platform did not answer a channel (tried again)
    ├── ApiError *                an HTTP API answer given on purpose (status, code)
    ├── Unauthorized *            an HTTP request with no configured token
    ├── NotSignedIn *             a console page asked for without a session
    ├── BadQuery *                a console page's query parameter it cannot use
    ├── ScheduleError *           a schedule change asked from chat that cannot be made
    └── UsageError *              a command line that cannot be carried out as typed

    * defined where it is raised: ``runtime.stores``, ``runtime.builtins.http_fetch``,
      ``runtime.tools.mcp``, ``channels`` (``retry``, ``http``, ``slack``),
      ``schedules.book``, ``bot.commands``.

Library errors (sqlite3, httpx, ...) are translated where they enter, with
``raise ... from exc``. ``tests/test_errors.py`` holds every exception class of
``runtime``, ``channels``, ``schedules`` and ``bot`` to this tree.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "ConfigError",
    "ContextTooLong",
    "CorruptStore",
    "DeliveryError",
    "FailReason",
    "FileRefused",
    "FileUnreachable",
    "HookRefused",
    "IllegalTransition",
    "InvalidThreadId",
    "MaidenError",
    "MemoryRefused",
    "NotFound",
    "ProviderError",
    "RunError",
    "RunErrorReason",
    "ScriptExhausted",
    "StaleWrite",
    "StoreError",
    "StoreFull",
    "StoreGone",
    "StoreUnreachable",
    "ToolDefinitionError",
    "ToolFailure",
]


class MaidenError(Exception):
    """Base of every error maiden raises on purpose."""


class ConfigError(MaidenError):
    """The configuration is invalid; ``problems`` lists ``(key_path, reason)``."""

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        """The file the keys are in; None until the app that read the file says which."""
        name = source or "agent.toml"
        lines = [f"{name}: {key}: {reason}" if key else f"{name}: {reason}"
                 for key, reason in problems]
        super().__init__("\n".join(lines))

    def located(self, source: str) -> ConfigError:
        """The same problems, in ``source`` (unless the error already names its file)."""
        return self if self.source is not None else ConfigError(self.problems, source)


class ProviderError(MaidenError):
    """The provider failed to produce a turn."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ContextTooLong(ProviderError):
    """The request did not fit the model's context window (the run trims and retries once)."""


class ScriptExhausted(ProviderError):
    """A scripted provider was asked for more turns than its script holds."""


class StoreError(MaidenError):
    """A storage operation failed."""


class StaleWrite(StoreError):
    """Someone else wrote to this thread or run since it was loaded."""


class CorruptStore(StoreError):
    """Stored data could not be read back."""


class StoreGone(StoreError):
    """The database this process has open is no longer the one at its path (the file was
    deleted, or another file put there), or a flush of it to disk failed (what the disk
    holds of what was written before is then unknown, and a later flush that succeeds
    would not say so): nothing more is accepted until the process starts again."""


class StoreUnreachable(StoreError):
    """The store's server could not be reached (refused, reset, timed out): it may only be
    starting, unlike a refusal (a password, a database that does not exist)."""


class StoreFull(StoreError):
    """The disk the store is on has no room for a write: nothing was written, and a write
    goes through again once there is room (a full disk is freed, unlike a read-only one)."""


class InvalidThreadId(StoreError, ValueError):
    """The thread id breaks the one rule for ids (``stores.base.check_thread_id``)."""


class NotFound(StoreError, LookupError):
    """No such run or thread."""


FailReason = Literal[
    "provider_error", "max_turns_exceeded", "budget_exceeded", "poison_run", "internal_error",
    "replay_mismatch", "corrupt_store", "message_too_long", "empty_answer", "spend_cap",
    "unknown_agent",
]
"""Why a run ended ``failed`` (its ``reason``)."""

RunErrorReason = Literal[
    FailReason,
    "illegal_transition", "not_an_approver", "not_awaiting_approval", "stale_approval",
    "not_resumable", "already_ended", "cancel_failed", "shutting_down", "request_timeout",
    "decide_refused", "cancel_refused", "resume_refused", "invalid_message",
    "vote_refused", "driven_elsewhere", "delete_failed",
]
"""Every ``RunError.reason``: a stable code callers (the HTTP API, the CLI) map to answers."""


class RunError(MaidenError):
    """A run-level refusal or failure; ``reason`` is a stable code (``RunErrorReason``)."""

    def __init__(self, reason: RunErrorReason, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


class IllegalTransition(RunError):
    """A run state change that the state machine does not allow."""

    def __init__(self, run_id: str, source: str, target: str) -> None:
        super().__init__("illegal_transition", f"run {run_id}: {source} -> {target} is not allowed")
        self.source = source
        self.target = target


class DeliveryError(MaidenError):
    """A channel's API refused or failed a post or a lookup; the outbox tries again later."""


class HookRefused(MaidenError):
    """A webhook delivery (``[[hooks]]``) not taken, and nothing run: ``status`` says why as
    HTTP does (401: no valid signature over the body; 413: a body over the hook's limit)."""

    def __init__(self, status: Literal[401, 413], why: str) -> None:
        super().__init__(why)
        self.status = status


class MemoryRefused(MaidenError, ValueError):
    """A memory not kept: its writer may not write its scope (``model.memories``'s table
    says who may), or it is not a memory (empty, too long); the message says why."""


class FileRefused(MaidenError):
    """A file someone shared is not taken in: ``name`` is the file's, the message says why
    in a few words (``it is 31.2 MB; at most 20.0 MB are read ([files] max_bytes)``)."""

    def __init__(self, name: str, why: str,
                 limit: Literal["size", "type", "count"] | None = None) -> None:
        super().__init__(f"{name}: {why}")
        self.name = name
        self.why = why
        self.limit = limit
        """The ``[files]`` limit it broke, if one did (else it could not be fetched)."""


class FileUnreachable(MaidenError):
    """A shared file's platform could not be reached to download it (no connection, a
    5xx, "try later"): not a refusal, the download is tried again (``retry_after``: the
    seconds the platform asked for, if it did)."""

    def __init__(self, name: str, why: str, retry_after: float | None = None) -> None:
        super().__init__(f"{name}: {why}")
        self.name = name
        self.why = why
        self.retry_after = retry_after


class ToolDefinitionError(MaidenError, TypeError):
    """A function cannot be turned into a tool (bad signature, duplicate name, ...)."""


class ToolFailure(MaidenError):
    """Raised by a tool: the call failed, and the message (as it is, without the class's
    name) tells the model why — ``refused: 127.0.0.1 is a loopback address``."""
