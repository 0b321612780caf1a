"""Replaying stored Messages API items as a request: ``request_messages``'s rules."""

from __future__ import annotations

from typing import Any

from dex_agents.runner import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents_claude_sdk._messages import request_messages


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "lookup", "input": {}}


def result(call_id: str, value: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": value, "is_error": False}


def test_each_tool_use_gets_its_result_in_call_order_right_after_its_message() -> None:
    items = [
        user(text("look twice")),
        assistant(text("looking"), use("a"), use("b")),
        user(result("b", "second")),
        user(result("a", "first")),
        assistant(text("done")),
    ]
    assert request_messages(items) == [
        user(text("look twice")),
        assistant(text("looking"), use("a"), use("b")),
        user(result("a", "first"), result("b", "second")),
        assistant(text("done")),
    ]


def test_a_call_without_a_stored_result_is_answered_outcome_unknown() -> None:
    items = [user(text("go")), assistant(use("a"), use("b")), user(result("a"))]
    unknown = {
        "type": "tool_result",
        "tool_use_id": "b",
        "content": OUTCOME_UNKNOWN_TOOL_RESULT,
        "is_error": True,
    }
    assert request_messages(items)[-1] == user(result("a"), unknown)


def test_stray_results_and_empty_assistant_messages_are_left_out_and_roles_merge() -> None:
    items = [
        user(result("nobody-called")),
        user(text("hello")),
        assistant(),
        user(text("are you there?")),
        assistant(use("a")),
        user(result("a"), result("extra")),
        user(text("and now?")),
    ]
    assert request_messages(items) == [
        user(text("hello"), text("are you there?")),
        assistant(use("a")),
        user(result("a"), text("and now?")),
    ]


def test_the_stored_items_are_not_changed() -> None:
    first = user(text("a"))
    second = user(text("b"))
    request = request_messages([first, second])
    assert request == [user(text("a"), text("b"))]
    assert first == user(text("a"))
    assert request[0]["content"] is not first["content"]
