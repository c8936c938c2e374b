"""maiden's durable agent runtime. Imports nothing from channels, schedules or bot.

The names below are the API that channels, schedules and the app use. The HTTP
providers live in ``runtime.providers.anthropic`` / ``.openai`` (they import httpx,
which commands that never call a model API do not pay for).
"""

from .budget import BudgetConfig
from .build import make_provider, make_store, make_tools
from .config import AgentConfig, Prices, ProviderConfig, RuntimeConfig, StoreConfig, ToolsConfig
from .delivery import Deliverer
from .entries import ENTRY, AssistantTurn, Entry, Notice, ToolCall, ToolResult, Usage, UserMessage
from .errors import (
    ConfigError,
    CorruptStore,
    DeliveryError,
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
from .requests import ScheduleRecord, ScheduleService
from .runs import (
    TERMINAL,
    ApprovalDelivery,
    Decision,
    Delivery,
    Origin,
    PendingApproval,
    ReplyDelivery,
    Run,
    RunState,
    Transition,
    idempotency_key,
)
from .service import Runtime
from .stores import (
    Checkpoint,
    ControlStore,
    FilesStore,
    OutboxStore,
    RunStore,
    ScheduleStore,
    SQLiteStore,
    Store,
    ThreadInfo,
)
from .stores.base import StoreStats
from .text import split_message
from .tools import NOT_DONE, Effect, Tool, ToolContext, ToolRegistry, ToolSpec, tool
from .workers import ACTIVE as ACTIVE_STATES

__all__ = [
    "ACTIVE_STATES",
    "DRIVABLE_STATES",
    "ENTRY",
    "NOT_DONE",
    "RUN_CONTEXT",
    "TERMINAL",
    "AgentConfig",
    "ApprovalDelivery",
    "ApprovalRequested",
    "AssistantTurn",
    "BudgetConfig",
    "Checkpoint",
    "ConfigError",
    "ControlStore",
    "CorruptStore",
    "Decision",
    "Deliverer",
    "Delivery",
    "DeliveryError",
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
    "Origin",
    "OutboxStore",
    "PendingApproval",
    "Prices",
    "ProcessResult",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ReplyDelivery",
    "Run",
    "RunEnded",
    "RunError",
    "RunEvent",
    "RunStarted",
    "RunState",
    "RunStore",
    "Runtime",
    "RuntimeConfig",
    "SQLiteStore",
    "ScheduleRecord",
    "ScheduleService",
    "ScheduleStore",
    "ScriptExhausted",
    "ScriptedProvider",
    "ScriptedTurn",
    "StaleWrite",
    "StateChanged",
    "Store",
    "StoreConfig",
    "StoreError",
    "StoreStats",
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
    "idempotency_key",
    "make_provider",
    "make_store",
    "make_tools",
    "run_process",
    "split_message",
    "tool",
]
