"""The contract rules the suite checks, so every failure names the rule a runner broke.

Each scenario carries one rule (``@contract_rule``), and a scenario that checks
several wraps each check in ``checking(rule)``. A failure then ends with
``contract rule <name>: <what the rule says>``, innermost rule first, and the
mutation tests (``dex_agents_conformance.mutants``) look for that name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Generator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, ParamSpec, TypeVar

__all__ = ["RULE_NOTE_PREFIX", "ContractRule", "checking", "contract_rule", "rules_of"]

RULE_NOTE_PREFIX = "contract rule "


class ContractRule(StrEnum):
    """One rule of the runner contract (or of the session a runner must not disturb)."""

    FLOW_TYPE = "flow_type"
    STORED_TRANSCRIPT = "stored_transcript"
    REPLAY_HISTORY = "replay_history"
    TOOL_CALL_IDS = "tool_call_ids"
    UNIQUE_TOOL_CALL_IDS = "unique_tool_call_ids"
    RUN_STATE = "run_state"
    FRAMEWORK_EFFECTS = "framework_effects"
    UNKNOWN_TOOLS = "unknown_tools"
    NO_TOOL_IN_MODEL_STEP = "no_tool_in_model_step"
    TOOL_RESULTS = "tool_results"
    STATELESS_RUNNER = "stateless_runner"
    SESSION_EVENTS = "session_events"
    TOOL_ERRORS = "tool_errors"
    IDEMPOTENCY_KEY = "idempotency_key"
    BUILT_IN_TOOLS = "built_in_tools"
    TOOL_INPUT_REQUESTED = "tool_input_requested"
    UNFINISHED_TURN_MESSAGES = "unfinished_turn_messages"
    USAGE = "usage"
    MODEL_FAILURES = "model_failures"
    APPROVALS = "approvals"
    CRASH_RECOVERY = "crash_recovery"
    TURN_CONTROL = "turn_control"
    PLANS = "plans"
    SESSION_SETTINGS = "session_settings"
    MESSAGE_STORAGE = "message_storage"
    MCP_TOOLS = "mcp_tools"

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]

    def note(self) -> str:
        return f"{RULE_NOTE_PREFIX}{self.value}: {self.description}"


_DESCRIPTIONS: dict[ContractRule, str] = {
    ContractRule.FLOW_TYPE: "the factory builds the session Flow under exactly"
    " ScenarioSession.flow_type",
    ContractRule.STORED_TRANSCRIPT: "a finished turn stores every message not stored yet, in"
    " order: each tool call as an assistant message, each result as a tool message, then"
    " the answer, display fields filled as the core README's runner contract defines",
    ContractRule.REPLAY_HISTORY: "run_model_step rebuilds the model's input from the stored"
    " messages' framework_item, so a later turn sees the earlier ones",
    ContractRule.TOOL_CALL_IDS: "each DeferredToolCall carries the model's own tool call ID",
    ContractRule.UNIQUE_TOOL_CALL_IDS: "tool call IDs are unique within a turn and a recorded"
    " call is never requested again",
    ContractRule.RUN_STATE: "ToolCallsRequested carries a non-empty framework_run_state from"
    " which the next run_model_step continues the turn",
    ContractRule.FRAMEWORK_EFFECTS: "a tool's effect and approval come from the framework's own"
    " declaration when no session ToolPolicy names it (the factory must not override them)",
    ContractRule.UNKNOWN_TOOLS: "a call of a tool the runner does not have gets the session"
    " default's policy (call_policy with known=False): it waits for approval where"
    " default_tool_effect asks for one, then fails in its tool Step with a result the model"
    " reads",
    ContractRule.NO_TOOL_IN_MODEL_STEP: "run_model_step makes at most one model call and runs"
    " no tool; every tool runs once, in its own Step",
    ContractRule.TOOL_RESULTS: "each call of the previous response gets the text of its final"
    " record (describe_tool_call_outcome), a rejection's message included",
    ContractRule.STATELESS_RUNNER: "the runner keeps no state between calls: a model call rerun"
    " in a new Worker process gives the same answer",
    ContractRule.SESSION_EVENTS: "the runner writes none of the session's own events"
    " (turn_*, tool_call_*, usage_recorded)",
    ContractRule.TOOL_ERRORS: "a ToolExecutionError reaches the session unchanged (failed, not"
    " retried) and an unexpected error is raised, not turned into output",
    ContractRule.IDEMPOTENCY_KEY: "each tool run gets the call's idempotency key"
    " (<flow>/<turn>/<call>) and attempt",
    ContractRule.BUILT_IN_TOOLS: "the runner offers turn.enabled_built_in_tools and returns"
    " their calls like any other, so the session handles ask_user and durable_wait",
    ContractRule.TOOL_INPUT_REQUESTED: "a tool's ToolInputRequested reaches the session, and the"
    " rerun of the call gets the answers in input_answers and the question's continuation in"
    " tool_call.input_continuation",
    ContractRule.UNFINISHED_TURN_MESSAGES: "a runner that stores messages as the turn goes"
    " implements build_unfinished_turn_messages, so a failed turn stores a result for every"
    " stored tool call",
    ContractRule.USAGE: "each outcome reports the usage of its own model call only",
    ContractRule.MODEL_FAILURES: "an unexpected model failure is raised from run_model_step, so"
    " the call reruns and a turn that keeps failing ends with the failure note",
    ContractRule.APPROVALS: "calls that need approval wait for it and run only once approved",
    ContractRule.CRASH_RECOVERY: "a Worker SIGKILL reruns only the interrupted Step, with the"
    " same committed input",
    ContractRule.TURN_CONTROL: "steering, queue edits and cancellation end turns as the session"
    " says",
    ContractRule.PLANS: "plan mode offers only write_todos and runs an approved plan;"
    " planning_tool_choice='required' forces a tool call on a planning turn's first model"
    " call while no draft exists",
    ContractRule.SESSION_SETTINGS: "every model call of a turn, summary calls included, uses"
    " the model the turn's session_settings choose (turn.session_settings, the settings the"
    " turn started with); an update applies from the next turn",
    ContractRule.MESSAGE_STORAGE: "stored messages, snapshots and paging read back complete",
    ContractRule.MCP_TOOLS: "an MCP tool runs through the MCP source in its tool Step, and the"
    " source polls and cancels the tasks it hands over (tool_tasks= names it for its tools),"
    " so a task's input request becomes a question and cancel_turn sends tasks/cancel",
}

_P = ParamSpec("_P")
_R = TypeVar("_R")
_RULES_ATTRIBUTE = "__contract_rules__"


def _add_rule_note(error: BaseException, rule: ContractRule) -> None:
    notes: list[str] = getattr(error, "__notes__", [])
    if rule.note() not in notes:
        error.add_note(rule.note())


@contextmanager
def checking(rule: ContractRule) -> Generator[None]:
    """Name ``rule`` in any failure of the block (checks of one rule inside a scenario)."""
    try:
        yield
    except Exception as error:
        _add_rule_note(error, rule)
        raise


def contract_rule(
    rule: ContractRule,
) -> Callable[[Callable[_P, Coroutine[Any, Any, _R]]], Callable[_P, Coroutine[Any, Any, _R]]]:
    """Mark a scenario as a check of ``rule``: any failure of it names the rule."""

    def decorate(
        scenario: Callable[_P, Coroutine[Any, Any, _R]],
    ) -> Callable[_P, Coroutine[Any, Any, _R]]:
        @functools.wraps(scenario)
        async def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with checking(rule):
                return await scenario(*args, **kwargs)

        setattr(checked, _RULES_ATTRIBUTE, (rule,))
        return checked

    return decorate


def rules_of(scenario: object) -> tuple[ContractRule, ...]:
    """The rules a scenario function was marked with (``()`` when none)."""
    return getattr(scenario, _RULES_ATTRIBUTE, ())
