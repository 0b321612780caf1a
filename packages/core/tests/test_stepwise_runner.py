"""StepwiseRunner.run_model_step driven directly with an AgentTurnContext."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from dex_agents import AgentToolCall, AgentToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.models import (
    ModelRequest,
    ModelToolCall,
    ModelToolDefinition,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.runner import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
    model_call_limit_result,
)
from dex_agents.stepwise import (
    AgentDefinition,
    InstructionContext,
    StepwiseRunner,
    ToolCallContext,
    function_tool,
)
from dex_agents.stepwise._mcp import decode_source_reference
from dex_agents.testing import RunnerDriver as Session

ORDERS = {"42": "shipped", "7": "processing"}


@function_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return ORDERS.get(order_id, "unknown order")


refunds: list[str] = []


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
def refund_order(order_id: str, context: ToolCallContext) -> dict[str, str]:
    """Refund an order."""
    refunds.append(context.idempotency_key)
    return {"refunded": order_id}


def lookup_then_answer(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text="; ".join(r.output for r in results))
    return ScriptedModelReply(
        text="Checking.",
        reasoning="Need the order.",
        tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "42"})],
    )


def agent(script: Any, **fields: Any) -> AgentDefinition:
    values: dict[str, Any] = {
        "name": "support",
        "instructions": "Help.",
        "model": ScriptedModelClient(script),
        "tools": [lookup_order, refund_order],
    }
    values.update(fields)
    return AgentDefinition(**values)


async def test_one_model_call_per_step_and_incremental_transcript() -> None:
    definition = agent(lookup_then_answer)
    model = definition.model
    assert isinstance(model, ScriptedModelClient)
    session = Session(StepwiseRunner(definition))
    session.start_turn("Where is order 42?")

    first = await session.run_model()
    assert isinstance(first, ToolCallsRequested)
    assert len(model.requests) == 1
    assert json.loads(first.framework_run_state) == {"model_calls": 1}
    assert [c.tool_name for c in first.tool_calls] == ["lookup_order"]
    assert first.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.READ, False)
    assert first.usage.model_calls == 1
    # The model output is stored at once, while the tool runs.
    assert [m.role for m in first.new_messages] == ["assistant"]
    assert session.events.text == ["Checking."]
    assert session.events.reasoning == ["Need the order."]

    await session.run_tools()
    second = await session.run_model()
    assert isinstance(second, TurnCompleted)
    assert len(model.requests) == 2
    assert [m.role for m in second.new_messages] == ["tool", "assistant"]
    assert session.items() == [
        {"type": "user_text", "text": "Where is order 42?"},
        {
            "type": "model_output",
            "provider": "scripted",
            "api": "scripted",
            "item": {
                "text": "Checking.",
                "reasoning": "Need the order.",
                "tool_calls": [
                    {
                        "tool_call_id": "call_1_1",
                        "tool_name": "lookup_order",
                        "arguments": '{"order_id":"42"}',
                    }
                ],
            },
            "text": "Checking.",
            "tool_calls": [
                {
                    "tool_call_id": "call_1_1",
                    "tool_name": "lookup_order",
                    "arguments": '{"order_id":"42"}',
                }
            ],
        },
        {
            "type": "tool_result",
            "tool_call_id": "call_1_1",
            "tool_name": "lookup_order",
            "output": "shipped",
        },
        {
            "type": "model_output",
            "provider": "scripted",
            "api": "scripted",
            "item": {"text": "shipped", "reasoning": "", "tool_calls": []},
            "text": "shipped",
            "tool_calls": [],
        },
    ]
    # The second request carried the instructions, the history and the result, and tools.
    request = model.requests[1]
    assert request.instructions == "Help."
    assert [t.name for t in request.tools] == ["lookup_order", "refund_order"]
    assert ScriptedModelClient.tool_results(request)[0].output == "shipped"

    # History replay: the next turn's request carries the whole stored transcript.
    session.start_turn("And order 7?")
    await session.run_model()
    assert ScriptedModelClient.user_texts(model.requests[2]) == [
        "Where is order 42?",
        "And order 7?",
    ]
    assert len(model.requests[2].items) == 5


async def test_a_rerun_model_step_builds_the_same_request() -> None:
    definition = agent(lookup_then_answer)
    session = Session(StepwiseRunner(definition))
    session.start_turn("Where is order 42?")
    context = session.context()
    first = await session.runner.run_model_step(context)
    again = await session.runner.run_model_step(context)  # a retried attempt, same committed state
    assert first == again


async def test_an_orphaned_tool_call_gets_the_outcome_unknown_result() -> None:
    definition = agent(lookup_then_answer)
    session = Session(StepwiseRunner(definition))
    session.start_turn("Where is order 42?")
    await session.run_model()
    # The turn failed before the tool's result was stored; a new turn starts.
    session.start_turn("Try again")
    await session.run_model()
    model = definition.model
    assert isinstance(model, ScriptedModelClient)
    items = model.requests[-1].items
    kinds = [item.type for item in items]
    assert kinds == ["user_text", "model_output", "tool_result", "user_text"]
    orphan = items[2]
    assert orphan.type == "tool_result"
    assert orphan.output == OUTCOME_UNKNOWN_TOOL_RESULT
    # The pairing lives in the request only; nothing is stored for it.
    assert [m.role for m in session.messages] == ["user", "assistant", "user", "assistant"]


async def test_unfinished_turn_messages_are_the_results_not_stored_yet() -> None:
    session = Session(StepwiseRunner(agent(lookup_then_answer)))
    session.start_turn("Where is order 42?")
    await session.run_model()
    await session.run_tools()
    unfinished = session.runner.build_unfinished_turn_messages(session.context())
    assert [(m.role, m.tool_output) for m in unfinished] == [("tool", "shipped")]


async def test_the_model_call_limit_removes_tools_and_ends_the_turn() -> None:
    def always_a_tool(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})])

    definition = agent(always_a_tool, max_model_calls_per_turn=2)
    model = definition.model
    assert isinstance(model, ScriptedModelClient)
    session = Session(StepwiseRunner(definition))
    session.start_turn("loop")
    for _ in range(2):
        assert isinstance(await session.run_model(), ToolCallsRequested)
        await session.run_tools()
    last = await session.run_model()
    assert isinstance(last, TurnCompleted)
    assert [len(r.tools) for r in model.requests] == [2, 2, 0]
    assert [m.role for m in last.new_messages] == ["tool", "assistant", "tool"]
    assert last.new_messages[-1].tool_output == model_call_limit_result(2)
    assert (
        model_call_limit_result(2)
        == "The tool call was not run: this turn reached its limit of 2 model calls."
    )


async def test_schema_mismatch_and_unknown_tool_reach_the_model_as_failures() -> None:
    def bad_calls(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        if results:
            return ScriptedModelReply(text=" | ".join(r.output for r in results))
        return ScriptedModelReply(
            tool_calls=[
                ScriptedToolCall("lookup_order", {"order": 42}),
                ScriptedToolCall("launch_rocket", {}),
            ]
        )

    session = Session(StepwiseRunner(agent(bad_calls)))
    session.start_turn("go")
    requested = await session.run_model()
    assert isinstance(requested, ToolCallsRequested)
    # A tool the runner does not have gets the session default (call_policy): here
    # unclassified, which asks for approval before the call fails.
    assert requested.tool_calls[1].policy == ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True)
    await session.run_tools()
    assert [r.status for r in session.records] == [
        AgentToolCallStatus.FAILED,
        AgentToolCallStatus.FAILED,
    ]
    assert session.records[0].error is not None
    assert session.records[0].error.startswith("invalid arguments for tool lookup_order")
    assert session.records[1].error == "unknown tool launch_rocket"
    done = await session.run_model()
    assert isinstance(done, TurnCompleted)
    assert "unknown tool launch_rocket" in (done.new_messages[-1].text or "")


async def test_reserved_built_in_names_fail_before_the_model_call() -> None:
    @function_tool(effect=ToolEffect.READ)
    def ask_user(question: str) -> str:
        """Shadows the built-in."""
        return question

    definition = agent(lookup_then_answer, tools=[ask_user])
    session = Session(StepwiseRunner(definition), built_ins=("ask_user",))
    session.start_turn("hi")
    with pytest.raises(TypeError, match="tool ask_user uses the name of an enabled built-in tool"):
        await session.run_model()
    model = definition.model
    assert isinstance(model, ScriptedModelClient)
    assert len(model.requests) == 0
    with pytest.raises(ValueError, match="enabled built-in tool"):
        agent(lookup_then_answer, tools=[ask_user], built_in_tools=["ask_user"])


async def test_built_in_tools_are_offered_last_with_their_fixed_policy() -> None:
    def ask(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(
            tool_calls=[ScriptedToolCall("ask_user", {"question": "Which order?"})]
        )

    definition = agent(ask, built_in_tools=["ask_user", "durable_wait"])
    session = Session(StepwiseRunner(definition), built_ins=("ask_user", "durable_wait"))
    session.start_turn("hi")
    requested = await session.run_model()
    assert isinstance(requested, ToolCallsRequested)
    assert requested.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.READ, False)
    model = definition.model
    assert isinstance(model, ScriptedModelClient)
    assert [t.name for t in model.requests[0].tools] == [
        "lookup_order",
        "refund_order",
        "ask_user",
        "durable_wait",
    ]


async def test_session_policy_wins_over_the_tools_own_approval() -> None:
    def refund(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(
            tool_calls=[
                ScriptedToolCall("refund_order", {"order_id": "1"}),
                ScriptedToolCall("lookup_order", {"order_id": "1"}),
            ]
        )

    own = Session(StepwiseRunner(agent(refund)))
    own.start_turn("refund")
    requested = await own.run_model()
    assert isinstance(requested, ToolCallsRequested)
    assert requested.tool_calls[0].policy == ResolvedToolPolicy(
        ToolEffect.NON_IDEMPOTENT_WRITE, True
    )

    policies = {
        "refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=False),
        "lookup_order": ToolPolicy(ToolEffect.READ, requires_approval=True),
    }
    ruled = Session(StepwiseRunner(agent(refund, tool_policies=policies)), policies=policies)
    ruled.start_turn("refund")
    requested = await ruled.run_model()
    assert isinstance(requested, ToolCallsRequested)
    assert [c.policy for c in requested.tool_calls] == [
        ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False),
        ResolvedToolPolicy(ToolEffect.READ, True),
    ]


async def test_instructions_function_runs_in_every_model_step() -> None:
    seen: list[InstructionContext] = []

    async def instructions(context: InstructionContext) -> str:
        seen.append(context)
        return f"You are on {context.turn_id}."

    definition = agent(lookup_then_answer, instructions=instructions)
    session = Session(StepwiseRunner(definition))
    session.start_turn("hi")
    await session.run_model()
    model = definition.model
    assert isinstance(model, ScriptedModelClient)
    assert model.requests[0].instructions == "You are on turn-1."
    assert (seen[0].flow_id, seen[0].attempt) == ("s-1", 1)


class Listing:
    def __init__(
        self, name: str, tools: list[ModelToolDefinition], *, fail: bool = False, hang: bool = False
    ) -> None:
        self._name = name
        self._tools = tools
        self._fail = fail
        self._hang = hang
        self.executed: list[str | None] = []

    @property
    def source_name(self) -> str:
        return self._name

    async def list_tools(self) -> Sequence[ModelToolDefinition]:
        if self._fail:
            raise ConnectionError("server down")
        if self._hang:
            await asyncio.sleep(30)
        return self._tools

    def deferred_tool_call(
        self, turn: AgentTurnContext, call: ModelToolCall, listed_tool: ModelToolDefinition
    ) -> DeferredToolCall:
        return DeferredToolCall(
            call.call_id,
            call.name,
            call.arguments,
            turn.resolve_tool_policy(call.name, ToolEffect.READ),
            tool_source_reference=f"ref:{listed_tool.name}",
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        self.executed.append(call.tool_call.tool_source_reference)
        return ToolExecutionResult("from source")


SEARCH = ModelToolDefinition("search_files", "Search.", {"type": "object", "properties": {}})


async def test_tool_sources_are_listed_and_their_calls_carry_the_source_reference() -> None:
    def call_search(request: ModelRequest) -> ScriptedModelReply:
        if ScriptedModelClient.tool_results(request):
            return ScriptedModelReply(text="done")
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("search_files", {})])

    source = Listing("files", [SEARCH])
    down = Listing("tickets", [], fail=True)
    from datetime import timedelta

    slow = Listing("slow", [], hang=True)
    definition = agent(
        call_search,
        tool_sources=[source, down, slow],
        tool_source_listing_timeout=timedelta(milliseconds=50),
    )
    session = Session(StepwiseRunner(definition))
    session.start_turn("find")
    requested = await session.run_model()
    assert isinstance(requested, ToolCallsRequested)
    reference = decode_source_reference(requested.tool_calls[0].tool_source_reference)
    assert reference is not None
    assert (reference.source_name, reference.reference) == ("files", "ref:search_files")
    await session.run_tools()
    assert source.executed == ["ref:search_files"]
    assert session.records[0].output == "from source"
    model = definition.model
    assert isinstance(model, ScriptedModelClient)
    assert [t.name for t in model.requests[0].tools] == [
        "lookup_order",
        "refund_order",
        "search_files",
    ]


async def test_a_source_that_misses_its_listing_deadline_is_named_with_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A timeout has no message of its own: the warning names its type, never "()"."""
    from datetime import timedelta

    definition = agent(
        lambda request: ScriptedModelReply(text="done"),
        tool_sources=[Listing("slow", [], hang=True), Listing("down", [], fail=True)],
        tool_source_listing_timeout=timedelta(milliseconds=50),
    )
    session = Session(StepwiseRunner(definition))
    session.start_turn("find")
    with caplog.at_level(logging.WARNING, logger="dex_agents"):
        await session.run_model()
    assert "'slow' offers no tools in this model call: listing failed (TimeoutError)" in caplog.text
    assert "'down' offers no tools in this model call: listing failed (server down)" in caplog.text


