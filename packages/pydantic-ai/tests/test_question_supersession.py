"""``question_supersedes_later_calls`` with a Pydantic AI agent: the session, not the
runner, keeps the call after a question from running."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dex_agents import AgentStatus, AgentToolCallStatus
from dex_agents.runner import TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment, PrivateDexEngine
from dex_agents_pydantic_ai import create_pydantic_ai_session_flow


@pytest.fixture(scope="module")
def engine() -> Iterator[PrivateDexEngine]:
    with PrivateDexEngine.start() as running:
        yield running


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks and waits in one response; then repeats the results it got."""
    del info
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(" | ".join(str(p.content) for p in returns))])
    return ModelResponse(
        parts=[
            ToolCallPart("ask_user", {"question": "Which date?"}, tool_call_id="q1"),
            ToolCallPart(
                "durable_wait", {"duration_seconds": 30, "reason": "later"}, tool_call_id="w1"
            ),
        ]
    )


async def test_the_wait_after_a_question_is_not_run(engine: PrivateDexEngine) -> None:
    flow = create_pydantic_ai_session_flow(
        Agent(FunctionModel(respond)),
        f"PydanticAISupersede{uuid.uuid4().hex[:8]}",
        built_in_tools=("ask_user", "durable_wait"),
        question_supersedes_later_calls=True,
    )
    session_id = f"s-{uuid.uuid4().hex[:10]}"
    async with await AgentTestEnvironment.start(
        server_address=engine.server_address, flows=[flow], worker_in_process=True
    ) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        await sessions.start_session(session_id, "ask me, then wait")
        interrupt = await sessions.wait_for_pending_interrupt(session_id, "ask_user")
        wait = await sessions.wait_for_tool_call(session_id, "w1", AgentToolCallStatus.REJECTED)
        assert wait.cancellation_reason == "superseded_by_user_input"
        assert await sessions.answer_question(session_id, interrupt.interrupt_id, "Friday")
        done = await sessions.wait_for_completed_turns(session_id, 1)

    assert done.state is not None
    assert done.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    assert done.messages[-1].text == (
        f'{{"status":"answered","answer":"Friday"}} | {TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT}'
    )
