"""Framework-neutral model scripts and scenario tools.

A script says what the *model* does, response by response; a scenario tool says
what a tool does when it runs. The scripted core runner plays them directly, and
each adapter turns them into its framework's own test model and tools, so one
scenario checks every runner. Both travel to Worker child processes as JSON in
the scenario's state directory.

A script is a flat list of model responses. A response without tool calls ends
the user turn (so does one that always fails), so turn ``n`` of the session
plays the ``n``-th run of responses up to and including such a response.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

from dex_agents._compaction import CompactionPolicy
from dex_agents._contract import ToolExecutionError, ToolInputRequested
from dex_agents._tool_task_routing import StartedToolTask
from dex_agents._values import ToolEffect
from dex_agents.testing._gates import FileGate, InvocationLog

ALWAYS = 1_000_000
"""``fail_attempts`` value for a model response or tool that fails on every attempt."""

TOOL_RUNS_LOG = "tool-runs.jsonl"
"""The file in a scenario's state directory that logs every tool run."""
MODEL_CALLS_LOG = "model-calls.jsonl"
"""The file in a scenario's state directory that logs every model call."""
SCENARIO_FILE = "scenario.json"

DEFAULT_SCENARIO_MODEL = "scripted-default"
"""Name of a scenario factory's default scripted model: the one a session without a
``"model"`` setting (or naming none of ``ScenarioSession.session_models``) uses."""
SESSION_MODEL_SETTING = "model"
"""The session settings key that names a scenario's model (``{"model": "scripted-large"}``)."""

ToolChoice = Literal["auto", "required", "none"]
"""What a model call was told about calling tools, as a scripted model records it:
``required`` when it must call a tool (any offered tool, or one named tool)."""


@dataclass(frozen=True)
class ToolCallSpec:
    """One tool call in a model response; ``tool_call_id`` defaults to ``call-<p>-<i>``."""

    tool_name: str
    arguments: Mapping[str, Any] = field(default_factory=dict[str, Any])
    tool_call_id: str | None = None

    def __post_init__(self) -> None:
        if not self.tool_name:
            raise ValueError("ToolCallSpec.tool_name must not be empty")
        if self.tool_call_id is not None and (not self.tool_call_id or "/" in self.tool_call_id):
            raise ValueError("ToolCallSpec.tool_call_id must be non-empty and contain no '/'")


@dataclass(frozen=True)
class ModelTurn:
    """One model response.

    * ``tool_calls``: the calls the model asks for (the turn continues after them).
    * ``text``: the answer text; with ``text_from_tool_results`` the model answers
      with every tool result it saw in this turn, one ``name: result`` line each.
    * ``fail_attempts``: the model call raises an unexpected error on its first
      ``n`` attempts (``ALWAYS`` for every attempt, which fails the turn).
    * ``gate``: a ``FileGate`` name the model call passes before it answers, after
      writing ``text_before_gate`` as a live text delta when set.
    * ``last_of_turn``: the user steers or cancels the turn after this response, so the
      next response belongs to the next turn.
    """

    text: str | None = None
    tool_calls: Sequence[ToolCallSpec] = ()
    text_from_tool_results: bool = False
    fail_attempts: int = 0
    gate: str | None = None
    text_before_gate: str | None = None
    last_of_turn: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.fail_attempts < 0:
            raise ValueError("ModelTurn.fail_attempts must not be negative")
        if self.tool_calls and (self.text_from_tool_results or self.text is not None):
            raise ValueError("a ModelTurn asks for tool calls or answers with text, not both")
        if self.gate is not None:
            FileGate(".", self.gate)  # validates the name

    @property
    def ends_turn(self) -> bool:
        return not self.tool_calls or self.fail_attempts >= ALWAYS or self.last_of_turn


