"""Deliberately broken runners, one per contract rule, that the suite must fail.

Each mutant is the core's ``ScriptedRunner`` with one rule broken, the way a new
adapter tends to break it. The suite's own tests run each mutant through the
scenario that checks its rule and expect a failure naming that rule; this is what
proves the suite can fail. ``MUTANTS`` lists them with their rule and scenario.

They also show, by contrast, what a runner must do. ``IncrementalScriptedRunner``
is the one correct runner here: it stores the turn's messages as it goes and
implements ``build_unfinished_turn_messages``, the control of its mutant.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionFlow, create_agent_session_flow
from dex_agents.runner import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolTaskCancellation,
)
from dex_agents.testing import (
    ModelScript,
    ModelTurn,
    ScenarioSession,
    ScenarioTool,
    ScriptedRunner,
    ToolChoice,
    run_scenario_tool,
    scenario_mcp_tools,
)
from dex_agents.values import (
    AgentToolCallStatus,
    AgentUsage,
    FrameworkMessage,
    ToolEffect,
    from_wire,
)
from dex_agents_conformance.rules import ContractRule

__all__ = ["MUTANTS", "IncrementalScriptedRunner", "Mutant"]

RunnerClass = Callable[..., ScriptedRunner]


def _flow_of(
    runner_class: RunnerClass,
) -> Callable[[ModelScript, Sequence[ScenarioTool], Path, ScenarioSession], AgentSessionFlow]:
    """A scenario factory over ``runner_class``, like ``build_scripted_flow``."""

    def build_flow(
        script: ModelScript,
        tools: Sequence[ScenarioTool],
        state_directory: Path,
        session: ScenarioSession,
    ) -> AgentSessionFlow:
        return create_agent_session_flow(
            runner_class(
                script,
                tools,
                Path(state_directory),
                planning_tool_choice=session.planning_tool_choice,
                session_models=session.session_models,
                mcp_tools=scenario_mcp_tools(session),
            ),
            session.flow_type,
            interrupt_deadline=session.interrupt_deadline,
            built_in_tools=session.built_in_tools,
            plan_mode_enabled=session.plan_mode_enabled,
            question_supersedes_later_calls=session.question_supersedes_later_calls,
        )

    return build_flow


def _position(turn: AgentTurnContext) -> int:
    if turn.framework_run_state is None:
        return 0
    return int(json.loads(turn.framework_run_state)["position"])


# --- the model step ---------------------------------------------------------------------


class DropsToolMessages(ScriptedRunner):
    """``TurnCompleted`` carries the answer but not the turn's tool call and result messages."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await super().run_model_step(turn)
        if isinstance(outcome, ToolCallsRequested):
            return outcome
        kept = [m for m in outcome.new_messages if m.role != "tool" and m.tool_call_id is None]
        return replace(outcome, new_messages=kept)


class IgnoresFrameworkEffects(ScriptedRunner):
    """Resolves every call's policy without the effect the tool declares."""

    def _deferred_calls(
        self, turn: AgentTurnContext, response: ModelTurn, position: int
    ) -> list[DeferredToolCall]:
        calls = super()._deferred_calls(turn, response, position)
        return [replace(c, policy=turn.resolve_tool_policy(c.tool_name)) for c in calls]


class GivesUnknownToolsNoApproval(ScriptedRunner):
    """Gives a call of a tool it does not have ``unclassified`` without approval, as the
    call fails anyway, instead of the session default."""

    def _deferred_calls(
        self, turn: AgentTurnContext, response: ModelTurn, position: int
    ) -> list[DeferredToolCall]:
        calls = super()._deferred_calls(turn, response, position)
        unknown = ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, False)
        return [c if c.tool_name in self.tools else replace(c, policy=unknown) for c in calls]


class InventsToolCallIds(ScriptedRunner):
    """Names each call itself instead of using the model's tool call ID."""

    def _deferred_calls(
        self, turn: AgentTurnContext, response: ModelTurn, position: int
    ) -> list[DeferredToolCall]:
        calls = super()._deferred_calls(turn, response, position)
        return [replace(c, tool_call_id=f"{c.tool_name}-{i}") for i, c in enumerate(calls)]


