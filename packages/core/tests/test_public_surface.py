"""The public surface of dex-agents, listed, so that a change to it is deliberate.

Each public module's ``__all__`` is written out here: adding, removing or moving a
name means changing this file too. Every public name has a docstring (an attribute
docstring for a constant or an alias), and the implementation modules are private.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import dex_agents

PUBLIC_SURFACE: dict[str, list[str]] = {
    "dex_agents": [
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
    ],
    "dex_agents.runner": [
        "APPROVAL_DEADLINE_PASSED",
        "ASK_USER",
        "BUILT_IN_TOOL_NAMES",
        "BUILT_IN_TOOL_POLICY",
        "CHARACTERS_PER_TOKEN",
        "CONTEXT_SUMMARY_INSTRUCTIONS",
        "CONTEXT_SUMMARY_NOTE_HEADER",
        "DEFAULT_DECODE_CACHE_CHARACTERS",
        "DEFAULT_REJECTION_MESSAGE",
        "DEX_EFFECT_METADATA_KEY",
        "DEX_IDEMPOTENCY_KEY",
        "DEX_REQUIRES_APPROVAL_METADATA_KEY",
        "DISPLAY_ONLY_FRAMEWORK_ITEM",
        "DURABLE_WAIT",
        "MCP_IDEMPOTENCY_KEY_META_KEY",
        "MOVED_TO_DEX_AGENTS",
        "OUTCOME_UNKNOWN_TOOL_RESULT",
        "PLANNING_TURN_TOOL_REJECTED",
        "QUESTION_DECLINED",
        "TOOL_CALL_CANCELLED_BY_STEERING_RESULT",
        "TOOL_CALL_CANCELLED_BY_TURN_CANCELLATION_RESULT",
        "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
        "TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT",
        "TURN_FAILURE_NOTE_HEADER",
        "UNKNOWN_TOOL_POLICY",
        "WRITE_TODOS",
        "AgentEventWriter",
        "AgentFrameworkRunner",
        "AgentTurnContext",
        "AgentTurnOutcome",
        "BuiltInToolDefinition",
        "CancellationSignal",
        "ContextSummaryRequest",
        "ContextSummaryResult",
        "CutItem",
        "DecodeCache",
        "DeferredToolCall",
        "DeferredToolExecution",
        "DeferredToolOutcome",
        "ModelCallMetadata",
        "QuestionAnswer",
        "QuestionResolution",
        "ResolvedToolPolicy",
        "RunnerDefectError",
        "StartedToolTask",
        "SupportsCompaction",
        "SupportsToolTasks",
        "SupportsUnfinishedTurnMessages",
        "ToolCallAnswer",
        "ToolCallDisplay",
        "ToolCallsRequested",
        "ToolExecutionError",
        "ToolExecutionResult",
        "ToolInputRequested",
        "ToolPolicy",
        "ToolTaskCancellation",
        "ToolTaskForwarding",
        "ToolTaskPending",
        "ToolTaskPoll",
        "ToolTaskPollOutcome",
        "ToolTaskPollers",
        "ToolTaskStarted",
        "ToolTasksOption",
        "TurnCompleted",
        "VersionMismatchWarning",
        "answer_tool_call",
        "build_plan_note",
        "build_turn_failure_note",
        "builtin_tool_definitions",
        "call_policy",
        "check_planning_tool_choice",
        "check_model_tool_call_id",
        "check_tool_task_poller",
        "context_summary_note",
        "counted_model_step_outcome",
        "cut_points",
        "declared_approval_in",
        "declared_effect_in",
        "decode_model_call_count",
        "default_requires_approval",
        "deprecated_aliases",
        "describe_tool_call_outcome",
        "enabled_builtin_tool_definitions",
        "encode_model_call_count",
        "estimate_stored_tokens",
        "estimate_text_tokens",
        "forced_tool_choice_refusal",
        "get_deferred_tool_execution",
        "get_model_step_context",
        "is_anthropic_model",
        "is_display_only",
        "known_tool",
        "mcp_idempotency_meta",
        "model_call_limit_result",
        "model_call_metadata",
        "plan_execution_user_text",
        "resolve_declared_tool_policy",
        "resolve_tool_policy",
        "response_messages",
        "returning_started_task",
        "select_cut",
        "serving_deferred_tool_execution",
        "serving_model_step",
        "single_response_usage",
        "start_tool_task",
        "summarized_through",
        "summary_input_text",
        "supports_plan_mode",
        "supports_tool_task_polling",
        "tool_arguments_object",
        "tool_declaration_metadata",
        "thinking_enabled",
        "tool_task_started_in",
        "unknown_tool_error",
        "validate_built_in_tool_names",
        "warn_if_off_version_line",
    ],
    "dex_agents.values": [
        "FINAL_TOOL_CALL_STATUSES",
        "INVALID_START_SESSION_SETTINGS_REASON",
        "MAX_SESSION_SETTINGS_BYTES",
        "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
        "SESSION_VALUE_DECODE_CACHE",
        "STORED_MESSAGE_DECODE_CACHE",
        "AgentEvent",
        "AgentInterrupt",
        "AgentInterruptResolution",
        "AgentMessage",
        "AgentMessageChunk",
        "AgentMessageChunkRange",
        "AgentMessageIndex",
        "AgentPlan",
        "AgentSessionStartInput",
        "AgentSnapshot",
        "AgentState",
        "AgentStatus",
        "AgentToolCall",
        "AgentToolCallRecord",
        "AgentToolCallStatus",
        "AgentUsage",
        "AgentUserMessage",
        "AnswerQuestionInput",
        "CancelTurnInput",
        "CompactContextInput",
        "ContextSummary",
        "DeleteQueuedMessageInput",
        "ExecutePlanInput",
        "FrameworkMessage",
        "InteractionMode",
        "InterruptKind",
        "ListAgentMessagesInput",
        "ListAgentMessagesOutput",
        "MessageRole",
        "PlanExecutionRequest",
        "PlanTask",
        "QueuedUserMessage",
        "ResolveInterruptInput",
        "SessionSettingsValue",
        "SteerUserMessageInput",
        "ToolCallCancellation",
        "ToolCallCompleted",
        "ToolEffect",
        "TurnCancellationRequest",
        "TurnControlRequest",
        "TurnReplySequence",
        "TurnSessionSettings",
        "UpdateSessionSettingsInput",
        "add_agent_usage",
        "decode_session_settings",
        "empty_agent_usage",
        "encode_session_settings",
        "format_timestamp",
        "from_wire",
        "from_wire_json",
        "message_sequence_key",
        "parse_timestamp",
        "plan_execution_key",
        "session_codec_registry",
        "session_settings_size",
        "to_wire",
        "to_wire_json",
        "validate_session_settings",
    ],
    "dex_agents.testing": [
        "ALWAYS",
        "DEFAULT_SCENARIO_MODEL",
        "MODEL_CALLS_LOG",
        "MODEL_CALL_LOG_NAME",
        "SCENARIO_MCP_SERVER",
        "SCRIPTED_FLOW_FACTORY",
        "SESSION_CODECS_VARIABLE",
        "SESSION_MODEL_SETTING",
        "SUMMARY_CALL_LOG_NAME",
        "STATE_DIRECTORY_VARIABLE",
        "TASK_CANCEL_LOG_NAME",
        "TASK_DONE_GATE",
        "TASK_POLL_LOG_NAME",
        "TOOL_RUNS_LOG",
        "TURN_END_EVENTS",
        "WORKER_READY_LINE",
        "AgentSessionTestClient",
        "AgentTestEnvironment",
        "FileGate",
        "ForkedWorker",
        "HttpAnswer",
        "Invocation",
        "InvocationLog",
        "KillableWorkerProcess",
        "ModelScript",
        "ModelTurn",
        "PollTimeoutError",
        "PrivateDexEngine",
        "ReadmeExample",
        "RecordedRequest",
        "RecordingEventWriter",
        "RunnerDriver",
        "Scenario",
        "ScenarioFlowFactory",
        "ScenarioMcpTools",
        "ScenarioSession",
        "ScenarioTaskPoller",
        "ScenarioTool",
        "ScriptedHttpEndpoint",
        "ScriptedModelClient",
        "ScriptedModelFailure",
        "ScriptedModelReply",
        "ScriptedRunner",
        "ScriptedToolCall",
        "StepHistoryEntry",
        "StepMethod",
        "StepOutcome",
        "TextWriter",
        "ToolBehaviour",
        "ToolCallSpec",
        "ToolChoice",
        "UnexpectedToolFailure",
        "WorkerForkServer",
        "build_scenario_flow",
        "build_scripted_flow",
        "chat_completion_chunk",
        "executed_step_types",
        "find_free_loopback_ports",
        "load_flows",
        "load_scenario_factory",
        "loopback_only",
        "markdown_examples",
        "play_scripted_model_call",
        "play_scripted_summary",
        "poll_until",
        "poll_until_sync",
        "read_step_history",
        "read_stored_attributes",
        "readme_examples",
        "record_model_call",
        "record_summary_call",
        "run_agent_worker_process",
        "run_readme_example",
        "run_scenario_tool",
        "scenario_mcp_tools",
        "scenario_model_name",
        "scenario_tool_outcome",
        "scenario_tool_policies",
        "scripted_answer_text",
        "scripted_tool_call_id",
        "scripted_turn_number",
        "serve_forks",
        "sse_body",
        "stored_attribute_bytes",
        "summary_request",
        "with_scenario_mcp_tools",
    ],
    "dex_agents.testing.mcp_server": [
        "McpHttpTestServer",
        "StdioAndHttpMcpServers",
        "main",
        "read_calls",
    ],
    "dex_agents.testing.mcp_reference": [
        "GarbageHttpServer",
        "HungHttpServer",
        "ReferenceServers",
        "garbage_stdio_server",
        "hung_stdio_server",
        "time_server",
    ],
    "dex_agents.models": [
        "AnthropicModelClient",
        "DiscardingStreamSink",
        "LiteLLMModelClient",
        "ModelCallMetadata",
        "ModelClient",
        "ModelClientError",
        "ModelOutputItem",
        "ModelRequest",
        "ModelResponse",
        "ModelSettings",
        "ModelStreamSink",
        "ModelToolCall",
        "ModelToolDefinition",
        "OpenAIChatModelClient",
        "OpenAIResponsesModelClient",
        "RecordingStreamSink",
        "ScriptedModelClient",
        "ScriptedModelReply",
        "ScriptedModelScript",
        "ScriptedToolCall",
        "ToolResultItem",
        "TranscriptItem",
        "UserTextItem",
        "transcript_item_from_json",
        "transcript_item_to_text",
    ],
    "dex_agents.ui_stream": [
        "AGENT_RESUME_TOKEN_HEADER_NAME",
        "MAX_APPROVAL_DECISIONS",
        "STEP_ONLY_MESSAGE_FIELDS",
        "STEP_ONLY_TOOL_CALL_FIELDS",
        "UI_MESSAGE_STREAM_HEADERS",
        "AgentEventStreamSnapshot",
        "AgentSessionUIMessages",
        "AgentToolApprovalResponse",
        "AgentUIMessageStream",
        "Authorize",
        "FinishReason",
        "ResumeTokenRejectedError",
        "SessionAccess",
        "SessionSource",
        "UIPartMapper",
        "agent_chat_routes",
        "agent_event_routes",
        "agent_event_sse_response",
        "agent_ui_message_stream_response",
        "convert_agent_event_stream_snapshot_to_json",
        "convert_agent_snapshot_to_json",
        "convert_agent_snapshot_to_ui_messages",
        "encode_ui_resume_token_for_tests",
        "open_agent_event_sse_stream",
        "open_agent_ui_message_stream",
        "read_agent_event_stream_snapshot",
        "read_agent_session_ui_messages",
        "read_agent_tool_approval_responses",
        "resolve_agent_tool_approval",
        "resolve_agent_tool_approvals_with_ui_message_stream",
        "send_agent_user_message_with_ui_message_stream",
    ],
    "dex_agents.tracing": [
        "GEN_AI_SEMANTIC_CONVENTIONS_SCHEMA_URLS",
        "INSTRUMENTATION_SCOPE",
        "SemanticConventionsVersion",
        "SessionTracer",
        "StepIdentity",
        "TracingOptions",
        "current_traceparent",
    ],
}

# Modules without an underscore besides the ones above: subpackages whose surface is
# their helpers' (Stepwise, MCP), the commands, and the package's own entry points.
OTHER_PUBLIC_MODULES = {
    "dex_agents.mcp",
    "dex_agents.session",
    "dex_agents.stepwise",
    "dex_agents.testing.fault_injection",
    "dex_agents.testing.kill_fuzz",
    "dex_agents.testing.scenario_worker",
    "dex_agents.testing.worker_main",
}
# Subpackages their own helpers lay out (issue 32: runner layout, MCP split).
LAID_OUT_ELSEWHERE = ("dex_agents.mcp.", "dex_agents.stepwise.")

SOURCE = Path(dex_agents.__file__).parent


@pytest.mark.parametrize("module_name", sorted(PUBLIC_SURFACE))
def test_each_public_module_exports_exactly_the_listed_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == sorted(PUBLIC_SURFACE[module_name])
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.{name} is listed but missing"


def test_the_application_surface_stays_small() -> None:
    # 32 since issue 33: AuthenticationError, HealthProbes and StepsAbandoned sit with
    # AgentHost and its option groups, which a deployment uses together.
    assert len(dex_agents.__all__) <= 32


def test_the_implementation_modules_are_private() -> None:
    public: set[str] = set()
    for info in pkgutil.walk_packages([str(SOURCE)], "dex_agents."):
        if info.name.startswith(LAID_OUT_ELSEWHERE):
            continue
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            public.add(info.name)
    assert public == (set(PUBLIC_SURFACE) | OTHER_PUBLIC_MODULES) - {"dex_agents"}


def _attribute_docstring(module_name: str, name: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``name`` is assigned in ``module_name`` (or the module it is imported from)
    with a string literal right after the assignment."""
    if module_name in seen:
        return False
    spec = importlib.util.find_spec(module_name)
    assert spec is not None
    assert spec.origin is not None
    body = ast.parse(Path(spec.origin).read_text()).body
    for index, statement in enumerate(body):
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            following = body[index + 1] if index + 1 < len(body) else None
            return (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
                and bool(following.value.value.strip())
            )
        if isinstance(statement, ast.ImportFrom) and statement.module:
            for alias in statement.names:
                if (alias.asname or alias.name) == name:
                    return _attribute_docstring(statement.module, alias.name, seen | {module_name})
    return False


