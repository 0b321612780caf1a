"""A Pydantic AI agent as a real session: local engine, in-process Worker, FunctionModel."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from dex_agents import AgentToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment, PrivateDexEngine
from dex_agents_pydantic_ai import (
    IDEMPOTENCY_KEY_METADATA_KEY,
    PydanticAIRunner,
    create_pydantic_ai_session_flow,
    dex_tool_metadata,
)

THINKING = ThinkingPart("The user wants a refund.", signature="sig-1", provider_name="anthropic")


@pytest.fixture(scope="module")
def engine() -> Iterator[PrivateDexEngine]:
    with PrivateDexEngine.start() as running:
        yield running


@dataclass
class Store:
    customer: str
    refunds: list[tuple[str, str, str]] = field(default_factory=list[tuple[str, str, str]])


@dataclass
class ModelLog:
    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])


def refund_model(log: ModelLog) -> FunctionModel:
    """Asks for lookup + refund on a prompt, answers with the tool results it got."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        log.requests.append(list(messages))
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        usage = RequestUsage(input_tokens=100 * len(log.requests), output_tokens=7)
        if returns:
            text = "; ".join(f"{p.tool_name}={p.content} ({p.outcome})" for p in returns)
            return ModelResponse(parts=[TextPart(text)], usage=usage)
        prompt = next(p for p in last.parts if isinstance(p, UserPromptPart))
        order = str(prompt.content).split()[-1]
        return ModelResponse(
            parts=[
                THINKING,
                ToolCallPart("lookup_order", {"order_id": order}, tool_call_id=f"look-{order}"),
                ToolCallPart(
                    "refund_order", {"order_id": order, "cents": 500}, tool_call_id=f"pay-{order}"
                ),
            ],
            usage=usage,
        )

    return FunctionModel(respond)


def shop_agent(log: ModelLog) -> Agent[Store, str]:
    agent = Agent(refund_model(log), deps_type=Store, instructions="You handle refunds.")

    @agent.tool(metadata=dex_tool_metadata(ToolEffect.READ))
    def lookup_order(ctx: RunContext[Store], order_id: str) -> str:
        """Look up an order."""
        return f"order {order_id} of {ctx.deps.customer}"

    @agent.tool(requires_approval=True)
    def refund_order(ctx: RunContext[Store], order_id: str, cents: int) -> str:
        """Refund an order."""
        key = (ctx.metadata or {})[IDEMPOTENCY_KEY_METADATA_KEY]
        ctx.deps.refunds.append((ctx.deps.customer, order_id, key))
        return f"refunded {cents} cents"

    return agent