@dataclass(frozen=True)
class ModelScript:
    """The model responses of a whole session, in order; see the module docstring."""

    responses: Sequence[ModelTurn]

    def __post_init__(self) -> None:
        object.__setattr__(self, "responses", tuple(self.responses))
        if not self.responses:
            raise ValueError("a ModelScript needs at least one response")

    def user_turns(self) -> list[list[ModelTurn]]:
        """The responses grouped by user turn (``turn-1`` first)."""
        turns: list[list[ModelTurn]] = [[]]
        for response in self.responses:
            turns[-1].append(response)
            if response.ends_turn:
                turns.append([])
        return [turn for turn in turns if turn]

    def response_for(self, turn_number: int, position: int) -> ModelTurn:
        """Response ``position`` (zero-based) of user turn ``turn_number`` (one-based)."""
        turns = self.user_turns()
        if not 1 <= turn_number <= len(turns):
            raise LookupError(
                f"the model script has {len(turns)} user turns and no turn-{turn_number}"
            )
        responses = turns[turn_number - 1]
        if not 0 <= position < len(responses):
            raise LookupError(
                f"the model script's turn-{turn_number} has {len(responses)} responses and no"
                f" response {position + 1}"
            )
        return responses[position]


class ToolBehaviour(StrEnum):
    """What a scenario tool does once it runs (after its gate, if any)."""

    RETURNS = "returns"
    """Returns ``text`` (formatted with the call's arguments)."""
    RAISES_TOOL_ERROR = "raises_tool_error"
    """Raises ``ToolExecutionError(text)``: a failure the model sees, not retried."""
    RAISES_UNEXPECTED = "raises_unexpected"
    """Raises ``RuntimeError(text)``: an unexpected failure, retried by effect."""
    STARTS_TASK = "starts_task"
    """Raises ``StartedToolTask``: a tool task that ``ScenarioTaskPoller`` completes with
    ``text`` once the ``TASK_DONE_GATE`` gate is released."""


class UnexpectedToolFailure(RuntimeError):
    """The unexpected error a scenario tool raises."""

    __module__ = "dex_agents.testing"  # the public import path, as tracebacks show it