async def test_a_source_tool_clashing_with_a_function_tool_fails_the_step() -> None:
    clash = Listing("files", [ModelToolDefinition("lookup_order", "", {"type": "object"})])
    session = Session(StepwiseRunner(agent(lookup_then_answer, tool_sources=[clash])))
    session.start_turn("x")
    with pytest.raises(
        TypeError, match="tool lookup_order of a tool source uses the name of a function tool"
    ):
        await session.run_model()
    twice = [Listing("a", [SEARCH]), Listing("b", [SEARCH])]
    session = Session(StepwiseRunner(agent(lookup_then_answer, tool_sources=twice)))
    session.start_turn("x")
    with pytest.raises(TypeError, match="two tool sources list a tool named search_files"):
        await session.run_model()


async def test_a_stored_call_of_a_missing_source_is_not_a_tool_failure() -> None:
    from dex_agents.stepwise._mcp import encode_source_reference

    session = Session(StepwiseRunner(agent(lookup_then_answer)))
    record = AgentToolCall(
        tool_call_id="c1",
        turn_id="turn-1",
        tool_name="search_files",
        arguments="{}",
        effect=ToolEffect.READ,
        requires_approval=False,
        status=AgentToolCallStatus.APPROVED,
        deferral_order=0,
        tool_source_reference=encode_source_reference("gone", None),
    )
    with pytest.raises(LookupError, match="tool source 'gone'"):
        await session.runner.execute_deferred_tool_call(session.execution(record))