async def test_a_session_runs_the_agents_tools_with_deps_approval_and_rejection(
    engine: PrivateDexEngine,
) -> None:
    log = ModelLog()
    stores: dict[str, Store] = {}

    def store_of(session_id: str) -> Store:
        return stores.setdefault(session_id, Store(customer=f"customer of {session_id}"))

    flow = create_pydantic_ai_session_flow(
        shop_agent(log),
        f"PydanticAIShop{uuid.uuid4().hex[:8]}",
        deps_factory=store_of,
        tool_policies={"refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, True)},
    )
    session_id = f"s-{uuid.uuid4().hex[:10]}"
    async with await AgentTestEnvironment.start(
        server_address=engine.server_address, flows=[flow], worker_in_process=True
    ) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        await sessions.start_session(session_id, "refund order 42")

        interrupt = await sessions.wait_for_pending_interrupt(session_id, "refund_order")
        lookup = await sessions.wait_for_tool_call(
            session_id, "look-42", AgentToolCallStatus.SUCCEEDED
        )
        assert lookup.effect is ToolEffect.READ
        assert lookup.output == f"order 42 of customer of {session_id}"
        assert await sessions.resolve_interrupt(session_id, interrupt.interrupt_id, True)
        first = await sessions.wait_for_completed_turns(session_id, 1)

        assert await sessions.send_user_message(session_id, "refund order 7")
        second_interrupt = await sessions.wait_for_pending_interrupt(session_id, "refund_order")
        assert await sessions.resolve_interrupt(
            session_id, second_interrupt.interrupt_id, False, "Order 7 is not refundable."
        )
        second = await sessions.wait_for_completed_turns(session_id, 2)

    store = stores[session_id]
    assert store.refunds == [(f"customer of {session_id}", "42", f"{session_id}/turn-1/pay-42")]
    first_answer = first.messages[-1]
    assert first_answer.role == "assistant"
    assert first_answer.text == (
        f"lookup_order=order 42 of customer of {session_id} (success);"
        " refund_order=refunded 500 cents (success)"
    )
    # The rejection reached the model through Pydantic AI's ToolDenied, message and all.
    assert second.messages[-1].text == (
        f"lookup_order=order 7 of customer of {session_id} (success);"
        " refund_order=Order 7 is not refundable. (denied)"
    )
    stored_rejection = next(
        m for m in second.messages if m.role == "tool" and m.tool_call_id == "pay-7"
    )
    assert stored_rejection.tool_output == "Order 7 is not refundable."
    # Four model requests, one per RunModel; usage adds the single responses only.
    assert len(log.requests) == 4
    assert second.usage.model_calls == 4
    assert second.usage.input_tokens == 100 + 200 + 300 + 400
    # Turn 2's requests were given turn 1 as stored, thinking signature included.
    turn_one_response = log.requests[2][1]
    assert isinstance(turn_one_response, ModelResponse)
    assert turn_one_response.parts[0] == THINKING
    # Every stored item is Pydantic AI's own JSON; together they are the whole conversation.
    history: list[Any] = []
    for message in second.messages:
        history.extend(ModelMessagesTypeAdapter.validate_json(message.framework_item))
    assert [type(m).__name__ for m in history] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    assert [(m.role, m.tool_call_id) for m in second.messages[:4]] == [
        ("user", None),
        ("assistant", "look-42"),
        ("assistant", "pay-42"),
        ("tool", "look-42"),
    ]
    assert json.loads(second.messages[2].tool_arguments or "") == {"order_id": "42", "cents": 500}


async def test_a_session_reuses_its_decoded_history_without_leaking_run_metadata(
    engine: PrivateDexEngine,
) -> None:
    log = ModelLog()
    agent = shop_agent(log)
    flow = create_pydantic_ai_session_flow(
        agent,
        f"PydanticAIHistory{uuid.uuid4().hex[:8]}",
        deps=Store(customer="ann"),
        tool_policies={"refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False)},
    )
    runner = flow.runner
    assert isinstance(runner, PydanticAIRunner)
    session_id = f"s-{uuid.uuid4().hex[:10]}"
    async with await AgentTestEnvironment.start(
        server_address=engine.server_address, flows=[flow], worker_in_process=True
    ) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        await sessions.start_session(session_id, "refund order 1")
        await sessions.wait_for_completed_turns(session_id, 1)
        for turn in (2, 3):
            assert await sessions.send_user_message(session_id, f"refund order {turn}")
            done = await sessions.wait_for_completed_turns(session_id, turn)

    # Later model steps reused the decoded history instead of decoding it again.
    assert runner.session_histories.reused_messages > 0
    assert len(log.requests) == 6
    # The first user prompt is stored without run metadata: the run whose history it ended
    # filled its own in, and no later run sees an earlier run's.
    first_prompt = [request[0] for request in log.requests]
    assert first_prompt[0].run_id is not None
    assert all(message.run_id is None for message in first_prompt[1:])
    # What the Worker kept is the stored conversation as stored: no run filled its metadata in.
    kept = runner.session_histories.history(session_id, done.messages)
    fresh = [
        message
        for item in done.messages
        for message in ModelMessagesTypeAdapter.validate_json(item.framework_item)
    ]
    assert [(m.run_id, m.conversation_id) for m in kept] == [
        (m.run_id, m.conversation_id) for m in fresh
    ]
    # The last request got the stored conversation (its two tool returns and its answer were
    # stored after it) and then its own tool returns.
    stored = [
        message
        for item in done.messages[:-3]
        for message in ModelMessagesTypeAdapter.validate_json(item.framework_item)
    ]
    assert _shape(log.requests[-1][: len(stored)]) == _shape(stored)


def _shape(history: list[ModelMessage]) -> list[list[tuple[str, object]]]:
    """Each message's parts by type and content (a decoded prompt gets a new timestamp)."""
    return [
        [(type(part).__name__, getattr(part, "content", None)) for part in message.parts]
        for message in history
    ]