@dataclass(frozen=True)
class ScenarioTool:
    """A tool as a scenario describes it, independent of any framework.

    Every run is recorded in the state directory's ``InvocationLog`` before
    anything else, so a test counts real runs across Worker restarts. The tool
    then passes ``gate`` when set, raises an unexpected error on its first
    ``fail_attempts`` attempts, and finally acts as ``behaviour`` says.

    With ``question`` the tool first asks the user (``ToolInputRequested`` with
    ``choices`` and ``continuation``) and runs only once it has an answer, which
    ``text`` may use as ``{answer}``; such a tool runs through ``scenario_tool_outcome``.
    """

    name: str
    effect: ToolEffect
    description: str = "A scenario tool."
    behaviour: ToolBehaviour = ToolBehaviour.RETURNS
    text: str = "ok"
    requires_approval: bool | None = None
    gate: str | None = None
    fail_attempts: int = 0
    question: str | None = None
    choices: tuple[str, ...] | None = None
    """The choices of ``question`` (``None``: free text only)."""
    continuation: str | None = None
    """The continuation of ``question``; the rerun reads it back in
    ``tool_call.input_continuation`` and records it."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("ScenarioTool.name must not be empty")
        if self.question is not None and not self.question.strip():
            raise ValueError("ScenarioTool.question must not be blank")
        if self.choices is not None:
            object.__setattr__(self, "choices", tuple(self.choices))
            if self.question is None:
                raise ValueError("ScenarioTool.choices needs a question")
        if self.continuation is not None and self.question is None:
            raise ValueError("ScenarioTool.continuation needs a question")
        if self.fail_attempts < 0:
            raise ValueError("ScenarioTool.fail_attempts must not be negative")
        if self.gate is not None:
            FileGate(".", self.gate)


async def run_scenario_tool(
    tool: ScenarioTool,
    arguments: str,
    *,
    state_directory: Path,
    idempotency_key: str | None,
    attempt: int,
) -> str:
    """Run ``tool`` as the scenario describes; adapters call this from their tool function.

    ``arguments`` is the JSON text the model produced. A tool with a ``question``
    needs ``scenario_tool_outcome`` instead, which can ask it.
    """
    if tool.question is not None:
        raise TypeError(
            f"scenario tool {tool.name!r} asks the user first; call scenario_tool_outcome(...,"
            " input_answers=call.input_answers) and return its ToolInputRequested to the session"
        )
    outcome = await scenario_tool_outcome(
        tool,
        arguments,
        state_directory=state_directory,
        idempotency_key=idempotency_key,
        attempt=attempt,
    )
    assert isinstance(outcome, str)
    return outcome


async def scenario_tool_outcome(
    tool: ScenarioTool,
    arguments: str,
    *,
    state_directory: Path,
    idempotency_key: str | None,
    attempt: int,
    input_answers: Sequence[str] = (),
    input_continuation: str | None = None,
) -> str | ToolInputRequested:
    """Run ``tool`` like ``run_scenario_tool``, asking its ``question`` first.

    Without ``input_answers`` a tool with a question returns ``ToolInputRequested``
    and records no run; the session asks the user and runs the call again with
    the answers (``DeferredToolExecution.input_answers``) and the question's
    continuation (``DeferredToolExecution.tool_call.input_continuation``), which
    the run records as ``input_answers`` and ``input_continuation``.
    """
    try:
        parsed: object = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError as error:
        raise ToolExecutionError(f"arguments are not valid JSON: {error}") from error
    if not isinstance(parsed, dict):
        raise ToolExecutionError("arguments must be a JSON object")
    values = cast(dict[str, Any], parsed)
    if tool.question is not None and not input_answers:
        return ToolInputRequested(
            tool.question, choices=tool.choices, continuation=tool.continuation
        )
    details: dict[str, Any] = {"arguments": values, "attempt": attempt}
    if tool.question is not None:
        details["input_answers"] = list(input_answers)
        details["input_continuation"] = input_continuation
    InvocationLog(state_directory / TOOL_RUNS_LOG).record(
        tool.name, idempotency_key=idempotency_key, details=details
    )
    if tool.gate is not None:
        await FileGate(state_directory, tool.gate).pass_through_async()
    if attempt <= tool.fail_attempts:
        raise UnexpectedToolFailure(f"{tool.name} failed on attempt {attempt}")
    if input_answers:
        values = {**values, "answer": input_answers[-1]}
    text = tool.text.format(**values) if values else tool.text
    if tool.behaviour is ToolBehaviour.RAISES_TOOL_ERROR:
        raise ToolExecutionError(text)
    if tool.behaviour is ToolBehaviour.RAISES_UNEXPECTED:
        raise UnexpectedToolFailure(text)
    if tool.behaviour is ToolBehaviour.STARTS_TASK:
        raise StartedToolTask(f"task-{idempotency_key or tool.name}", 1)
    return text


MODEL_CALL_LOG_NAME = "model"
"""The ``InvocationLog`` name of a scenario's model calls."""
SUMMARY_CALL_LOG_NAME = "summary"
"""``model-calls.jsonl`` entries of summary calls (``play_scripted_summary``)."""