async def test_a_write_tool_gets_the_idempotency_key() -> None:
    refunds.clear()

    def refund(request: ModelRequest) -> ScriptedModelReply:
        if ScriptedModelClient.tool_results(request):
            return ScriptedModelReply(text="ok")
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("refund_order", {"order_id": "1"})])

    session = Session(StepwiseRunner(agent(refund)))
    session.start_turn("refund")
    await session.run_model()
    await session.run_tools()
    assert refunds == ["s-1/turn-1/call_1_1"]
    assert session.records[0].output == '{"refunded": "1"}'


async def test_each_stored_transcript_item_is_decoded_once_per_process() -> None:
    from dex_agents.stepwise._messages import DECODED_TRANSCRIPT_ITEMS, decode_transcript

    session = Session(StepwiseRunner(agent(lookup_then_answer)))
    session.start_turn("Where is order 42?")
    await session.run_model()
    await session.run_tools()
    await session.run_model()
    first = decode_transcript(session.messages)
    misses = DECODED_TRANSCRIPT_ITEMS.misses
    # Every later model step reads the same stored items: no decode, the same frozen items.
    again = decode_transcript(session.messages)
    assert DECODED_TRANSCRIPT_ITEMS.misses == misses
    assert len(again) == len(first) == 4
    assert all(a is b for a, b in zip(again, first, strict=True))
