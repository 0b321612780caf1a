"""The mock/dex command model answers from the request alone."""

from __future__ import annotations

import json

from dex_agents.models import ModelRequest, ModelToolDefinition, ToolResultItem, UserTextItem
from dex_agents_ai_agent.mock_model import mock_reply

TOOLS = ("durable_wait", "ask_user", "write_todos", "search__web_search")


def request(*items: UserTextItem | ToolResultItem, tools: tuple[str, ...] = TOOLS) -> ModelRequest:
    definitions = tuple(ModelToolDefinition(name, "", {"type": "object"}) for name in tools)
    return ModelRequest(instructions="", items=items, tools=definitions)


def call(reply_request: ModelRequest) -> tuple[str, dict[str, object]]:
    (tool_call,) = mock_reply(reply_request).tool_calls
    assert isinstance(tool_call.arguments, dict)
    return tool_call.name, dict(tool_call.arguments)


def test_plain_text_and_commands() -> None:
    assert mock_reply(request(UserTextItem("hi"))).text == "Local demo response: hi"
    assert call(request(UserTextItem("/wait 7 tickets"))) == (
        "durable_wait",
        {"duration_seconds": 7, "reason": "tickets"},
    )
    assert call(request(UserTextItem('/tool search__web_search {"query": "x"}'))) == (
        "search__web_search",
        {"query": "x"},
    )
    assert call(request(UserTextItem("/choose Pick | Red | Blue"))) == (
        "ask_user",
        {"question": "Pick", "choices": ["Red", "Blue"], "allows_free_text": False},
    )
    many = mock_reply(request(UserTextItem("/ask-many when?")))
    assert [c.name for c in many.tool_calls] == ["ask_user", "durable_wait"]


def test_a_tool_the_session_did_not_enable_is_refused() -> None:
    reply = mock_reply(request(UserTextItem("/tool slack__post_message {}")))
    assert json.loads(reply.text)["error"] == "unknown_or_disabled_tool"
    assert reply.tool_calls == ()


def test_a_tool_result_is_reported() -> None:
    result = ToolResultItem("call_1", "search__web_search", "found it")
    reply = mock_reply(request(UserTextItem("/tool search__web_search {}"), result))
    assert reply.text == "The tool finished with this result: found it"


def test_planning_writes_two_tasks_or_clears() -> None:
    name, arguments = call(request(UserTextItem("Research Dex"), tools=("write_todos",)))
    assert name == "write_todos"
    assert arguments["todos"] == [
        {"content": "Complete the objective: Research Dex", "status": "pending"},
        {"content": "Verify and report the result", "status": "pending"},
    ]
    assert call(request(UserTextItem("/plan-clear"), tools=("write_todos",)))[1] == {"todos": []}


def execution_note(*tasks: tuple[str, str]) -> UserTextItem:
    lines = ["[Dex] Plan execution: the user approved the plan below.", "Current plan:"]
    return UserTextItem("\n".join([*lines, *(f"- [{s}] {c}" for s, c in tasks)]))


def test_execution_advances_one_task_per_call_and_can_stop() -> None:
    note = execution_note(("completed", "Complete the objective: x"), ("pending", "Verify"))
    _, arguments = call(request(note))
    assert arguments["todos"] == [
        {"content": "Complete the objective: x", "status": "completed"},
        {"content": "Verify", "status": "in_progress"},
    ]
    done = execution_note(("completed", "a"), ("completed", "b"))
    assert mock_reply(request(done)).text == "I completed the approved plan."
    stop = execution_note(
        ("completed", "Complete the objective: /plan-stop demo"), ("pending", "b")
    )
    moved = ToolResultItem("call_1", "write_todos", "ok")
    assert mock_reply(request(stop, moved)).text == "I stopped before completing every plan task."
    # Continue plan: no task moved yet in this turn, so the plan goes on.
    _, arguments = call(request(stop))
    assert arguments["todos"] == [
        {"content": "Complete the objective: /plan-stop demo", "status": "completed"},
        {"content": "b", "status": "in_progress"},
    ]


def test_a_written_plan_is_presented_and_a_cleared_one_reported() -> None:
    def reply(output: str) -> str | None:
        result = ToolResultItem("call_1", "write_todos", output)
        return mock_reply(request(UserTextItem("x"), result, tools=("write_todos",))).text

    # The outputs of dex_agents.plans.write_todos_output.
    assert reply('{"status":"updated","revision":1,"task_count":2}') == (
        "The plan is ready for review."
    )
    assert reply('{"status":"cleared","revision":2}') == "I cleared the plan."
