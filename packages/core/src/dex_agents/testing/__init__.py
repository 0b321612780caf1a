"""Test support for dex-agents sessions on a real engine, with no model key.

Engines and Workers run as child processes that tests SIGKILL at exact points,
``FileGate`` and ``InvocationLog`` coordinate with code inside those processes,
and ``read_step_history`` reads the Step shape a session really ran.
"""

from dex_agents.models import ScriptedModelClient, ScriptedModelReply, ScriptedToolCall
from dex_agents.testing.engine import PrivateDexEngine
from dex_agents.testing.environment import AgentTestEnvironment
from dex_agents.testing.gates import FileGate, Invocation, InvocationLog
from dex_agents.testing.history import (
    StepHistoryEntry,
    StepMethod,
    StepOutcome,
    executed_step_types,
    read_step_history,
)
from dex_agents.testing.polling import PollTimeoutError, poll_until, poll_until_sync
from dex_agents.testing.ports import find_free_loopback_ports
from dex_agents.testing.scenario_flow import (
    SCRIPTED_FLOW_FACTORY,
    ScenarioFlowFactory,
    build_scenario_flow,
    build_scripted_flow,
    scenario_tool_policies,
)
from dex_agents.testing.scenario_tasks import (
    TASK_CANCEL_LOG_NAME,
    TASK_DONE_GATE,
    TASK_POLL_LOG_NAME,
    ScenarioTaskPoller,
)
from dex_agents.testing.script_playback import ScriptedModelFailure
from dex_agents.testing.scripted_runner import ScriptedRunner
from dex_agents.testing.scripts import (
    ALWAYS,
    DEFAULT_SCENARIO_MODEL,
    SESSION_MODEL_SETTING,
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
from dex_agents.testing.session_client import TURN_END_EVENTS, AgentSessionTestClient
from dex_agents.testing.worker_fork_server import ForkedWorker, WorkerForkServer, serve_forks
from dex_agents.testing.worker_process import (
    WORKER_READY_LINE,
    KillableWorkerProcess,
    load_flows,
    run_agent_worker_process,
)

__all__ = [
    "ALWAYS",
    "DEFAULT_SCENARIO_MODEL",
    "SCRIPTED_FLOW_FACTORY",
    "SESSION_MODEL_SETTING",
    "TASK_CANCEL_LOG_NAME",
    "TASK_DONE_GATE",
    "TASK_POLL_LOG_NAME",
    "TURN_END_EVENTS",
    "WORKER_READY_LINE",
    "AgentSessionTestClient",
    "AgentTestEnvironment",
    "FileGate",
    "ForkedWorker",
    "Invocation",
    "InvocationLog",
    "KillableWorkerProcess",
    "ModelScript",
    "ModelTurn",
    "PollTimeoutError",
    "PrivateDexEngine",
    "Scenario",
    "ScenarioFlowFactory",
    "ScenarioSession",
    "ScenarioTaskPoller",
    "ScenarioTool",
    "ScriptedModelClient",
    "ScriptedModelFailure",
    "ScriptedModelReply",
    "ScriptedRunner",
    "ScriptedToolCall",
    "StepHistoryEntry",
    "StepMethod",
    "StepOutcome",
    "ToolBehaviour",
    "ToolCallSpec",
    "ToolChoice",
    "UnexpectedToolFailure",
    "WorkerForkServer",
    "build_scenario_flow",
    "build_scripted_flow",
    "executed_step_types",
    "find_free_loopback_ports",
    "load_flows",
    "poll_until",
    "poll_until_sync",
    "read_step_history",
    "record_model_call",
    "record_summary_call",
    "run_agent_worker_process",
    "run_scenario_tool",
    "scenario_model_name",
    "scenario_tool_outcome",
    "scenario_tool_policies",
    "serve_forks",
]
