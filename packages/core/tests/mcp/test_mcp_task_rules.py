"""The pure parts of MCP tasks: the poll interval rule, input requests as questions, and
what one poll leaves for the next."""

from __future__ import annotations

from typing import Any

import pytest

from dex_agents.mcp._tasks import TaskContinuation, TaskQuestion, next_poll_interval
from dex_agents.runner import QuestionAnswer


@pytest.mark.parametrize(
    ("server_ms", "previous", "expected"),
    [
        (1500, None, 2),  # the server's interval, rounded up to whole seconds
        (None, None, 5),  # no interval from the server: 5 seconds
        (1000, 4, 8),  # shorter than double the previous: double it
        (1000, 40, 60),  # doubling stops at the maximum
        (90_000, 40, 90),  # a server asking for more than the maximum is heeded
        (0, None, 5),
    ],
)
def test_next_poll_interval(server_ms: int | None, previous: int | None, expected: int) -> None:
    assert next_poll_interval(server_ms, previous, 60) == expected


def _form(schema: dict[str, Any], message: str = "Approve?") -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def test_an_enum_field_gives_the_choices_and_the_answer_goes_back_under_it() -> None:
    schema = {"type": "object", "properties": {"decision": {"type": "string", "enum": ["a", "b"]}}}
    question = TaskQuestion.first_of({"k2": _form(schema, "later"), "k1": _form(schema)})
    assert question is not None
    assert (question.key, question.message, question.choices) == ("k1", "Approve?", ("a", "b"))
    assert question.response(QuestionAnswer("answered", "b")) == {
        "action": "accept",
        "content": {"decision": "b"},
    }
    assert question.response(QuestionAnswer("declined")) == {"action": "decline"}
    assert question.response(QuestionAnswer("deadline_passed")) == {"action": "decline"}


def test_a_boolean_field_is_asked_as_yes_or_no() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    question = TaskQuestion.parse("k", _form(schema))
    assert question.choices == ("yes", "no")
    assert question.response(QuestionAnswer("answered", "yes"))["content"] == {"ok": True}


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (
            _form({"type": "object", "properties": {"a": {"type": "string"}, "b": {}}}),
            "several fields",
        ),
        (
            {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "message": "Log in",
                    "url": "https://example.com/login",
                    "elicitationId": "e1",
                },
            },
            "open a URL",
        ),
        ({"method": "sampling/createMessage", "params": {}}, "cannot ask the user"),
    ],
)
def test_input_a_question_cannot_carry_is_refused(request_: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        TaskQuestion.parse("k", request_)


def test_the_continuation_survives_a_round_trip_and_bad_text_reads_as_empty() -> None:
    kept = TaskContinuation("input_required", "k1")
    assert TaskContinuation.decode(kept.encode()) == kept
    assert TaskContinuation.decode("not json") == TaskContinuation()
    assert TaskContinuation.decode(None) == TaskContinuation()
