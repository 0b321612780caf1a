"""function_tool: schema derivation, argument checks, result encoding."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import pydantic
import pytest

from dex_agents import ToolEffect
from dex_agents.runner import ToolExecutionError, ToolExecutionResult, ToolInputRequested
from dex_agents.stepwise import FunctionTool, ToolCallContext, encode_tool_result, function_tool
from dex_agents.testing import RecordingEventWriter


class NotCancelled:
    def is_cancelled(self) -> bool:
        return False


async def no_heartbeat() -> None:
    return None


def context(**overrides: Any) -> ToolCallContext:
    values: dict[str, Any] = {
        "flow_id": "s-1",
        "turn_id": "turn-1",
        "tool_call_id": "call_1",
        "tool_name": "t",
        "idempotency_key": "s-1/turn-1/call_1",
        "attempt": 1,
        "events": RecordingEventWriter(),
        "cancellation": NotCancelled(),
        "deadline": datetime(2030, 1, 1, tzinfo=UTC),
        "heartbeat": no_heartbeat,
    }
    values.update(overrides)
    return ToolCallContext(**values)


class Address(pydantic.BaseModel):
    city: str
    zip_code: str | None = None


async def test_schema_is_derived_from_a_typed_function() -> None:
    @function_tool(effect=ToolEffect.READ)
    async def lookup_order(
        order_id: str, include_items: bool = False, ship_to: Address | None = None
    ) -> dict[str, Any]:
        """Look up an order by its ID."""
        return {
            "order_id": order_id,
            "items": include_items,
            "city": ship_to.city if ship_to else None,
        }

    assert isinstance(lookup_order, FunctionTool)
    assert lookup_order.name == "lookup_order"
    assert lookup_order.description == "Look up an order by its ID."
    assert lookup_order.effect is ToolEffect.READ
    schema = dict(lookup_order.parameters)
    assert schema["type"] == "object"
    assert schema["required"] == ["order_id"]
    assert schema["properties"]["order_id"]["type"] == "string"
    assert schema["properties"]["include_items"]["default"] is False
    assert schema["additionalProperties"] is False
    assert "Address" in json.dumps(schema)

    result = await lookup_order.run('{"order_id":"42","ship_to":{"city":"Oslo"}}', context())
    assert result == ToolExecutionResult('{"order_id": "42", "items": false, "city": "Oslo"}')


async def test_context_parameter_gets_the_call_context_and_is_not_in_the_schema() -> None:
    seen: list[str] = []

    def refund(order_id: str, context: ToolCallContext) -> str:
        seen.append(context.idempotency_key)
        return f"refunded {order_id}"

    tool = function_tool(refund, effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
    assert set(tool.parameters["properties"]) == {"order_id"}
    assert tool.requires_approval is True
    assert await tool.run('{"order_id":"7"}', context()) == ToolExecutionResult("refunded 7")
    assert seen == ["s-1/turn-1/call_1"]


async def test_explicit_schema_tool_receives_the_decoded_arguments() -> None:
    received: list[dict[str, Any]] = []

    def execute(arguments: dict[str, Any], ctx: ToolCallContext) -> object:
        received.append(arguments)
        return [1, 2.5, None, "ü"]

    tool = function_tool(
        name="echo",
        description="Echo.",
        parameters={
            "type": "object",
            "properties": {
                "mode": {"enum": ["a", "b"]},
                "count": {"type": "integer", "minimum": 1},
            },
            "required": ["mode"],
        },
        execute=execute,
    )
    result = await tool.run('{"mode":"a","count":2}', context())
    assert received == [{"mode": "a", "count": 2}]
    # json.dumps's default separators and escaping.
    assert result == ToolExecutionResult('[1, 2.5, null, "\\u00fc"]')


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{not json", "invalid arguments for tool echo: not valid JSON"),
        ("[1]", "invalid arguments for tool echo: expected a JSON object"),
        ("{}", "invalid arguments for tool echo: 'mode' is a required property"),
        ('{"mode":"c"}', "invalid arguments for tool echo at mode: 'c' is not one of ['a', 'b']"),
        (
            '{"mode":"a","count":0}',
            "invalid arguments for tool echo at count: 0 is less than the minimum of 1",
        ),
    ],
)
async def test_schema_mismatch_is_a_tool_failure_and_execute_never_runs(
    arguments: str, message: str
) -> None:
    ran: list[object] = []
    tool = function_tool(
        name="echo",
        description="Echo.",
        parameters={
            "type": "object",
            "properties": {
                "mode": {"enum": ["a", "b"]},
                "count": {"type": "integer", "minimum": 1},
            },
            "required": ["mode"],
        },
        execute=lambda arguments, ctx: ran.append(arguments),
    )
    with pytest.raises(ToolExecutionError) as raised:
        await tool.run(arguments, context())
    assert raised.value.message.startswith(message)
    assert ran == []


async def test_typed_function_rejects_unknown_and_wrong_arguments() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    tool = function_tool(add, effect=ToolEffect.READ)
    assert await tool.run('{"a":1,"b":2}', context()) == ToolExecutionResult("3")
    with pytest.raises(ToolExecutionError, match="invalid arguments for tool add"):
        await tool.run('{"a":1,"b":"x"}', context())
    with pytest.raises(ToolExecutionError, match="Additional properties are not allowed"):
        await tool.run('{"a":1,"b":2,"c":3}', context())


@dataclass
class Receipt:
    amount: float
    currency: Literal["EUR", "USD"]


def test_result_encoding() -> None:
    assert encode_tool_result("plain text") == "plain text"
    assert encode_tool_result({"a": 1, "b": [True, None]}) == '{"a": 1, "b": [true, null]}'
    assert encode_tool_result(None) == "null"
    assert encode_tool_result(1.0) == "1.0"
    assert encode_tool_result(Address(city="Oslo")) == '{"city": "Oslo", "zip_code": null}'
    assert encode_tool_result(Receipt(2.5, "EUR")) == '{"amount": 2.5, "currency": "EUR"}'
    with pytest.raises(TypeError, match="cannot be written as JSON"):
        encode_tool_result(object())


async def test_a_question_result_passes_through() -> None:
    def confirm(order_id: str, context: ToolCallContext) -> object:
        if not context.input_answers:
            return ToolInputRequested(question=f"Cancel {order_id}?", choices=("yes", "no"))
        return f"answer {context.input_answers[-1]}"

    tool = function_tool(confirm, effect=ToolEffect.NON_IDEMPOTENT_WRITE)
    asked = await tool.run('{"order_id":"1"}', context())
    assert isinstance(asked, ToolInputRequested)
    assert asked.choices == ("yes", "no")
    assert await tool.run(
        '{"order_id":"1"}', context(input_answers=("yes",))
    ) == ToolExecutionResult("answer yes")


def test_bad_definitions_are_refused() -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        function_tool(
            name="bad name", description="", parameters={"type": "object"}, execute=lambda a, c: ""
        )
    with pytest.raises(ValueError, match="type 'object'"):
        function_tool(
            name="t", description="", parameters={"type": "string"}, execute=lambda a, c: ""
        )
    with pytest.raises(ValueError, match="invalid JSON Schema"):
        function_tool(
            name="t",
            description="",
            parameters={"type": "object", "properties": 3},
            execute=lambda a, c: "",
        )
    with pytest.raises(TypeError, match="requires_approval must be a bool"):
        function_tool(
            name="t",
            description="",
            parameters={"type": "object"},
            execute=lambda a, c: "",
            requires_approval="yes",  # type: ignore[arg-type]
        )
    with pytest.raises(TypeError, match="effect must be a ToolEffect"):
        function_tool(
            name="t",
            description="",
            parameters={"type": "object"},
            execute=lambda a, c: "",
            effect="read",  # type: ignore[arg-type]
        )
    with pytest.raises(TypeError, match="parameters must be a JSON Schema object"):
        function_tool(name="t", description="", parameters='{"type": "object"}', execute=print)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="execute must be callable"):
        function_tool(name="t", description="", parameters={"type": "object"}, execute="run")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a type annotation"):
        function_tool(lambda x: x)  # pyright: ignore
    with pytest.raises(TypeError, match="name, description, parameters and execute"):
        function_tool(name="t", parameters={"type": "object"})  # type: ignore[call-overload]


def test_unresolvable_annotations_are_refused_with_a_clear_message() -> None:
    def local_types(value: NotDefinedAnywhere) -> str:  # type: ignore[name-defined]  # noqa: F821
        return "x"

    local_types.__annotations__["value"] = "NotDefinedAnywhere"
    with pytest.raises(TypeError, match="cannot resolve its annotations"):
        function_tool(local_types)


def test_enum_uses_python_equality_as_the_other_core_does() -> None:
    from dex_agents.stepwise._tools import parse_tool_arguments

    schema = {"type": "object", "properties": {"level": {"enum": [1, 2]}}}
    assert parse_tool_arguments("t", schema, '{"level": true}') == {"level": True}
    assert parse_tool_arguments("t", schema, '{"level": 2.0}') == {"level": 2.0}
    with pytest.raises(ToolExecutionError, match=r"at level: 3 is not one of \[1, 2\]"):
        parse_tool_arguments("t", schema, '{"level": 3}')
