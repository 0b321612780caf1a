"""A prebuilt LangGraph agent as a real session Flow on the local engine (in-process Worker)."""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from pydantic import Field

from dex_agents import AgentToolCallStatus, ToolEffect
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    executed_step_types,
    read_step_history,
)
from dex_agents_langgraph import (
    create_langgraph_session_flow,
    declare_tool_effect,
    idempotency_key_of,
)
from dex_local_engine import LocalEngine

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


class ListChatModel(BaseChatModel):
    responses: list[AIMessage]
    calls: list[list[BaseMessage]] = Field(default_factory=list[list[BaseMessage]])

    @property
    def _llm_type(self) -> str:
        return "list"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=list(tools), **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        message = self.responses[len(self.calls) - 1].model_copy(deep=True)
        return ChatResult(generations=[ChatGeneration(message=message)])


charges: list[tuple[str, str | None]] = []


@tool
def check_balance(account: str) -> str:
    """Read an account's balance."""
    return f"{account}: 120 EUR"


@tool
def charge_card(account: str, amount: int, config: RunnableConfig) -> str:
    """Charge an account."""
    charges.append((account, idempotency_key_of(config)))
    return f"charged {amount}"


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine(database=":memory:", port=0) as running:
        yield running


async def test_prebuilt_agent_session_with_a_read_and_a_rejected_write(engine: LocalEngine) -> None:
    model = ListChatModel(
        responses=[
            AIMessage(
                content="Checking first.",
                tool_calls=[
                    {
                        "id": "call_a",
                        "name": "check_balance",
                        "args": {"account": "acme"},
                        "type": "tool_call",
                    },
                    {
                        "id": "call_b",
                        "name": "charge_card",
                        "args": {"account": "acme", "amount": 50},
                        "type": "tool_call",
                    },
                ],
                usage_metadata={"input_tokens": 30, "output_tokens": 10, "total_tokens": 40},
            ),
            AIMessage(
                content="The balance is 120 EUR; the charge was declined.",
                usage_metadata={"input_tokens": 50, "output_tokens": 12, "total_tokens": 62},
            ),
        ]
    )
    tools = [
        declare_tool_effect(check_balance, ToolEffect.READ),
        declare_tool_effect(charge_card, ToolEffect.NON_IDEMPOTENT_WRITE),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(model, tools, interrupt_before=["tools"])
    flow = create_langgraph_session_flow(graph, f"LangGraphAgent{uuid.uuid4().hex[:8]}")
    environment = await AgentTestEnvironment.start(
        server_address=engine.address, flows=[flow], worker_in_process=True
    )
    try:
        sessions = AgentSessionTestClient(environment.client, flow)
        session_id = f"lg-{uuid.uuid4().hex[:8]}"
        await sessions.start_session(session_id, "Charge acme 50 EUR")
        interrupt = await sessions.wait_for_pending_interrupt(session_id, "charge_card")
        assert interrupt.tool_call_id == "call_b"
        await sessions.wait_for_tool_call(session_id, "call_a", AgentToolCallStatus.SUCCEEDED)
        assert await sessions.resolve_interrupt(
            session_id, "call_b", False, "Over the daily limit."
        )
        snapshot = await sessions.wait_for_completed_turns(session_id, 1)
        history = await read_step_history(engine.address, session_id)
    finally:
        await environment.close()

    assert charges == []
    assert len(model.calls) == 2
    results = {m.tool_call_id: m for m in model.calls[1] if isinstance(m, ToolMessage)}
    assert (results["call_a"].content, results["call_a"].status) == ("acme: 120 EUR", "success")
    assert (results["call_b"].content, results["call_b"].status) == (
        "Over the daily limit.",
        "error",
    )
    assert [m.role for m in snapshot.messages] == [
        "user",
        "assistant",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert snapshot.messages[-1].text == "The balance is 120 EUR; the charge was declined."
    assert json.loads(snapshot.messages[1].framework_item)["type"] == "ai"
    assert (
        snapshot.usage.model_calls,
        snapshot.usage.input_tokens,
        snapshot.usage.output_tokens,
    ) == (2, 80, 22)
    steps = executed_step_types(history)
    assert steps.count("RunModel") == 2
    assert "CallTool" in steps
    assert "AwaitToolApproval" in steps
    assert "CallSingleAttemptTool" not in steps
