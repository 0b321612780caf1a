"""Each session's history is decoded and paired once per Worker, and only the new messages
after that; what Pydantic AI changes at the end of a run's history is never kept."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dex_agents import AgentMessage
from dex_agents.runner import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.testing import RunnerDriver
from dex_agents_pydantic_ai import PydanticAIRunner
from dex_agents_pydantic_ai import _messages as session_history
from dex_agents_pydantic_ai._messages import (
    SessionHistories,
    answer_orphaned_tool_calls,
    decode_history,
    encode_framework_item,
)


def _lookup_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if any(isinstance(part, ToolReturnPart) for part in last.parts):
        return ModelResponse(parts=[TextPart("done")])
    turn = sum(isinstance(m, ModelRequest) and _prompt(m) for m in messages)
    return ModelResponse(parts=[ToolCallPart("lookup", {"n": 1}, tool_call_id=f"c{turn}")])


def _prompt(message: ModelRequest) -> bool:
    return any(isinstance(part, UserPromptPart) for part in message.parts)


def _agent(seen: list[list[ModelMessage]]) -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return _lookup_then_answer(messages, info)

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def lookup(n: int) -> str:  # pyright: ignore[reportUnusedFunction]
        return f"found {n}"

    return agent


async def _turns(driver: RunnerDriver[PydanticAIRunner[None]], count: int) -> None:
    for number in range(count):
        driver.start_turn(f"question {number}")
        await driver.run_model()
        await driver.run_tools()
        await driver.run_model()


async def test_a_model_step_decodes_only_the_messages_stored_since_the_last_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoded: list[int] = []

    def counting(messages: Any) -> list[ModelMessage]:
        batch = list(messages)
        decoded.append(len(batch))
        return decode_history(batch)

    monkeypatch.setattr(session_history, "decode_history", counting)
    seen: list[list[ModelMessage]] = []
    driver = RunnerDriver(PydanticAIRunner(_agent(seen)))
    await _turns(driver, 3)
    # Each stored message is decoded at most twice in all: once when it is new, once more
    # when it was the end of a run's history (Pydantic AI changes that, so it is not kept).
    assert sum(decoded) <= 2 * len(driver.messages)
    # The last model step decoded the few messages after the last response, not all 12.
    assert len(driver.messages) == 12
    assert decoded[-1] <= 3


async def test_every_run_sees_the_history_a_fresh_decode_gives() -> None:
    seen: list[list[ModelMessage]] = []
    driver = RunnerDriver(PydanticAIRunner(_agent(seen)))
    await _turns(driver, 3)
    # What the last model call got, before the run added its own request parts, is the
    # stored history decoded from scratch: no earlier run's metadata leaked into it.
    fresh = answer_orphaned_tool_calls(decode_history(driver.messages[:-2]))
    assert len(fresh) == 10
    for got, want in zip(seen[-1][:8], fresh[:8], strict=True):
        assert (got.run_id, got.conversation_id, got.parts) == (
            want.run_id,
            want.conversation_id,
            want.parts,
        )


def _stored(sequence: int, message: ModelMessage) -> AgentMessage:
    return AgentMessage(
        sequence=sequence,
        turn_id="turn-1",
        role="user" if isinstance(message, ModelRequest) else "assistant",
        framework_item=encode_framework_item(message),
    )


def _shape(history: list[ModelMessage]) -> list[list[tuple[str, object]]]:
    """Each message's parts by type and content (a generated return's timestamp differs)."""
    return [
        [(type(part).__name__, getattr(part, "content", None)) for part in message.parts]
        for message in history
    ]


CALL = ToolCallPart("lookup", {}, tool_call_id="c1")
STORED = [
    _stored(1, ModelRequest(parts=[UserPromptPart("hi")])),
    _stored(2, ModelResponse(parts=[CALL])),
    # The call's result was never stored.
    _stored(3, ModelRequest(parts=[UserPromptPart("again")])),
    _stored(4, ModelResponse(parts=[TextPart("ok")])),
    _stored(5, ModelRequest(parts=[UserPromptPart("more")])),
]


def test_sessions_get_their_own_messages_and_the_end_is_fresh_every_time() -> None:
    histories = SessionHistories()
    first = histories.history("s-1", STORED)
    again = histories.history("s-1", STORED)
    other = histories.history("s-2", STORED)
    assert _shape(first) == _shape(again) == _shape(other)
    # Kept for the session: the messages before its last model response.
    assert all(a is b for a, b in zip(first[:3], again[:3], strict=True))
    assert histories.reused_messages == 3
    # The end, which Pydantic AI fills and extends, is never shared.
    assert all(a is not b for a, b in zip(first[3:], again[3:], strict=True))
    assert all(a is not b for a, b in zip(first, other, strict=True))


def test_an_orphaned_call_is_answered_also_when_its_response_was_kept() -> None:
    histories = SessionHistories()
    histories.history("s-1", STORED[:2])
    history = histories.history("s-1", STORED)
    assert _shape(history) == _shape(answer_orphaned_tool_calls(decode_history(STORED)))
    answered = history[2]
    assert isinstance(answered, ModelRequest)
    first = answered.parts[0]
    assert isinstance(first, ToolReturnPart)
    assert first.content == OUTCOME_UNKNOWN_TOOL_RESULT


def test_changed_stored_messages_are_decoded_again_and_old_sessions_go() -> None:
    histories = SessionHistories(max_sessions=1)
    histories.history("s-1", STORED)
    changed = [STORED[0], _stored(2, ModelResponse(parts=[TextPart("other")])), *STORED[2:]]
    history = histories.history("s-1", changed)
    assert _shape(history) == _shape(answer_orphaned_tool_calls(decode_history(changed)))
    assert histories.reused_messages == 0
    histories.history("s-1", changed)
    assert histories.reused_messages == 3
    histories.history("s-2", STORED)
    histories.history("s-1", changed)
    assert histories.reused_messages == 3