class ReusesCallIds(ScriptedRunner):
    """Numbers calls per response, so a turn's second response reuses ``call-0``."""

    def _deferred_calls(
        self, turn: AgentTurnContext, response: ModelTurn, position: int
    ) -> list[DeferredToolCall]:
        calls = super()._deferred_calls(turn, response, position)
        return [replace(c, tool_call_id=f"call-{i}") for i, c in enumerate(calls)]


class EmptyRunState(ScriptedRunner):
    """Returns ``ToolCallsRequested`` with an empty ``framework_run_state``."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await super().run_model_step(turn)
        if isinstance(outcome, ToolCallsRequested):
            return replace(outcome, framework_run_state="")
        return outcome


class RunsToolsInModelStep(ScriptedRunner):
    """Lets the framework run the tools inside ``run_model_step`` and then defers them too."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await super().run_model_step(turn)
        if isinstance(outcome, ToolCallsRequested):
            for call in outcome.tool_calls:
                await run_scenario_tool(
                    self.tools[call.tool_name],
                    call.arguments,
                    state_directory=self.state_directory,
                    idempotency_key=None,
                    attempt=turn.attempt,
                )
        return outcome


class DropsRejectionText(ScriptedRunner):
    """Tells the model a rejected call was ``rejected``, without the rejection's message."""

    @staticmethod
    def _tool_results(
        turn: AgentTurnContext, pending_calls: list[dict[str, str]]
    ) -> list[FrameworkMessage]:
        results = ScriptedRunner._tool_results(turn, pending_calls)  # pyright: ignore[reportPrivateUsage]
        rejected = {
            r.tool_call_id for r in turn.tool_calls if r.status is AgentToolCallStatus.REJECTED
        }
        return [
            replace(m, tool_output="rejected") if m.tool_call_id in rejected else m for m in results
        ]


class ForgetsHistory(ScriptedRunner):
    """Gives the model only the current turn, not the stored messages."""

    @staticmethod
    def _replayed_history(turn: AgentTurnContext) -> list[str]:
        del turn
        return []


class KeepsStateInMemory(ScriptedRunner):
    """Counts the turn's model calls in process memory instead of the run state."""

    def __init__(
        self,
        script: ModelScript,
        tools: Sequence[ScenarioTool],
        state_directory: Path,
        **options: Any,
    ) -> None:
        super().__init__(script, tools, state_directory, **options)
        self._model_calls: dict[str, int] = {}

    def _restore(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, turn: AgentTurnContext
    ) -> tuple[int, list[FrameworkMessage], list[dict[str, str]]]:
        _, items, pending = ScriptedRunner._restore(turn)  # pyright: ignore[reportPrivateUsage]
        position = self._model_calls.get(turn.turn_id, 0)
        self._model_calls[turn.turn_id] = position + 1
        return position, items, pending


class WritesSessionEvents(ScriptedRunner):
    """Writes ``tool_call_started`` itself when the model asks for tools."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await super().run_model_step(turn)
        if isinstance(outcome, ToolCallsRequested):
            for call in outcome.tool_calls:
                turn.events.write_tool_call_started(call.tool_call_id, call.tool_name)
        return outcome


class ReportsTurnUsage(ScriptedRunner):
    """Reports the turn's running usage with each model call instead of the call's own."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await super().run_model_step(turn)
        calls = _position(turn) + 1
        usage = AgentUsage(model_calls=calls, input_tokens=10 * calls, total_tokens=10 * calls)
        return replace(outcome, usage=usage)


class DropsBuiltInToolCalls(ScriptedRunner):
    """Passes on only calls of its own tools, so ``ask_user`` never reaches the session."""

    def _deferred_calls(
        self, turn: AgentTurnContext, response: ModelTurn, position: int
    ) -> list[DeferredToolCall]:
        calls = super()._deferred_calls(turn, response, position)
        return [c for c in calls if c.tool_name in self.tools]


# --- tool execution ---------------------------------------------------------------------


class SwallowsToolErrors(ScriptedRunner):
    """Turns every tool error into output and retries nothing."""

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        try:
            return await super().execute_deferred_tool_call(call)
        except ToolExecutionError as error:
            return ToolExecutionResult(error.message)
        except Exception as error:
            return ToolExecutionResult(f"error: {error}")


