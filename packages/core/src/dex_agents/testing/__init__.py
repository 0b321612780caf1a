"""The testing kit: dex-agents sessions on a real engine, with no model key.

Everything a test author imports is here, flat. ``PrivateDexEngine`` runs an engine
in a child process, ``AgentTestEnvironment`` hosts Flows on it, and Workers run as
child processes (``KillableWorkerProcess``, ``WorkerForkServer``) that tests SIGKILL
at exact points; ``FileGate`` and ``InvocationLog`` coordinate with code inside those
processes, and ``read_step_history`` reads the Step shape a session really ran. The
scenario kit (``Scenario``, ``ModelScript``, ``ScenarioTool``, ...) scripts a model and
its tools for any runner, ``RunnerDriver`` drives a runner with no engine at all, and
``run_readme_example`` runs a documentation code block as a test.

The MCP parts need the ``mcp`` extra and have public modules of their own:
``dex_agents.testing.mcp_server`` (the MCP test server) and
``dex_agents.testing.mcp_reference`` (the official reference servers).
Commands: ``python -m dex_agents.testing.worker_main``, ``.scenario_worker``,
``.mcp_server``, ``.kill_fuzz`` and ``.fault_injection``.
"""

from dex_agents.models import ScriptedModelClient, ScriptedModelReply, ScriptedToolCall
from dex_agents.testing._attributes import read_stored_attributes, stored_attribute_bytes
from dex_agents.testing._compaction import summary_request
from dex_agents.testing._engine import PrivateDexEngine
from dex_agents.testing._environment import AgentTestEnvironment
from dex_agents.testing._gates import FileGate, Invocation, InvocationLog
from dex_agents.testing._history import (
    StepHistoryEntry,
    StepMethod,
    StepOutcome,
    executed_step_types,
    read_step_history,
)
from dex_agents.testing._http_endpoint import (
    HttpAnswer,
    RecordedRequest,
    ScriptedHttpEndpoint,
    chat_completion_chunk,
    loopback_only,
    sse_body,
)
from dex_agents.testing._mcp_scenarios import (
    SCENARIO_MCP_SERVER,
    ScenarioMcpTools,
    scenario_mcp_tools,
    with_scenario_mcp_tools,
)
from dex_agents.testing._polling import PollTimeoutError, poll_until, poll_until_sync
from dex_agents.testing._ports import find_free_loopback_ports
from dex_agents.testing._readme import (
    ReadmeExample,
    markdown_examples,
    readme_examples,
    run_readme_example,
)
from dex_agents.testing._runner_driver import RecordingEventWriter, RunnerDriver
from dex_agents.testing._scenario_flow import (
    SCRIPTED_FLOW_FACTORY,
    STATE_DIRECTORY_VARIABLE,
    ScenarioFlowFactory,
    build_scenario_flow,
    build_scripted_flow,
    load_scenario_factory,
    scenario_tool_policies,
)
from dex_agents.testing._scenario_tasks import (
    TASK_CANCEL_LOG_NAME,
    TASK_DONE_GATE,
    TASK_POLL_LOG_NAME,
    ScenarioTaskPoller,
)
from dex_agents.testing._script_playback import (
    ScriptedModelFailure,
    TextWriter,
    play_scripted_model_call,
    play_scripted_summary,
    scripted_answer_text,
    scripted_tool_call_id,
    scripted_turn_number,
)
from dex_agents.testing._scripted_runner import ScriptedRunner
from dex_agents.testing._scripts import (
    ALWAYS,
    DEFAULT_SCENARIO_MODEL,
    MODEL_CALL_LOG_NAME,
    MODEL_CALLS_LOG,
    SESSION_MODEL_SETTING,
    SUMMARY_CALL_LOG_NAME,
    TOOL_RUNS_LOG,
    ModelScript,
    ModelTurn,
    Scenario,
    ScenarioSession,
    ScenarioTool,
    ToolBehaviour,
    ToolCallSpec,
    ToolChoice,
    UnexpectedToolFailure,
    record_model_call,
    record_summary_call,
    run_scenario_tool,
    scenario_model_name,
    scenario_tool_outcome,
)
from dex_agents.testing._session_client import TURN_END_EVENTS, AgentSessionTestClient
from dex_agents.testing._worker_fork_server import ForkedWorker, WorkerForkServer, serve_forks
from dex_agents.testing._worker_process import (
    SESSION_CODECS_VARIABLE,
    WORKER_READY_LINE,
    KillableWorkerProcess,
    load_flows,
    run_agent_worker_process,
)

__all__ = [
    "ALWAYS",
    "DEFAULT_SCENARIO_MODEL",
    "MODEL_CALLS_LOG",
    "MODEL_CALL_LOG_NAME",
    "SCENARIO_MCP_SERVER",
    "SCRIPTED_FLOW_FACTORY",
    "SESSION_CODECS_VARIABLE",
    "SESSION_MODEL_SETTING",
    "STATE_DIRECTORY_VARIABLE",
    "SUMMARY_CALL_LOG_NAME",
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
]
