"""Durable agent sessions on the Dex durable execution engine.

One Dex Flow execution is one agent session; its Flow ID is the session ID. A
runner supplies the agent framework; the session owns Steps, persistence, RPCs,
live events, approvals and crash recovery. ``AgentHost`` runs session Flows
(embedded engine or a server address) and ``AgentSessionClient`` starts and drives
sessions.

This module holds what an application needs. Runner authors find the runner
contract in ``dex_agents.runner``, every wire value is in ``dex_agents.values``, and
the testing kit is ``dex_agents.testing``; the Stepwise loop is ``dex_agents.stepwise``.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from dex_agents._client import (
    TURN_END_EVENTS,
    AgentSessionClient,
    SessionEvent,
    SessionWaitTimeoutError,
)
from dex_agents._compaction import CompactionPolicy
from dex_agents._contract import ToolPolicy
from dex_agents._deprecation import install_moved_module_finder as _install_moved_module_finder
from dex_agents._deprecation import moved_names as _moved_names
from dex_agents._host import AgentHost, StepsAbandoned
from dex_agents._host_auth import AuthenticationError
from dex_agents._host_options import (
    EmbeddedEngineOptions,
    HealthProbes,
    SdkPatches,
    WorkerTuning,
)
from dex_agents._values import (
    AgentEvent,
    AgentInterrupt,
    AgentMessage,
    AgentPlan,
    AgentSnapshot,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    InteractionMode,
    InterruptKind,
    PlanTask,
    ToolEffect,
    session_codec_registry,
)
from dex_agents.session._flow import AgentSessionFlow, create_agent_session_flow
from dex_agents.session._options import AgentSessionOptions, AgentSessionOptionValues

__version__ = _version("dex-agents")
"""The installed version of dex-agents (every ``dex-agents-*`` package has the same)."""

__all__ = [
    "TURN_END_EVENTS",
    "AgentEvent",
    "AgentHost",
    "AgentInterrupt",
    "AgentMessage",
    "AgentPlan",
    "AgentSessionClient",
    "AgentSessionFlow",
    "AgentSessionOptionValues",
    "AgentSessionOptions",
    "AgentSnapshot",
    "AgentStatus",
    "AgentToolCall",
    "AgentToolCallStatus",
    "AgentUsage",
    "AuthenticationError",
    "CompactionPolicy",
    "EmbeddedEngineOptions",
    "HealthProbes",
    "InteractionMode",
    "InterruptKind",
    "PlanTask",
    "SdkPatches",
    "SessionEvent",
    "SessionWaitTimeoutError",
    "StepsAbandoned",
    "ToolEffect",
    "ToolPolicy",
    "WorkerTuning",
    "__version__",
    "create_agent_session_flow",
    "session_codec_registry",
]

# The old module paths (dex_agents.texts, dex_agents.session.options, ...) import as the
# modules they became, with a DeprecationWarning, for one release.
_install_moved_module_finder()

# Names this module exported before 0.1 for runner authors and wire code; each still
# imports, with a DeprecationWarning, from its new home for one release.
__getattr__ = _moved_names(
    __name__,
    {
        "FINAL_TOOL_CALL_STATUSES": "dex_agents.values",
        "INVALID_START_SESSION_SETTINGS_REASON": "dex_agents.values",
        "MAX_SESSION_SETTINGS_BYTES": "dex_agents.values",
        "OUTCOME_UNKNOWN_TOOL_RESULT": "dex_agents.runner",
        "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES": "dex_agents.values",
        "TOOL_CALL_NOT_RUN_ERROR_PREFIX": "dex_agents.runner",
        "AgentEventWriter": "dex_agents.runner",
        "AgentFrameworkRunner": "dex_agents.runner",
        "AgentInterruptResolution": "dex_agents.values",
        "AgentMessageChunk": "dex_agents.values",
        "AgentMessageChunkRange": "dex_agents.values",
        "AgentMessageIndex": "dex_agents.values",
        "AgentSessionStartInput": "dex_agents.values",
        "AgentState": "dex_agents.values",
        "AgentToolCallRecord": "dex_agents.values",
        "AgentTurnContext": "dex_agents.runner",
        "AgentTurnOutcome": "dex_agents.runner",
        "AgentUserMessage": "dex_agents.values",
        "AnswerQuestionInput": "dex_agents.values",
        "CancelTurnInput": "dex_agents.values",
        "CancellationSignal": "dex_agents.runner",
        "CompactContextInput": "dex_agents.values",
        "ContextSummary": "dex_agents.values",
        "ContextSummaryRequest": "dex_agents.runner",
        "ContextSummaryResult": "dex_agents.runner",
        "DeferredToolCall": "dex_agents.runner",
        "DeferredToolExecution": "dex_agents.runner",
        "DeferredToolOutcome": "dex_agents.runner",
        "DeleteQueuedMessageInput": "dex_agents.values",
        "ExecutePlanInput": "dex_agents.values",
        "FrameworkMessage": "dex_agents.values",
        "ListAgentMessagesInput": "dex_agents.values",
        "ListAgentMessagesOutput": "dex_agents.values",
        "MessageRole": "dex_agents.values",
        "ModelCallMetadata": "dex_agents.runner",
        "QuestionAnswer": "dex_agents.runner",
        "QueuedUserMessage": "dex_agents.values",
        "ResolveInterruptInput": "dex_agents.values",
        "ResolvedToolPolicy": "dex_agents.runner",
        "SteerUserMessageInput": "dex_agents.values",
        "SupportsCompaction": "dex_agents.runner",
        "SupportsToolTasks": "dex_agents.runner",
        "SupportsUnfinishedTurnMessages": "dex_agents.runner",
        "ToolCallCompleted": "dex_agents.values",
        "ToolCallsRequested": "dex_agents.runner",
        "ToolExecutionError": "dex_agents.runner",
        "ToolExecutionResult": "dex_agents.runner",
        "ToolInputRequested": "dex_agents.runner",
        "ToolTaskCancellation": "dex_agents.runner",
        "ToolTaskPending": "dex_agents.runner",
        "ToolTaskPoll": "dex_agents.runner",
        "ToolTaskPollOutcome": "dex_agents.runner",
        "ToolTaskStarted": "dex_agents.runner",
        "TurnCompleted": "dex_agents.runner",
        "TurnSessionSettings": "dex_agents.values",
        "UpdateSessionSettingsInput": "dex_agents.values",
        "add_agent_usage": "dex_agents.values",
        "build_turn_failure_note": "dex_agents.runner",
        "current_deferred_tool_execution": (
            "dex_agents._adapter_support",
            "use dex_agents.runner.get_deferred_tool_execution, which raises LookupError where this"
            " returned None",
        ),
        "current_model_step_context": (
            "dex_agents._adapter_support",
            "use dex_agents.runner.get_model_step_context, which raises LookupError where this"
            " returned None",
        ),
        "default_requires_approval": "dex_agents.runner",
        "describe_tool_call_outcome": "dex_agents.runner",
        "empty_agent_usage": "dex_agents.values",
        "from_wire": "dex_agents.values",
        "from_wire_json": "dex_agents.values",
        "get_deferred_tool_execution": "dex_agents.runner",
        "get_model_step_context": "dex_agents.runner",
        "message_sequence_key": "dex_agents.values",
        "model_call_metadata": "dex_agents.runner",
        "resolve_tool_policy": "dex_agents.runner",
        "session_settings_size": "dex_agents.values",
        "to_wire": "dex_agents.values",
        "to_wire_json": "dex_agents.values",
        "validate_session_settings": "dex_agents.values",
    },
)

if TYPE_CHECKING:  # the deprecated names, for type checkers during their last release
    from dex_agents._adapter_support import (
        current_deferred_tool_execution as current_deferred_tool_execution,
    )
    from dex_agents._adapter_support import (
        current_model_step_context as current_model_step_context,
    )
    from dex_agents.runner import (
        OUTCOME_UNKNOWN_TOOL_RESULT as OUTCOME_UNKNOWN_TOOL_RESULT,
    )
    from dex_agents.runner import (
        TOOL_CALL_NOT_RUN_ERROR_PREFIX as TOOL_CALL_NOT_RUN_ERROR_PREFIX,
    )
    from dex_agents.runner import (
        AgentEventWriter as AgentEventWriter,
    )
    from dex_agents.runner import (
        AgentFrameworkRunner as AgentFrameworkRunner,
    )
    from dex_agents.runner import (
        AgentTurnContext as AgentTurnContext,
    )
    from dex_agents.runner import (
        AgentTurnOutcome as AgentTurnOutcome,
    )
    from dex_agents.runner import (
        CancellationSignal as CancellationSignal,
    )
    from dex_agents.runner import (
        ContextSummaryRequest as ContextSummaryRequest,
    )
    from dex_agents.runner import (
        ContextSummaryResult as ContextSummaryResult,
    )
    from dex_agents.runner import (
        DeferredToolCall as DeferredToolCall,
    )
    from dex_agents.runner import (
        DeferredToolExecution as DeferredToolExecution,
    )
    from dex_agents.runner import (
        DeferredToolOutcome as DeferredToolOutcome,
    )
    from dex_agents.runner import (
        ModelCallMetadata as ModelCallMetadata,
    )
    from dex_agents.runner import (
        QuestionAnswer as QuestionAnswer,
    )
    from dex_agents.runner import (
        ResolvedToolPolicy as ResolvedToolPolicy,
    )
    from dex_agents.runner import (
        SupportsCompaction as SupportsCompaction,
    )
    from dex_agents.runner import (
        SupportsToolTasks as SupportsToolTasks,
    )
    from dex_agents.runner import (
        SupportsUnfinishedTurnMessages as SupportsUnfinishedTurnMessages,
    )
    from dex_agents.runner import (
        ToolCallsRequested as ToolCallsRequested,
    )
    from dex_agents.runner import (
        ToolExecutionError as ToolExecutionError,
    )
    from dex_agents.runner import (
        ToolExecutionResult as ToolExecutionResult,
    )
    from dex_agents.runner import (
        ToolInputRequested as ToolInputRequested,
    )
    from dex_agents.runner import (
        ToolTaskCancellation as ToolTaskCancellation,
    )
    from dex_agents.runner import (
        ToolTaskPending as ToolTaskPending,
    )
    from dex_agents.runner import (
        ToolTaskPoll as ToolTaskPoll,
    )
    from dex_agents.runner import (
        ToolTaskPollOutcome as ToolTaskPollOutcome,
    )
    from dex_agents.runner import (
        ToolTaskStarted as ToolTaskStarted,
    )
    from dex_agents.runner import (
        TurnCompleted as TurnCompleted,
    )
    from dex_agents.runner import (
        build_turn_failure_note as build_turn_failure_note,
    )
    from dex_agents.runner import (
        default_requires_approval as default_requires_approval,
    )
    from dex_agents.runner import (
        describe_tool_call_outcome as describe_tool_call_outcome,
    )
    from dex_agents.runner import (
        get_deferred_tool_execution as get_deferred_tool_execution,
    )
    from dex_agents.runner import (
        get_model_step_context as get_model_step_context,
    )
    from dex_agents.runner import (
        model_call_metadata as model_call_metadata,
    )
    from dex_agents.runner import (
        resolve_tool_policy as resolve_tool_policy,
    )
    from dex_agents.values import (
        FINAL_TOOL_CALL_STATUSES as FINAL_TOOL_CALL_STATUSES,
    )
    from dex_agents.values import (
        INVALID_START_SESSION_SETTINGS_REASON as INVALID_START_SESSION_SETTINGS_REASON,
    )
    from dex_agents.values import (
        MAX_SESSION_SETTINGS_BYTES as MAX_SESSION_SETTINGS_BYTES,
    )
    from dex_agents.values import (
        SESSION_SETTINGS_SIZE_TOLERANCE_BYTES as SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    )
    from dex_agents.values import (
        AgentInterruptResolution as AgentInterruptResolution,
    )
    from dex_agents.values import (
        AgentMessageChunk as AgentMessageChunk,
    )
    from dex_agents.values import (
        AgentMessageChunkRange as AgentMessageChunkRange,
    )
    from dex_agents.values import (
        AgentMessageIndex as AgentMessageIndex,
    )
    from dex_agents.values import (
        AgentSessionStartInput as AgentSessionStartInput,
    )
    from dex_agents.values import (
        AgentState as AgentState,
    )
    from dex_agents.values import (
        AgentToolCallRecord as AgentToolCallRecord,
    )
    from dex_agents.values import (
        AgentUserMessage as AgentUserMessage,
    )
    from dex_agents.values import (
        AnswerQuestionInput as AnswerQuestionInput,
    )
    from dex_agents.values import (
        CancelTurnInput as CancelTurnInput,
    )
    from dex_agents.values import (
        CompactContextInput as CompactContextInput,
    )
    from dex_agents.values import (
        ContextSummary as ContextSummary,
    )
    from dex_agents.values import (
        DeleteQueuedMessageInput as DeleteQueuedMessageInput,
    )
    from dex_agents.values import (
        ExecutePlanInput as ExecutePlanInput,
    )
    from dex_agents.values import (
        FrameworkMessage as FrameworkMessage,
    )
    from dex_agents.values import (
        ListAgentMessagesInput as ListAgentMessagesInput,
    )
    from dex_agents.values import (
        ListAgentMessagesOutput as ListAgentMessagesOutput,
    )
    from dex_agents.values import (
        MessageRole as MessageRole,
    )
    from dex_agents.values import (
        QueuedUserMessage as QueuedUserMessage,
    )
    from dex_agents.values import (
        ResolveInterruptInput as ResolveInterruptInput,
    )
    from dex_agents.values import (
        SteerUserMessageInput as SteerUserMessageInput,
    )
    from dex_agents.values import (
        ToolCallCompleted as ToolCallCompleted,
    )
    from dex_agents.values import (
        TurnSessionSettings as TurnSessionSettings,
    )
    from dex_agents.values import (
        UpdateSessionSettingsInput as UpdateSessionSettingsInput,
    )
    from dex_agents.values import (
        add_agent_usage as add_agent_usage,
    )
    from dex_agents.values import (
        empty_agent_usage as empty_agent_usage,
    )
    from dex_agents.values import (
        from_wire as from_wire,
    )
    from dex_agents.values import (
        from_wire_json as from_wire_json,
    )
    from dex_agents.values import (
        message_sequence_key as message_sequence_key,
    )
    from dex_agents.values import (
        session_settings_size as session_settings_size,
    )
    from dex_agents.values import (
        to_wire as to_wire,
    )
    from dex_agents.values import (
        to_wire_json as to_wire_json,
    )
    from dex_agents.values import (
        validate_session_settings as validate_session_settings,
    )