class InventsIdempotencyKeys(ScriptedRunner):
    """Hands tools a key of its own per attempt instead of the call's idempotency key."""

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        key = f"{call.tool_call.tool_call_id}-attempt-{call.attempt}"
        return await super().execute_deferred_tool_call(replace(call, idempotency_key=key))


class IgnoresInputAnswers(ScriptedRunner):
    """Never passes the user's answers to the tool, so it asks again."""

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        return await super().execute_deferred_tool_call(replace(call, input_answers=()))


class ForgetsMcpTaskCancellation(ScriptedRunner):
    """Cancels no task on ``cancel_turn``, so the MCP server's task runs on."""

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        del cancellation


class IgnoresSessionSettings(ScriptedRunner):
    """Always uses its default model, whatever the turn's session settings choose."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        return await super().run_model_step(replace(turn, session_settings={}))


class NeverForcesPlanningToolChoice(ScriptedRunner):
    """Takes ``planning_tool_choice`` but never forces a planning turn's first call."""

    def _tool_choice(self, turn: AgentTurnContext, position: int) -> ToolChoice:
        return "auto"


# --- messages stored as the turn goes ---------------------------------------------------


class ForgetsUnfinishedTurnMessages(ScriptedRunner):
    """Stores the turn's messages as it goes but lacks ``build_unfinished_turn_messages``,
    so a failed turn keeps a tool call without its result."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        stored = 0
        if turn.framework_run_state is not None:
            stored = int(json.loads(turn.framework_run_state).get("stored", 0))
        outcome = await super().run_model_step(turn)
        if not isinstance(outcome, ToolCallsRequested):
            return replace(outcome, new_messages=list(outcome.new_messages)[stored:])
        state: dict[str, Any] = json.loads(outcome.framework_run_state)
        items = [from_wire(FrameworkMessage, item) for item in state["items"]]
        state["stored"] = len(items)
        return replace(outcome, framework_run_state=json.dumps(state), new_messages=items[stored:])


class IncrementalScriptedRunner(ForgetsUnfinishedTurnMessages):
    """The correct runner with incremental messages: the control of its mutant."""

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> list[FrameworkMessage]:
        """The results of the calls the last stored response asked for."""
        _, _, pending = self._restore(turn)
        return self._tool_results(turn, pending)


# --- the registry -----------------------------------------------------------------------

build_drops_tool_messages = _flow_of(DropsToolMessages)
build_forgets_mcp_task_cancellation = _flow_of(ForgetsMcpTaskCancellation)
build_ignores_framework_effects = _flow_of(IgnoresFrameworkEffects)
build_gives_unknown_tools_no_approval = _flow_of(GivesUnknownToolsNoApproval)
build_invents_tool_call_ids = _flow_of(InventsToolCallIds)
build_reuses_call_ids = _flow_of(ReusesCallIds)
build_empty_run_state = _flow_of(EmptyRunState)
build_runs_tools_in_model_step = _flow_of(RunsToolsInModelStep)
build_drops_rejection_text = _flow_of(DropsRejectionText)
build_forgets_history = _flow_of(ForgetsHistory)
build_keeps_state_in_memory = _flow_of(KeepsStateInMemory)
build_writes_session_events = _flow_of(WritesSessionEvents)
build_reports_turn_usage = _flow_of(ReportsTurnUsage)
build_drops_built_in_tool_calls = _flow_of(DropsBuiltInToolCalls)
build_swallows_tool_errors = _flow_of(SwallowsToolErrors)
build_invents_idempotency_keys = _flow_of(InventsIdempotencyKeys)
build_ignores_input_answers = _flow_of(IgnoresInputAnswers)
build_ignores_session_settings = _flow_of(IgnoresSessionSettings)
build_never_forces_planning_tool_choice = _flow_of(NeverForcesPlanningToolChoice)
build_forgets_unfinished_turn_messages = _flow_of(ForgetsUnfinishedTurnMessages)
build_incremental_scripted_flow = _flow_of(IncrementalScriptedRunner)


def build_flow_of_another_type(
    script: ModelScript,
    tools: Sequence[ScenarioTool],
    state_directory: Path,
    session: ScenarioSession,
) -> AgentSessionFlow:
    """A factory that ignores ``session.flow_type`` and registers a fixed Flow type."""
    return _flow_of(ScriptedRunner)(
        script, tools, state_directory, replace(session, flow_type="ConformanceAgent")
    )


INCREMENTAL_FLOW_FACTORY = f"{__name__}:build_incremental_scripted_flow"

_TWO_ROUNDS = "test_contract_rules_of_a_turn_with_two_tool_rounds"


@dataclass(frozen=True)
class Mutant:
    """A broken runner, the rule it breaks, and the scenario that must fail naming it."""

    name: str
    rule: ContractRule
    scenario: str

    @property
    def factory(self) -> str:
        return f"{__name__}:build_{self.name}"


MUTANTS: tuple[Mutant, ...] = (
    Mutant("drops_tool_messages", ContractRule.STORED_TRANSCRIPT, _TWO_ROUNDS),
    Mutant(
        "ignores_framework_effects",
        ContractRule.FRAMEWORK_EFFECTS,
        "test_framework_declared_effects_are_honoured_without_session_policies",
    ),
    Mutant(
        "gives_unknown_tools_no_approval",
        ContractRule.UNKNOWN_TOOLS,
        "test_a_call_of_an_unknown_tool_gets_the_session_default_policy",
    ),
    Mutant("invents_tool_call_ids", ContractRule.TOOL_CALL_IDS, _TWO_ROUNDS),
    Mutant("reuses_call_ids", ContractRule.UNIQUE_TOOL_CALL_IDS, _TWO_ROUNDS),
    Mutant("empty_run_state", ContractRule.RUN_STATE, _TWO_ROUNDS),
    Mutant("runs_tools_in_model_step", ContractRule.NO_TOOL_IN_MODEL_STEP, _TWO_ROUNDS),
    Mutant("flow_of_another_type", ContractRule.FLOW_TYPE, _TWO_ROUNDS),
    Mutant(
        "drops_rejection_text",
        ContractRule.TOOL_RESULTS,
        "test_a_rejection_reaches_the_model_with_its_message",
    ),
    Mutant("forgets_history", ContractRule.REPLAY_HISTORY, _TWO_ROUNDS),
    Mutant(
        "keeps_state_in_memory",
        ContractRule.STATELESS_RUNNER,
        "test_sigkill_during_run_model_before_output_reruns_only_that_call",
    ),
    Mutant("writes_session_events", ContractRule.SESSION_EVENTS, _TWO_ROUNDS),
    Mutant("reports_turn_usage", ContractRule.USAGE, _TWO_ROUNDS),
    Mutant(
        "drops_built_in_tool_calls",
        ContractRule.BUILT_IN_TOOLS,
        "test_built_in_tools_ask_user_and_durable_wait_run_through_the_runner",
    ),
    Mutant(
        "swallows_tool_errors",
        ContractRule.TOOL_ERRORS,
        "test_tool_errors_reach_the_session_unchanged",
    ),
    Mutant("invents_idempotency_keys", ContractRule.IDEMPOTENCY_KEY, _TWO_ROUNDS),
    Mutant(
        "ignores_input_answers",
        ContractRule.TOOL_INPUT_REQUESTED,
        "test_a_tool_input_request_asks_the_user_and_reruns_with_the_answer",
    ),
    Mutant(
        "ignores_session_settings",
        ContractRule.SESSION_SETTINGS,
        "test_session_settings_choose_the_model_and_an_update_applies_at_the_next_turn",
    ),
    Mutant(
        "never_forces_planning_tool_choice",
        ContractRule.PLANS,
        "test_planning_tool_choice_required_forces_write_todos_until_a_draft_exists",
    ),
    Mutant(
        "forgets_mcp_task_cancellation",
        ContractRule.MCP_TOOLS,
        "test_cancel_turn_during_an_mcp_task_cancels_the_server_task",
    ),
    Mutant(
        "forgets_unfinished_turn_messages",
        ContractRule.UNFINISHED_TURN_MESSAGES,
        "test_a_failed_model_call_fails_the_turn_with_a_note_of_the_tool_calls",
    ),
)
"""One broken runner per rule; ``Mutant.factory`` is its scenario factory's import path."""