def _documented(module_name: str, name: str) -> bool:
    value: Any = getattr(importlib.import_module(module_name), name)
    if inspect.isclass(value):
        doc = vars(value).get("__doc__")
        if dataclasses.is_dataclass(value) and doc and doc.startswith(f"{value.__name__}("):
            return False  # the signature dataclasses write when a class has no docstring
        return bool(doc and doc.strip())
    if isinstance(value, types.FunctionType | types.ModuleType):
        return bool(value.__doc__ and value.__doc__.strip())
    return _attribute_docstring(module_name, name)


@pytest.mark.parametrize("module_name", sorted(PUBLIC_SURFACE))
def test_every_public_name_has_a_docstring(module_name: str) -> None:
    undocumented = [
        name for name in PUBLIC_SURFACE[module_name] if not _documented(module_name, name)
    ]
    assert undocumented == []


@pytest.mark.parametrize(
    "option",
    [
        dex_agents.EmbeddedEngineOptions,
        dex_agents.WorkerTuning,
        dex_agents.SdkPatches,
        dex_agents.HealthProbes,
    ],
)
def test_every_host_option_field_has_a_docstring(option: type[object]) -> None:
    source = ast.parse(inspect.getsource(option)).body[0]
    assert isinstance(source, ast.ClassDef)
    documented: set[str] = set()
    for index, statement in enumerate(source.body[:-1]):
        following = source.body[index + 1]
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            documented.add(statement.target.id)
    assert documented == {field.name for field in dataclasses.fields(option)}  # type: ignore[arg-type]


def test_public_exceptions_name_their_public_module() -> None:
    # Tracebacks and Dex's recorded error types show type(error).__module__.
    for module_name, names in PUBLIC_SURFACE.items():
        module = importlib.import_module(module_name)
        for name in names:
            value = getattr(module, name)
            if inspect.isclass(value) and issubclass(value, BaseException):
                assert value.__module__ in PUBLIC_SURFACE, f"{module_name}.{name}"
                assert getattr(sys.modules[value.__module__], name) is value
