"""maiden's durable agent runtime. Imports nothing from channels, schedules or bot."""

from typing import TYPE_CHECKING, Any

from .budget import BudgetConfig
from .build import make_provider, make_store, make_tools
from .config import AgentConfig, Prices, ProviderConfig, RuntimeConfig, StoreConfig, ToolsConfig
from .delivery import Deliverer
from .entries import ENTRY, AssistantTurn, Entry, Notice, ToolCall, ToolResult, Usage, UserMessage
from .errors import (
    ConfigError,
    CorruptStore,
    IllegalTransition,
    InvalidThreadId,
    MaidenError,
    NotFound,
    ProviderError,
    RunError,
    ScriptExhausted,
    StaleWrite,
    StoreError,
    ToolDefinitionError,
)
from .events import (
    ApprovalRequested,
    RunEnded,
    RunEvent,
    RunStarted,
    StateChanged,
    Subscription,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from .logcontext import RUN_CONTEXT
from .loop import DRIVABLE as DRIVABLE_STATES
from .process import ProcessResult, run_process
from .providers import (
    EchoProvider,
    ModelRequest,
    ModelResponse,
    Provider,
    ScriptedProvider,
    ScriptedTurn,
)
from .runs import (
    TERMINAL,
    Decision,
    Delivery,
    Origin,
    PendingApproval,
    Run,
    RunState,
    Transition,
    idempotency_key,
)
from .service import ACTIVE as ACTIVE_STATES
from .service import Runtime
from .stores import Checkpoint, FilesStore, SQLiteStore, Store, ThreadInfo
from .tools import NOT_DONE, Effect, Tool, ToolContext, ToolRegistry, ToolSpec, tool

__all__ = [
    "ACTIVE_STATES",
    "DRIVABLE_STATES",
    "ENTRY",
    "NOT_DONE",
    "RUN_CONTEXT",
    "TERMINAL",
    "AgentConfig",
    "AnthropicProvider",
    "ApprovalRequested",
    "AssistantTurn",
    "BudgetConfig",
    "Checkpoint",
    "ConfigError",
    "CorruptStore",
    "Decision",
    "Deliverer",
    "Delivery",
    "EchoProvider",
    "Effect",
    "Entry",
    "FilesStore",
    "IllegalTransition",
    "InvalidThreadId",
    "MaidenError",
    "ModelRequest",
    "ModelResponse",
    "NotFound",
    "Notice",
    "OpenAIProvider",
    "Origin",
    "PendingApproval",
    "Prices",
    "ProcessResult",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "Retry",
    "Run",
    "RunEnded",
    "RunError",
    "RunEvent",
    "RunStarted",
    "RunState",
    "Runtime",
    "RuntimeConfig",
    "SQLiteStore",
    "ScriptExhausted",
    "ScriptedProvider",
    "ScriptedTurn",
    "StaleWrite",
    "StateChanged",
    "Store",
    "StoreConfig",
    "StoreError",
    "Subscription",
    "TextDelta",
    "ThreadInfo",
    "Tool",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolContext",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "ToolsConfig",
    "Transition",
    "Usage",
    "UserMessage",
    "fit_history",
    "idempotency_key",
    "make_provider",
    "make_store",
    "make_tools",
    "run_process",
    "tool",
]

if TYPE_CHECKING:
    from .providers.anthropic import AnthropicProvider
    from .providers.http import Retry
    from .providers.openai import OpenAIProvider


def __getattr__(name: str) -> Any:
    # The HTTP providers load on first use (httpx is slow to import).
    if name in ("AnthropicProvider", "OpenAIProvider", "Retry"):
        from . import providers

        return getattr(providers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
