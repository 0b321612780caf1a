"""The import paths and keywords of before 0.1 keep working one release, each with a warning.

Every old module path imports as the module it became (the same object), every name
that left ``dex_agents`` or ``dex_agents.session`` still imports from there as the same
object, and ``AgentHost``'s older tuning keywords and attributes map onto the option
groups; each of these warns with a ``DeprecationWarning`` that names the new path.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from datetime import timedelta
from pathlib import Path

import pytest

import dex_agents
from dex_agents import AgentHost, EmbeddedEngineOptions, SdkPatches, WorkerTuning
from dex_agents._deprecation import MOVED_MODULES
from dex_agents.runner import (
    MOVED_TO_DEX_AGENTS,
    AgentTurnContext,
    DeferredToolExecution,
    ToolExecutionResult,
    TurnCompleted,
    deprecated_aliases,
    get_model_step_context,
)
from dex_agents.values import FrameworkMessage, empty_agent_usage

SOURCE = Path(dex_agents.__file__).parent

# dex_agents.__all__ before 0.1, one name per audience mixed together.
OLD_DEX_AGENTS_NAMES = [
    "FINAL_TOOL_CALL_STATUSES",
    "INVALID_START_SESSION_SETTINGS_REASON",
    "MAX_SESSION_SETTINGS_BYTES",
    "OUTCOME_UNKNOWN_TOOL_RESULT",
    "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
    "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
    "AgentEvent",
    "AgentEventWriter",
    "AgentFrameworkRunner",
    "AgentHost",
    "AgentInterrupt",
    "AgentInterruptResolution",
    "AgentMessage",
    "AgentMessageChunk",
    "AgentMessageChunkRange",
    "AgentMessageIndex",
    "AgentPlan",
    "AgentSessionClient",
    "AgentSessionFlow",
    "AgentSessionOptionValues",
    "AgentSessionOptions",
    "AgentSessionStartInput",
    "AgentSnapshot",
    "AgentState",
    "AgentStatus",
    "AgentToolCall",
    "AgentToolCallRecord",
    "AgentToolCallStatus",
    "AgentTurnContext",
    "AgentTurnOutcome",
    "AgentUsage",
    "AgentUserMessage",
    "AnswerQuestionInput",
    "CancelTurnInput",
    "CancellationSignal",
    "CompactContextInput",
    "CompactionPolicy",
    "ContextSummary",
    "ContextSummaryRequest",
    "ContextSummaryResult",
    "DeferredToolCall",
    "DeferredToolExecution",
    "DeferredToolOutcome",
    "DeleteQueuedMessageInput",
    "ExecutePlanInput",
    "FrameworkMessage",
    "InteractionMode",
    "InterruptKind",
    "ListAgentMessagesInput",
    "ListAgentMessagesOutput",
    "MessageRole",
    "ModelCallMetadata",
    "PlanTask",
    "QuestionAnswer",
    "QueuedUserMessage",
    "ResolveInterruptInput",
    "ResolvedToolPolicy",
    "SessionEvent",
    "SessionWaitTimeoutError",
    "SteerUserMessageInput",
    "SupportsCompaction",
    "SupportsToolTasks",
    "SupportsUnfinishedTurnMessages",
    "ToolCallCompleted",
    "ToolCallsRequested",
    "ToolEffect",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolInputRequested",
    "ToolPolicy",
    "ToolTaskCancellation",
    "ToolTaskPending",
    "ToolTaskPoll",
    "ToolTaskPollOutcome",
    "ToolTaskStarted",
    "TurnCompleted",
    "TurnSessionSettings",
    "UpdateSessionSettingsInput",
    "__version__",
    "add_agent_usage",
    "build_turn_failure_note",
    "create_agent_session_flow",
    "current_deferred_tool_execution",
    "current_model_step_context",
    "default_requires_approval",
    "describe_tool_call_outcome",
    "empty_agent_usage",
    "from_wire",
    "from_wire_json",
    "get_deferred_tool_execution",
    "get_model_step_context",
    "message_sequence_key",
    "model_call_metadata",
    "resolve_tool_policy",
    "session_codec_registry",
    "session_settings_size",
    "to_wire",
    "to_wire_json",
    "validate_session_settings",
]

OLD_SESSION_NAMES = {
    "AgentSessionFlow": "dex_agents",
    "AgentSessionOptionValues": "dex_agents",
    "AgentSessionOptions": "dex_agents",
    "create_agent_session_flow": "dex_agents",
    "DEFAULT_EVENT_STREAM_CAPACITY_BYTES": "dex_agents.session._options",
    "DEFAULT_MAX_DURABLE_WAIT": "dex_agents.session._options",
    "SessionPersistence": "dex_agents.session._persistence",
}


def _new_home(name: str) -> object:
    """``name`` as the public module that has it now exports it."""
    for module_name in ("dex_agents.runner", "dex_agents.values"):
        module = importlib.import_module(module_name)
        if name in module.__all__:
            return getattr(module, name)
    return getattr(importlib.import_module("dex_agents._adapter_support"), name)


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_module_path_warns_and_is_the_module_it_became(old: str) -> None:
    new, public = MOVED_MODULES[old]
    moved = importlib.import_module(new)
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"module {old} is deprecated: use {public}"):
        module = importlib.import_module(old)
    assert module is moved
    assert sys.modules[old] is moved


def test_an_old_path_a_runner_imports_names_its_new_home() -> None:
    sys.modules.pop("dex_agents.adapter_support", None)
    with pytest.warns(DeprecationWarning, match=r"use dex_agents\.runner"):
        from dex_agents.adapter_support import get_model_step_context as old  # type: ignore[import-not-found]
    assert old is get_model_step_context


def test_every_stub_at_an_old_path_names_a_moved_module() -> None:
    for stub in sorted(SOURCE.rglob("*.pyi")):
        old = ".".join(("dex_agents", *stub.relative_to(SOURCE).with_suffix("").parts))
        assert old in MOVED_MODULES, stub
        assert f"from {MOVED_MODULES[old][0]} import *" in stub.read_text(), stub


def test_the_old_paths_are_gone_as_files() -> None:
    for old in MOVED_MODULES:
        path = SOURCE.joinpath(*old.split(".")[1:])
        assert not path.with_suffix(".py").exists(), old
        assert not (path / "__init__.py").exists(), old


@pytest.mark.parametrize("name", OLD_DEX_AGENTS_NAMES)
def test_every_name_dex_agents_exported_still_imports_from_it(name: str) -> None:
    if name in dex_agents.__all__:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            getattr(dex_agents, name)
        return
    with pytest.warns(DeprecationWarning, match=f"dex_agents.{name} is deprecated"):
        value = getattr(dex_agents, name)
    assert value is _new_home(name)


def test_the_current_twins_point_to_the_get_functions() -> None:
    with pytest.warns(DeprecationWarning, match=r"use dex_agents\.runner\.get_model_step_context"):
        current = dex_agents.current_model_step_context  # type: ignore[attr-defined]
    assert current() is None
    with pytest.raises(LookupError):
        get_model_step_context()
    module = "dex_agents_example_adapter"
    adapter_getattr = deprecated_aliases(module, MOVED_TO_DEX_AGENTS)
    with pytest.warns(DeprecationWarning, match=r"use dex_agents\.runner\.get_model_step_context"):
        assert adapter_getattr("get_model_step_context") is get_model_step_context


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'AgentTurnContexts'"):
        dex_agents.AgentTurnContexts  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.parametrize(("name", "home"), sorted(OLD_SESSION_NAMES.items()))
def test_the_session_package_names_still_import(name: str, home: str) -> None:
    import dex_agents.session

    with pytest.warns(DeprecationWarning, match=f"dex_agents.session.{name} is deprecated"):
        value = getattr(dex_agents.session, name)
    assert value is getattr(importlib.import_module(home), name)


def test_the_mcp_test_server_keeps_its_other_names() -> None:
    import dex_agents.testing._mcp_server as server
    import dex_agents.testing.mcp_server

    for name in ("HTTP_READY_LINE", "IDEMPOTENCY_META_KEY", "build_server"):
        with pytest.warns(DeprecationWarning, match=f"dex_agents.testing.mcp_server.{name} is"):
            value = getattr(dex_agents.testing.mcp_server, name)
        assert value is getattr(server, name)


# --- AgentHost --------------------------------------------------------------------------


class _Runner:
    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role="user", framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted:
        return TurnCompleted(new_messages=(), usage=empty_agent_usage())

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult("unused")


def _flows() -> dex_agents.AgentSessionFlow:
    return dex_agents.create_agent_session_flow(_Runner(), "DeprecatedKeywords")


@pytest.mark.parametrize(
    ("keyword", "value", "option", "field"),
    [
        ("embedded_engine", "thread", "engine_options", "placement"),
        ("embedded_transport", "grpc", "engine_options", "transport"),
        ("max_concurrent_tasks", 5, "worker_tuning", "max_concurrent_tasks"),
        ("registration_timeout", timedelta(seconds=7), "worker_tuning", "registration_timeout"),
        ("memoize_sdk_version", False, "sdk_patches", "memoize_sdk_version"),
        ("keep_pull_streams", False, "sdk_patches", "keep_pull_streams"),
    ],
)
def test_an_old_host_keyword_warns_and_sets_its_option_field(
    keyword: str, value: object, option: str, field: str
) -> None:
    message = rf"AgentHost\({keyword}=\.\.\.\) is deprecated: use {option}="
    with pytest.warns(DeprecationWarning, match=message) as caught:
        host = AgentHost(_flows(), **{keyword: value})  # type: ignore[arg-type]
    assert caught[0].filename == __file__  # the warning points at the caller
    assert getattr(getattr(host, option), field) == value
    with pytest.warns(DeprecationWarning, match=rf"AgentHost\.{keyword} is deprecated"):
        assert getattr(host, keyword) == value


def test_old_keywords_combine_with_the_option_groups() -> None:
    with pytest.warns(DeprecationWarning, match="is deprecated"):
        host = AgentHost(
            _flows(),
            engine_options=EmbeddedEngineOptions(transport="grpc"),
            worker_tuning=WorkerTuning(max_concurrent_tasks=4),
            embedded_engine="thread",  # type: ignore[call-arg]
            keep_pull_streams=False,  # type: ignore[call-arg]
        )
    assert host.engine_options == EmbeddedEngineOptions(placement="thread", transport="grpc")
    assert host.worker_tuning == WorkerTuning(max_concurrent_tasks=4)
    assert host.sdk_patches == SdkPatches(keep_pull_streams=False)


def test_a_misspelled_host_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_concurrent_task'"):
        AgentHost(_flows(), max_concurrent_task=4)  # type: ignore[call-arg]


# --- the engine's old SDK patch module ----------------------------------------------------


def test_the_engine_sdk_patches_module_re_exports_the_core_patches() -> None:
    script = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    import dex_local_engine.sdk_patches as old\n"
        "import dex_agents._sdk_patches as patches\n"
        "assert old.memoize_sdk_version is patches.memoize_sdk_version\n"
        "assert old.route_in_process_channels is patches.route_in_process_channels\n"
        "print([str(w.message) for w in caught if w.category is DeprecationWarning])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "dex_local_engine.sdk_patches is deprecated" in done.stdout


@pytest.mark.parametrize(
    ("module_name", "name", "home"),
    [
        ("dex_agents.values", "DecodeCache", "dex_agents.runner"),
        ("dex_agents.values", "WireValue", "dex_agents._wire"),
        ("dex_agents.runner", "JsonValue", "dex_agents._contract"),
    ],
)
def test_names_the_public_modules_had_without_exporting_still_import(
    module_name: str, name: str, home: str
) -> None:
    with pytest.warns(DeprecationWarning, match=f"{module_name}.{name} is deprecated"):
        value = getattr(importlib.import_module(module_name), name)
    assert value is getattr(importlib.import_module(home), name)