def record_model_call(
    state_directory: Path,
    *,
    turn_id: str,
    position: int,
    attempt: int,
    history: Sequence[str],
    tool_results: Mapping[str, str],
    model: str | None = None,
    offered_tools: Sequence[str] | None = None,
    tool_choice: ToolChoice | None = None,
) -> None:
    """Record one scripted model call, before it answers, in ``model-calls.jsonl``.

    Every runner's scripted model calls this, so the conformance suite can count
    model calls (including ones a SIGKILL cut short) and see what each call read:
    ``history`` is one text per stored message the call was given (any readable
    form that includes the message text or tool output), ``tool_results`` the
    result text per tool call ID that the call received for the previous response.
    ``model`` names the scripted model that made the call (``DEFAULT_SCENARIO_MODEL``
    or one of ``ScenarioSession.session_models``), ``offered_tools`` the names of the
    tools it offered, in any order, and ``tool_choice`` what it was told about calling
    them; ``None`` leaves a field out (the scenarios that read it then fail, saying so).
    ``play_scripted_model_call`` calls it for you; call one of the two per model call.
    """
    if type(position) is not int or position < 0:
        raise TypeError(
            f"record_model_call(position=) is how many model calls this turn already made"
            f" (0 for the first), got {position!r}"
        )
    if type(attempt) is not int or attempt < 1:
        raise TypeError(
            f"record_model_call(attempt=) is the RunModel attempt (turn.attempt, from 1),"
            f" got {attempt!r}"
        )
    lines = cast(Sequence[object], history)
    if isinstance(history, (str, bytes)) or not all(isinstance(line, str) for line in lines):
        raise TypeError(
            "record_model_call(history=) is a list of texts, one per stored message the model"
            f" call was given, got {type(history).__name__}"
        )
    results = cast(object, tool_results)
    if not isinstance(results, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str)
        for key, value in cast(Mapping[object, object], results).items()
    ):
        raise TypeError(
            "record_model_call(tool_results=) maps each tool call ID of the previous response"
            " to the result text this call received ({} for none)"
        )
    if model is not None and (not isinstance(model, str) or not model):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"record_model_call(model=) names the scripted model, got {model!r}")
    offered = cast(object, offered_tools)
    if offered is not None and (
        isinstance(offered, (str, bytes))
        or not isinstance(offered, Sequence)
        or not all(isinstance(name, str) for name in cast(Sequence[object], offered))
    ):
        raise TypeError(
            "record_model_call(offered_tools=) is a list of the tool names the call offered"
        )
    if tool_choice is not None and tool_choice not in ("auto", "required", "none"):
        raise TypeError(
            "record_model_call(tool_choice=) is 'auto', 'required' (the call must call a"
            f" tool) or 'none', got {tool_choice!r}"
        )
    details: dict[str, Any] = {
        "turn_id": turn_id,
        "position": position,
        "attempt": attempt,
        "history": list(history),
        "tool_results": dict(tool_results),
    }
    if model is not None:
        details["model"] = model
    if offered_tools is not None:
        details["offered_tools"] = sorted(offered_tools)
    if tool_choice is not None:
        details["tool_choice"] = tool_choice
    InvocationLog(state_directory / MODEL_CALLS_LOG).record(MODEL_CALL_LOG_NAME, details=details)


def record_summary_call(state_directory: Path, *, model: str | None) -> None:
    """Record one scripted summary call (``summarize_context``) and the model that made it."""
    InvocationLog(Path(state_directory) / MODEL_CALLS_LOG).record(
        SUMMARY_CALL_LOG_NAME, details={"model": model}
    )


def scenario_model_name(session_settings: Mapping[str, Any], session_models: Sequence[str]) -> str:
    """The scripted model a session's settings choose: the one of ``session_models`` that
    ``session_settings["model"]`` names, else ``DEFAULT_SCENARIO_MODEL``.

    A scenario factory with per-session models builds one scripted model per name of
    ``ScenarioSession.session_models`` plus the default, and maps the settings to one
    of them the way its framework lets an application choose (``resolve_model``).
    """
    chosen = session_settings.get(SESSION_MODEL_SETTING)
    if isinstance(chosen, str) and chosen in session_models:
        return chosen
    return DEFAULT_SCENARIO_MODEL


class ScenarioStorageOptions(TypedDict):
    """The compaction and message storage session options of a scenario, by their names."""

    compaction: CompactionPolicy | None
    retained_message_limit: int | None
    message_window_size: int
    message_chunk_size: int


