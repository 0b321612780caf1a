"""Stored messages as SDK input items: projections and replay."""

from __future__ import annotations

import json

from dex_agents import AgentMessage
from dex_agents.runner import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.values import FrameworkMessage
from dex_agents_openai_agents._messages import framework_message_of, replay_items, user_input_item


def stored(items: list[dict[str, object]]) -> list[AgentMessage]:
    return [
        AgentMessage.from_framework_message(
            framework_message_of(item), sequence=n + 1, turn_id="turn-1"
        )
        for n, item in enumerate(items)
    ]


def test_projections_of_each_item_kind() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc"}
    output = {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text"}]}
    assistant = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hi "}, {"type": "output_text", "text": "!"}],
    }
    reasoning = {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "x"}
    developer = {"role": "developer", "content": "be brief"}
    assert framework_message_of(user_input_item("hello")) == FrameworkMessage(
        role="user", text="hello", framework_item='{"role":"user","content":"hello"}'
    )
    assert framework_message_of(call).tool_name == "f"
    assert framework_message_of(call).tool_arguments == "{}"
    assert framework_message_of(output).role == "tool"
    assert framework_message_of(output).tool_output == '[{"type": "input_text"}]'
    assert framework_message_of(assistant).text == "Hi !"
    assert framework_message_of(reasoning).role == "assistant"
    assert framework_message_of(reasoning).text is None
    assert framework_message_of(developer).role == "user"
    for item in (call, output, assistant, reasoning, developer):
        assert json.loads(framework_message_of(item).framework_item) == item


def test_replay_is_unchanged_and_pairs_an_unanswered_call() -> None:
    items: list[dict[str, object]] = [
        user_input_item("go"),
        {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "opaque"},
        {"type": "function_call", "call_id": "c1", "name": "a", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "b", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "done"},
        user_input_item("[Dex] note"),
    ]
    replayed = replay_items(stored(items))
    assert replayed == [
        *items[:5],
        {"call_id": "c1", "output": OUTCOME_UNKNOWN_TOOL_RESULT, "type": "function_call_output"},
        items[5],
    ]
    complete = [*items[:3], {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    assert replay_items(stored(complete)) == complete
