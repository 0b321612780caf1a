"""Stored Pydantic AI items decode once per process, and each caller gets its own copies."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from dex_agents import AgentMessage
from dex_agents_pydantic_ai._messages import decode_history, encode_framework_item


def _stored(sequence: int, item: str) -> AgentMessage:
    return AgentMessage(sequence=sequence, turn_id="turn-1", role="user", framework_item=item)


def test_a_caller_changing_its_history_leaves_the_next_decode_unchanged() -> None:
    stored = [
        _stored(1, encode_framework_item(ModelRequest(parts=[UserPromptPart("hi")]))),
        _stored(2, encode_framework_item(ModelResponse(parts=[TextPart("hello")]))),
    ]
    first = decode_history(stored)
    # What Pydantic AI does to the history it is given: fill run metadata, add parts.
    first[0].run_id = "run-1"
    first[0].parts.append(UserPromptPart("added"))
    second = decode_history(stored)
    assert second[0] is not first[0]
    assert second[0].run_id is None
    assert [type(part) for part in second[0].parts] == [UserPromptPart]
    assert second == decode_history(stored)
    assert isinstance(second[1], ModelResponse)


def test_an_item_that_is_not_pydantic_ai_json_fails_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match="stored message 3 is not Pydantic AI message JSON"):
            decode_history([_stored(3, '{"role": "user"}')])