@dataclass(frozen=True)
class ScenarioSession:
    """Session options a scenario asks the factory for, and the Flow type to register."""

    flow_type: str
    interrupt_deadline: timedelta | None = None
    built_in_tools: tuple[str, ...] = ()
    plan_mode_enabled: bool = False
    question_supersedes_later_calls: bool = False
    """Ask for the session option of the same name (a question ends its response)."""
    compaction_context_window_tokens: int | None = None
    """Ask for a ``CompactionPolicy`` with this window (factories of compacting runners)."""
    retained_message_limit: int | None = 1000
    message_window_size: int = 64
    message_chunk_size: int = 32
    summary_gate: str | None = None
    """A ``FileGate`` every ``summarize_context`` call passes first."""
    planning_tool_choice: Literal["auto", "required"] = "auto"
    """Ask for the runner's option of the same name: ``required`` forces a tool call
    (``write_todos``) on a planning turn's first model call while no draft exists."""
    session_models: tuple[str, ...] = ()
    """Names of scripted models the factory builds besides ``DEFAULT_SCENARIO_MODEL``;
    each model call uses the one the turn's session settings name
    (``scenario_model_name``)."""

    mcp_server_url: str | None = None
    """The Streamable HTTP URL of the suite's MCP test server (``dex_agents.testing.mcp_server``);
    the factory offers its tools through its MCP wrapping (``scenario_mcp_tools``)."""
    tracing: bool = False
    """The scenario's Worker installs an OpenTelemetry SDK ``TracerProvider`` as the global
    provider before it builds the Flow, as an application that turns tracing on does."""

    def __post_init__(self) -> None:
        if not self.flow_type:
            raise ValueError("ScenarioSession.flow_type must not be empty")
        if self.planning_tool_choice not in ("auto", "required"):
            raise ValueError("ScenarioSession.planning_tool_choice must be 'auto' or 'required'")
        object.__setattr__(self, "session_models", tuple(self.session_models))
        if DEFAULT_SCENARIO_MODEL in self.session_models or not all(self.session_models):
            raise ValueError(
                f"ScenarioSession.session_models are non-empty names other than"
                f" {DEFAULT_SCENARIO_MODEL!r}"
            )

    def storage_options(self) -> ScenarioStorageOptions:
        """The compaction and message storage session options this scenario asks for, as
        keywords of a ``create_<framework>_session_flow`` factory."""
        window = self.compaction_context_window_tokens
        return {
            "compaction": CompactionPolicy(context_window_tokens=window) if window else None,
            "retained_message_limit": self.retained_message_limit,
            "message_window_size": self.message_window_size,
            "message_chunk_size": self.message_chunk_size,
        }


