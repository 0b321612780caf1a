"""The live RunState a Worker keeps for the turn's next model step gives exactly what
restoring the committed JSON gives, and is never served for any other committed state."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, RunState, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import RunnerDriver as Session
from dex_agents_openai_agents import OpenAIAgentsRunner


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id} shipped"


def three_step_runner() -> OpenAIAgentsRunner:
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup_order", {"order_id": "42"}, call_id="c1")]),
            ModelStep(output=[function_call("lookup_order", {"order_id": "7"}, call_id="c2")]),
            ModelStep(output=[assistant_message("Both shipped.")]),
        ]
    )
    return OpenAIAgentsRunner(
        Agent(name="support", instructions="Help.", model=model, tools=[lookup_order])
    )


@pytest.fixture
def restores(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts ``RunState.from_json`` calls (restores from the committed JSON)."""
    calls: list[int] = []
    original = RunState.from_json

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await original(*args, **kwargs)

    monkeypatch.setattr(RunState, "from_json", staticmethod(counted))
    return calls


def _comparable(outcome: TurnCompleted | ToolCallsRequested) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "messages": [m.framework_item for m in outcome.new_messages],
        "usage": outcome.usage,
    }
    if isinstance(outcome, ToolCallsRequested):
        fields["calls"] = [(c.tool_call_id, c.tool_name, c.arguments) for c in outcome.tool_calls]
        fields["policies"] = [c.policy for c in outcome.tool_calls]
        state = json.loads(outcome.framework_run_state)
        fields["state"] = state
    return fields


async def test_a_kept_state_gives_what_another_worker_restoring_the_json_gives(
    restores: list[int],
) -> None:
    kept = Session(three_step_runner())  # one Worker: every resume hits its kept state
    fresh = Session(three_step_runner())  # "another Worker" at every step: restores the JSON
    for session in (kept, fresh):
        session.start_turn("where are 42 and 7?")
    outcomes: list[tuple[Any, Any]] = []
    for _ in range(3):
        fresh.runner._resume_cache.clear()  # pyright: ignore[reportPrivateUsage]
        before = len(restores)
        kept_outcome = await kept.run_model()
        kept_restored = len(restores) - before
        fresh_outcome = await fresh.run_model()
        outcomes.append((kept_outcome, fresh_outcome))
        assert kept_restored == 0
        if isinstance(kept_outcome, ToolCallsRequested):
            await kept.run_tools()
            await fresh.run_tools()
    assert len(restores) == 2, "the fresh Worker restored both resumed steps from the JSON"
    assert isinstance(outcomes[-1][0], TurnCompleted)
    for kept_outcome, fresh_outcome in outcomes:
        assert _comparable(kept_outcome) == _comparable(fresh_outcome)
    assert kept.items() == fresh.items()
    assert kept.events.text == fresh.events.text == ["Both shipped."]


async def test_a_kept_state_is_not_served_for_another_committed_text(
    restores: list[int],
) -> None:
    session = Session(three_step_runner())
    session.start_turn("where are 42 and 7?")
    await session.run_model()
    await session.run_tools()
    assert session.run_state is not None
    # The committed state is another text than the one the Worker kept (a rerun of the step
    # elsewhere committed its own): the kept state is not used, the JSON is.
    session.run_state = json.dumps(json.loads(session.run_state), indent=1)
    outcome = await session.run_model()
    assert len(restores) == 1
    assert isinstance(outcome, ToolCallsRequested)
    assert [c.tool_call_id for c in outcome.tool_calls] == ["c2"]


async def test_a_kept_state_is_resumed_once(restores: list[int]) -> None:
    session = Session(three_step_runner())
    session.start_turn("where are 42 and 7?")
    await session.run_model()
    await session.run_tools()
    committed = session.run_state
    records = list(session.records)
    messages = list(session.messages)
    first = await session.run_model()
    assert restores == []
    # The step's second attempt (its first one's outcome was never committed) restores the
    # committed JSON: the kept state was changed by the first attempt and is gone.
    session.run_state, session.records, session.messages = committed, records, messages
    second = await session.run_model(attempt=2)
    assert len(restores) == 1
    # (The scripted model moved on to its next answer; the resumed input is the same.)
    assert first.new_messages[0] == second.new_messages[0]
    assert "order 42 shipped" in (second.new_messages[0].tool_output or "")


async def test_changed_tools_restore_from_the_json(restores: list[int]) -> None:
    runner = three_step_runner()
    session = Session(runner)
    session.start_turn("where are 42 and 7?")
    await session.run_model()
    await session.run_tools()
    runner.agent.tools = [lookup_order]  # the same tool, but another list: the graph differs
    outcome = await session.run_model()
    assert len(restores) == 1
    assert isinstance(outcome, ToolCallsRequested)
