"""OpenAIAgentsRunner driven directly, with the SDK's own ScriptedModel as the model."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from agents import (
    Agent,
    MaxTurnsExceeded,
    RunContextWrapper,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import InputTokensDetails, OutputTokensDetails, Usage

from dex_agents import AgentToolCallStatus, AgentUsage, ToolEffect, ToolPolicy
from dex_agents.runner import (
    DEFAULT_REJECTION_MESSAGE,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    TurnCompleted,
    get_deferred_tool_execution,
)
from dex_agents.testing import RunnerDriver as Session
from dex_agents_openai_agents import OpenAIAgentsRunner, declare_tool_effect

ran: list[str] = []


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    ran.append(f"lookup_order {order_id}")
    return f"order {order_id} shipped"


@function_tool
def charge_card(amount: int) -> str:
    """Charge the card."""
    ran.append(f"charge_card {amount}")
    return f"charged {amount}"


declare_tool_effect(lookup_order, ToolEffect.READ)


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    ran.clear()


def usage(
    inputs: int, outputs: int, *, cached: int = 0, written: int = 0, reasoning: int = 0
) -> Usage:
    return Usage(
        requests=1,
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=inputs + outputs,
        input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=written),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning),
    )


def agent_with(model: ScriptedModel, *tools: Any) -> Agent[Any]:
    return Agent(name="support", instructions="Help.", model=model, tools=list(tools))


async def test_one_model_call_defers_every_tool_and_stores_the_sdk_items() -> None:
    model = ScriptedModel(
        [
            ModelStep(
                output=[
                    function_call("charge_card", {"amount": 5}, call_id="call_a"),
                    function_call("lookup_order", {"order_id": "42"}, call_id="call_b"),
                ],
                usage=usage(100, 20, cached=30, written=11, reasoning=7),
            )
        ]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, lookup_order, charge_card)))
    session.start_turn("charge 5 and look up 42")

    outcome = await session.run_model()

    assert isinstance(outcome, ToolCallsRequested)
    assert len(model.calls) == 1
    assert ran == [], "no tool body runs in the model step"
    assert [(c.tool_call_id, c.tool_name, c.arguments) for c in outcome.tool_calls] == [
        ("call_a", "charge_card", '{"amount":5}'),
        ("call_b", "lookup_order", '{"order_id":"42"}'),
    ]
    assert outcome.tool_calls[0].policy == ResolvedToolPolicy(
        ToolEffect.UNCLASSIFIED, requires_approval=True
    )
    assert outcome.tool_calls[1].policy == ResolvedToolPolicy(ToolEffect.READ, False)
    assert outcome.usage == AgentUsage(
        model_calls=1,
        input_tokens=100,
        output_tokens=20,
        total_tokens=120,
        cache_read_tokens=30,
        cache_write_tokens=11,
        reasoning_tokens=7,
    )
    assert session.items() == [
        {"role": "user", "content": "charge 5 and look up 42"},
        {
            "arguments": '{"amount":5}',
            "call_id": "call_a",
            "name": "charge_card",
            "type": "function_call",
            "id": "call_a",
        },
        {
            "arguments": '{"order_id":"42"}',
            "call_id": "call_b",
            "name": "lookup_order",
            "type": "function_call",
            "id": "call_b",
        },
    ]
    assert [m.role for m in session.messages] == ["user", "assistant", "assistant"]
    assert session.messages[1].tool_call_id == "call_a"
    state = json.loads(outcome.framework_run_state)
    assert state["run_state"]["$schemaVersion"]


async def test_resume_replays_recorded_results_and_reports_only_its_own_usage() -> None:
    model = ScriptedModel(
        [
            ModelStep(
                output=[function_call("lookup_order", {"order_id": "42"}, call_id="call_a")],
                usage=usage(100, 20),
            ),
            ModelStep(output=[assistant_message("It shipped.")], usage=usage(300, 9)),
        ]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, lookup_order)))
    session.start_turn("where is 42?")
    await session.run_model()
    await session.run_tools()
    assert ran == ["lookup_order 42"]

    outcome = await session.run_model()

    assert isinstance(outcome, TurnCompleted)
    assert ran == ["lookup_order 42"], "the resumed step replays the record, it never reruns"
    assert len(model.calls) == 2
    second_input = model.calls[1].input
    assert second_input[-1] == {
        "call_id": "call_a",
        "output": "order 42 shipped",
        "type": "function_call_output",
    }
    assert outcome.usage == AgentUsage(
        model_calls=1, input_tokens=300, output_tokens=9, total_tokens=309
    )
    assert [m.role for m in outcome.new_messages] == ["tool", "assistant"]
    assert outcome.new_messages[0].tool_output == "order 42 shipped"
    assert outcome.new_messages[1].text == "It shipped."
    assert session.events.text == ["It shipped."]


@pytest.mark.parametrize(
    ("message", "seen"), [("too expensive", "too expensive"), (None, DEFAULT_REJECTION_MESSAGE)]
)
async def test_a_rejection_reaches_the_model_with_its_message(
    message: str | None, seen: str
) -> None:
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("charge_card", {"amount": 500}, call_id="call_a")]),
            ModelStep(output=[assistant_message("Not charged.")]),
        ]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, charge_card)))
    session.start_turn("charge 500")
    await session.run_model()
    session.reject("call_a", message)

    outcome = await session.run_model()

    assert isinstance(outcome, TurnCompleted)
    assert ran == []
    assert model.calls[1].input[-1] == {
        "call_id": "call_a",
        "output": seen,
        "type": "function_call_output",
    }
    assert outcome.new_messages[0].tool_output == seen


async def test_a_session_runs_past_the_sdk_default_turn_limit() -> None:
    rounds = 14  # The SDK's default max_turns is 10.
    steps: list[Any] = [
        ModelStep(output=[function_call("lookup_order", {"order_id": str(n)}, call_id=f"c{n}")])
        for n in range(rounds)
    ]
    steps.append(ModelStep(output=[assistant_message("all looked up")]))
    steps.extend(ModelStep(output=[assistant_message(f"answer {n}")]) for n in range(12))
    model = ScriptedModel(steps)
    session = Session(OpenAIAgentsRunner(agent_with(model, lookup_order)))
    session.start_turn("look everything up")
    for _ in range(rounds):
        assert isinstance(await session.run_model(), ToolCallsRequested)
        await session.run_tools()
    final = await session.run_model()
    assert isinstance(final, TurnCompleted)
    assert final.usage.model_calls == 1
    for n in range(12):
        session.start_turn(f"question {n}")
        outcome = await session.run_model()
        assert isinstance(outcome, TurnCompleted)
        assert outcome.new_messages[-1].text == f"answer {n}"
    assert len(ran) == rounds
    assert len(model.calls) == rounds + 1 + 12
    model.assert_complete()


class Shop:
    def __init__(self, name: str) -> None:
        self.name = name


seen_by_tool: list[dict[str, Any]] = []


@function_tool
def ship(ctx: RunContextWrapper[Shop], order_id: str) -> str:
    """Ship an order."""
    execution = get_deferred_tool_execution()
    seen_by_tool.append(
        {
            "shop": ctx.context.name,
            "tool_call_id": getattr(ctx, "tool_call_id", None),
            "idempotency_key": execution.idempotency_key,
            "attempt": execution.attempt,
            "record_arguments": execution.tool_call.arguments,
        }
    )
    return f"{order_id} shipped from {ctx.context.name}"


async def test_a_tool_reads_its_tool_context_and_the_deferred_call() -> None:
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("ship", {"order_id": "42"}, call_id="call_s")]),
            ModelStep(output=[assistant_message("done")]),
        ]
    )
    runner = OpenAIAgentsRunner(
        Agent[Shop](name="shop", model=model, tools=[ship]),
        context_factory=lambda: Shop("north"),
    )
    session = Session(runner, policies={"ship": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)})
    session.start_turn("ship 42")
    await session.run_model()
    await session.run_tools()
    assert seen_by_tool == [
        {
            "shop": "north",
            "tool_call_id": "call_s",
            "idempotency_key": "s-1/turn-1/call_s",
            "attempt": 1,
            "record_arguments": '{"order_id":"42"}',
        }
    ]
    assert session.records[0].output == "42 shipped from north"
    # The resumed step restores the RunState with a fresh context from the factory.
    assert isinstance(await session.run_model(), TurnCompleted)
    with pytest.raises(LookupError):
        get_deferred_tool_execution()


@function_tool
def flaky(order_id: str) -> str:
    """Fails."""
    raise RuntimeError(f"backend down for {order_id}")


@function_tool
def picky(order_id: str) -> str:
    """Refuses."""
    raise ToolExecutionError(f"order {order_id} not found")


async def test_tool_failures_reach_the_session_not_the_sdk_error_text() -> None:
    model = ScriptedModel(
        [
            ModelStep(
                output=[
                    function_call("flaky", {"order_id": "1"}, call_id="c1"),
                    function_call("picky", {"order_id": "2"}, call_id="c2"),
                    function_call("picky", {"wrong": 3}, call_id="c3"),
                ]
            )
        ]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, flaky, picky)))
    session.start_turn("go")
    await session.run_model()
    flaky_record, picky_record, bad_arguments = session.records
    with pytest.raises(RuntimeError, match="backend down for 1"):
        await session.runner.execute_deferred_tool_call(session.execution(flaky_record))
    with pytest.raises(ToolExecutionError, match="order 2 not found"):
        await session.runner.execute_deferred_tool_call(session.execution(picky_record))
    with pytest.raises(ToolExecutionError, match="Invalid JSON input for tool picky"):
        await session.runner.execute_deferred_tool_call(session.execution(bad_arguments))
    unknown = dataclasses.replace(picky_record, tool_name="nope")
    with pytest.raises(ToolExecutionError, match=r"^unknown tool nope$"):
        await session.runner.execute_deferred_tool_call(session.execution(unknown))


@function_tool(needs_approval=True)
def wire_money(amount: int) -> str:
    """Wire money."""
    return "wired"


@function_tool
def refund(order_id: str) -> str:
    """Refund."""
    return "refunded"


@function_tool
def plain(x: int) -> str:
    """No declaration."""
    return "plain"


declare_tool_effect(refund, ToolEffect.IDEMPOTENT_WRITE)
declare_tool_effect(wire_money, ToolEffect.NON_IDEMPOTENT_WRITE)


async def test_policy_precedence_session_then_tool_then_default() -> None:
    model = ScriptedModel(
        [
            ModelStep(
                output=[
                    function_call("wire_money", {"amount": 1}, call_id="c1"),
                    function_call("refund", {"order_id": "1"}, call_id="c2"),
                    function_call("plain", {"x": 1}, call_id="c3"),
                    function_call("lookup_order", {"order_id": "1"}, call_id="c4"),
                ]
            )
        ]
    )
    session = Session(
        OpenAIAgentsRunner(agent_with(model, wire_money, refund, plain, lookup_order)),
        policies={"lookup_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)},
        default_effect=ToolEffect.READ,
    )
    session.start_turn("go")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    policies = {c.tool_name: c.policy for c in outcome.tool_calls}
    assert policies == {
        "wire_money": ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True),
        "refund": ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False),
        "plain": ResolvedToolPolicy(ToolEffect.READ, False),
        "lookup_order": ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False),
    }


async def test_the_sdk_approval_flag_counts_as_the_tools_declaration() -> None:
    @function_tool(needs_approval=True)
    def delete_account(user: str) -> str:
        """Delete."""
        return "deleted"

    model = ScriptedModel(
        [ModelStep(output=[function_call("delete_account", {"user": "u"}, call_id="c1")])]
    )
    session = Session(
        OpenAIAgentsRunner(agent_with(model, delete_account)), default_effect=ToolEffect.READ
    )
    session.start_turn("go")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.READ, True)


async def test_unfinished_turn_messages_pair_final_records_with_outputs() -> None:
    model = ScriptedModel(
        [
            ModelStep(
                output=[
                    function_call("lookup_order", {"order_id": "1"}, call_id="c1"),
                    function_call("charge_card", {"amount": 1}, call_id="c2"),
                ]
            )
        ]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, lookup_order, charge_card)))
    session.start_turn("go")
    await session.run_model()
    session.reject("c2", "no")
    first = session.records[0]
    session.records[0] = dataclasses.replace(first, status=first.status.__class__.OUTCOME_UNKNOWN)
    messages = session.runner.build_unfinished_turn_messages(session.context())
    assert [json.loads(m.framework_item) for m in messages] == [
        {"call_id": "c1", "output": OUTCOME_UNKNOWN_TOOL_RESULT, "type": "function_call_output"},
        {"call_id": "c2", "output": "no", "type": "function_call_output"},
    ]


def test_tracing_is_off_unless_asked_for() -> None:
    agent = agent_with(ScriptedModel([]))
    assert OpenAIAgentsRunner(agent).run_config.tracing_disabled is True
    assert OpenAIAgentsRunner(agent, tracing=True).run_config.tracing_disabled is False


def test_bad_arguments_are_rejected_clearly() -> None:
    with pytest.raises(TypeError, match=r"agents\.Agent"):
        OpenAIAgentsRunner("not an agent")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ToolEffect"):
        declare_tool_effect(plain, "sometimes")
    # The effect's wire value works as in every adapter.
    assert declare_tool_effect(plain, "read") is plain


async def test_enabled_built_in_tools_are_offered_and_deferred_to_the_session() -> None:
    model = ScriptedModel(
        [
            ModelStep(
                output=[function_call("ask_user", {"question": "Which order?"}, call_id="q1")]
            ),
            ModelStep(output=[assistant_message("Order 7 it is.")]),
        ]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, lookup_order)), built_ins=("ask_user",))
    session.start_turn("help")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert [tool.name for tool in model.calls[0].tools] == ["lookup_order", "ask_user"]
    [call] = outcome.tool_calls
    assert (call.tool_name, call.policy) == ("ask_user", ResolvedToolPolicy(ToolEffect.READ, False))
    # The session answers the question itself and records the answer as the output.
    session.records = [
        dataclasses.replace(r, status=AgentToolCallStatus.SUCCEEDED, output="order 7")
        for r in session.records
    ]
    final = await session.run_model()
    assert isinstance(final, TurnCompleted)
    assert model.calls[1].input[-1] == {
        "call_id": "q1",
        "output": "order 7",
        "type": "function_call_output",
    }


@function_tool
def confirm_address(order_id: str) -> ToolInputRequested | str:
    """Ask the user which address before shipping."""
    answers = get_deferred_tool_execution().input_answers
    if not answers:
        return ToolInputRequested("Ship to home or office?", choices=("home", "office"))
    return f"{order_id} ships to {answers[0]}"


async def test_a_tool_can_ask_the_user_first() -> None:
    model = ScriptedModel(
        [ModelStep(output=[function_call("confirm_address", {"order_id": "9"}, call_id="c1")])]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, confirm_address)))
    session.start_turn("ship 9")
    await session.run_model()
    [record] = session.records
    asked = await session.runner.execute_deferred_tool_call(session.execution(record))
    assert asked == ToolInputRequested("Ship to home or office?", choices=("home", "office"))
    answered = dataclasses.replace(session.execution(record), input_answers=("office",))
    result = await session.runner.execute_deferred_tool_call(answered)
    assert result == ToolExecutionResult("9 ships to office")


@tool_input_guardrail
def no_big_refunds(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    amount = json.loads(data.context.tool_arguments)["amount"]
    if amount > 100:
        return ToolGuardrailFunctionOutput.reject_content("refunds over 100 need a manager")
    if amount < 0:
        return ToolGuardrailFunctionOutput.raise_exception()
    return ToolGuardrailFunctionOutput.allow()


@tool_output_guardrail
def hide_secrets(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    if "secret" in str(data.output):
        return ToolGuardrailFunctionOutput.reject_content("[output withheld]")
    return ToolGuardrailFunctionOutput.allow()


@function_tool(tool_input_guardrails=[no_big_refunds], tool_output_guardrails=[hide_secrets])
def issue_refund(amount: int) -> str:
    """Refund an amount."""
    ran.append(f"refund {amount}")
    return f"refunded {amount} with secret code" if amount == 7 else f"refunded {amount}"


async def test_tool_guardrails_run_in_the_tool_step() -> None:
    model = ScriptedModel(
        [
            ModelStep(
                output=[
                    function_call("issue_refund", {"amount": 5}, call_id="ok"),
                    function_call("issue_refund", {"amount": 500}, call_id="big"),
                    function_call("issue_refund", {"amount": -1}, call_id="negative"),
                    function_call("issue_refund", {"amount": 7}, call_id="secret"),
                ]
            )
        ]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, issue_refund)))
    session.start_turn("refunds")
    await session.run_model()
    await session.run_tools()
    results = {r.tool_call_id: (r.status.value, r.output or r.error) for r in session.records}
    assert results["ok"] == ("succeeded", "refunded 5")
    assert results["big"] == ("failed", "refunds over 100 need a manager")
    assert results["negative"][0] == "failed"
    assert "no_big_refunds" in str(results["negative"][1])
    assert results["secret"] == ("succeeded", "[output withheld]")
    assert ran == ["refund 5", "refund 7"], (
        "a guardrail that stops a call keeps the body from running"
    )


async def test_a_call_id_the_session_cannot_key_fails_the_model_step() -> None:
    model = ScriptedModel(
        [ModelStep(output=[function_call("lookup_order", {"order_id": "1"}, call_id="a/b")])]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, lookup_order)))
    session.start_turn("look up 1")

    with pytest.raises(RuntimeError, match="non-empty ID without '/'"):
        await session.run_model()
    assert ran == []


async def test_max_turns_bounds_the_model_calls_of_one_session_turn() -> None:
    # A model that never stops calling tools must not loop forever: the SDK's bound
    # is carried in the run state across the turn's model steps.
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup_order", {"order_id": str(n)}, call_id=f"m{n}")])
            for n in range(5)
        ]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model, lookup_order), max_turns=3))
    session.start_turn("loop")
    for _ in range(3):
        assert isinstance(await session.run_model(), ToolCallsRequested)
        await session.run_tools()
    with pytest.raises(MaxTurnsExceeded):
        await session.run_model()
    assert len(model.calls) == 3


def test_max_turns_must_be_a_positive_integer_or_none() -> None:
    agent = agent_with(ScriptedModel([]), lookup_order)
    for bad in (0, -1, True, 2.5, "3"):
        with pytest.raises(ValueError, match="max_turns"):
            OpenAIAgentsRunner(agent, max_turns=bad)  # pyright: ignore[reportArgumentType]
    assert OpenAIAgentsRunner(agent, max_turns=None).max_turns is None


async def test_stored_items_are_decoded_once_and_the_sdk_leaves_them_as_stored() -> None:
    from dex_agents_openai_agents import _messages as items

    cache = items._DECODED_ITEMS  # pyright: ignore[reportPrivateUsage]
    model = ScriptedModel(
        [
            ModelStep(output=[assistant_message(f"Answer {n}.")], usage=usage(10, 2))
            for n in range(3)
        ]
    )
    session = Session(OpenAIAgentsRunner(agent_with(model)))
    await session.run_text_turns("a question only this test asks", "and a second one")
    session.start_turn("and a third")
    hits, misses = cache.hits, cache.misses

    await session.run_model()

    # Replayed before, so cached: the first three items. Decoded now, for the first time:
    # the last answer (written by the step before, never read yet) and the new question.
    assert (cache.hits - hits, cache.misses - misses) == (3, 2)
    assert model.calls[2].input[:5] == session.items()[:5]
    cached = [items.stored_item(message) for message in session.messages]
    assert cached == session.items(), "the SDK changed no cached item"