@dataclass(frozen=True)
class Scenario:
    """Everything a Worker child needs to rebuild a scenario's Flow."""

    script: ModelScript
    tools: Sequence[ScenarioTool]
    session: ScenarioSession

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", tuple(self.tools))
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"scenario tool names must be unique: {names}")

    def tool(self, name: str) -> ScenarioTool:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise LookupError(f"the scenario has no tool named {name!r}")

    def to_json(self) -> str:
        return json.dumps(
            {
                "script": [_model_turn_to_json(turn) for turn in self.script.responses],
                "tools": [_tool_to_json(tool) for tool in self.tools],
                "session": {
                    "flow_type": self.session.flow_type,
                    "interrupt_deadline_seconds": None
                    if self.session.interrupt_deadline is None
                    else self.session.interrupt_deadline.total_seconds(),
                    "built_in_tools": list(self.session.built_in_tools),
                    "plan_mode_enabled": self.session.plan_mode_enabled,
                    "question_supersedes_later_calls": (
                        self.session.question_supersedes_later_calls
                    ),
                    "compaction_context_window_tokens": (
                        self.session.compaction_context_window_tokens
                    ),
                    "retained_message_limit": self.session.retained_message_limit,
                    "message_window_size": self.session.message_window_size,
                    "message_chunk_size": self.session.message_chunk_size,
                    "summary_gate": self.session.summary_gate,
                    "planning_tool_choice": self.session.planning_tool_choice,
                    "session_models": list(self.session.session_models),
                    "mcp_server_url": self.session.mcp_server_url,
                    "tracing": self.session.tracing,
                },
            },
            indent=2,
        )

    @staticmethod
    def from_json(text: str) -> Scenario:
        data = json.loads(text)
        session = data["session"]
        deadline = session["interrupt_deadline_seconds"]
        return Scenario(
            script=ModelScript([_model_turn_from_json(turn) for turn in data["script"]]),
            tools=tuple(_tool_from_json(tool) for tool in data["tools"]),
            session=ScenarioSession(
                flow_type=session["flow_type"],
                interrupt_deadline=None if deadline is None else timedelta(seconds=deadline),
                built_in_tools=tuple(session.get("built_in_tools", ())),
                plan_mode_enabled=session.get("plan_mode_enabled", False),
                question_supersedes_later_calls=session.get(
                    "question_supersedes_later_calls", False
                ),
                compaction_context_window_tokens=session.get("compaction_context_window_tokens"),
                retained_message_limit=session.get("retained_message_limit", 1000),
                message_window_size=session.get("message_window_size", 64),
                message_chunk_size=session.get("message_chunk_size", 32),
                summary_gate=session.get("summary_gate"),
                planning_tool_choice=session.get("planning_tool_choice", "auto"),
                session_models=tuple(session.get("session_models", ())),
                mcp_server_url=session.get("mcp_server_url"),
                tracing=session.get("tracing", False),
            ),
        )

    def write(self, state_directory: Path) -> Path:
        state_directory.mkdir(parents=True, exist_ok=True)
        path = state_directory / SCENARIO_FILE
        path.write_text(self.to_json())
        return path

    @staticmethod
    def read(state_directory: Path) -> Scenario:
        return Scenario.from_json((state_directory / SCENARIO_FILE).read_text())


def _model_turn_to_json(turn: ModelTurn) -> dict[str, Any]:
    return {
        "text": turn.text,
        "tool_calls": [
            {
                "tool_name": c.tool_name,
                "arguments": dict(c.arguments),
                "tool_call_id": c.tool_call_id,
            }
            for c in turn.tool_calls
        ],
        "text_from_tool_results": turn.text_from_tool_results,
        "fail_attempts": turn.fail_attempts,
        "gate": turn.gate,
        "text_before_gate": turn.text_before_gate,
        "last_of_turn": turn.last_of_turn,
    }


def _model_turn_from_json(data: dict[str, Any]) -> ModelTurn:
    return ModelTurn(
        text=data["text"],
        tool_calls=[ToolCallSpec(**call) for call in data["tool_calls"]],
        text_from_tool_results=data["text_from_tool_results"],
        fail_attempts=data["fail_attempts"],
        gate=data["gate"],
        text_before_gate=data["text_before_gate"],
        last_of_turn=data.get("last_of_turn", False),
    )


def _tool_to_json(tool: ScenarioTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "effect": tool.effect.value,
        "description": tool.description,
        "behaviour": tool.behaviour.value,
        "text": tool.text,
        "requires_approval": tool.requires_approval,
        "gate": tool.gate,
        "fail_attempts": tool.fail_attempts,
        "question": tool.question,
        "choices": list(tool.choices) if tool.choices is not None else None,
        "continuation": tool.continuation,
    }


def _tool_from_json(data: dict[str, Any]) -> ScenarioTool:
    return ScenarioTool(
        name=data["name"],
        effect=ToolEffect(data["effect"]),
        description=data["description"],
        behaviour=ToolBehaviour(data["behaviour"]),
        text=data["text"],
        requires_approval=data["requires_approval"],
        gate=data["gate"],
        fail_attempts=data["fail_attempts"],
        question=data.get("question"),
        choices=tuple(data["choices"]) if data.get("choices") is not None else None,
        continuation=data.get("continuation"),
    )
