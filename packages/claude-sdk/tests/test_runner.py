"""ClaudeRunner driven directly with an AgentTurnContext, over the SDK and MockTransport."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.lib.tools import ToolError, beta_tool

from dex_agents import AgentToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.runner import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionError,
    TurnCompleted,
    get_deferred_tool_execution,
)
from dex_agents.testing import RunnerDriver as Session
from dex_agents_claude_sdk import ClaudeRunner, claude_tool
from dex_agents_claude_sdk.testing import (
    error_response,
    mock_client_factory,
    response_message,
    sse_response,
)

# --- a Messages endpoint that answers from a list and records each request ------------


class Endpoint:
    def __init__(self, *responses: httpx2.Response | dict[str, Any]) -> None:
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[httpx2.Headers] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        self.headers.append(request.headers)
        response = self.responses[len(self.requests) - 1]
        return response if isinstance(response, httpx2.Response) else sse_response(response)


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


# --- tools -------------------------------------------------------------------------

runs: list[tuple[str, Any, str]] = []


@claude_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    runs.append(("lookup_order", order_id, get_deferred_tool_execution().idempotency_key))
    return f"order {order_id} shipped"


@claude_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str, amount: int) -> str:
    """Refund part of an order."""
    execution = get_deferred_tool_execution()
    runs.append(("refund_order", (order_id, amount), execution.idempotency_key))
    return f"refunded {amount} on {order_id}"


@beta_tool
def cancel_order(order_id: str) -> str:
    """Cancel an order (declares no effect)."""
    raise ToolError(f"order {order_id} already left the warehouse")


@pytest.fixture(autouse=True)
def clear_runs() -> None:
    runs.clear()


def runner_for(endpoint: Endpoint, tools: Sequence[Any] = (), **options: Any) -> ClaudeRunner:
    return ClaudeRunner(
        "claude-test-1", tools=tools, client_factory=mock_client_factory(endpoint), **options
    )


# --- tests -------------------------------------------------------------------------


async def test_thinking_blocks_with_signatures_replay_unchanged_on_the_wire() -> None:
    thinking = {
        "type": "thinking",
        "thinking": "Check the order first.",
        "signature": "EqQBCkYIARgCsig==",
    }
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
    first = response_message(
        [
            thinking,
            redacted,
            text("Let me look."),
            tool_use("toolu_01", "lookup_order", {"order_id": "42"}),
        ],
        message_id="msg_01",
        usage={
            "input_tokens": 50,
            "output_tokens": 40,
            "cache_read_input_tokens": 200,
            "cache_creation_input_tokens": 10,
        },
    )
    endpoint = Endpoint(first, response_message([text("Order 42 shipped.")], message_id="msg_02"))
    runner = runner_for(
        endpoint,
        [lookup_order],
        system_prompt="You are a support agent.",
        thinking={"type": "enabled", "budget_tokens": 2048},
        max_tokens=8000,
    )
    session = Session(runner)
    session.start_turn("Where is order 42?")

    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert session.events.reasoning == ["Check the order first."]
    assert session.events.text == ["Let me look."]
    request = endpoint.requests[0]
    assert request["model"] == "claude-test-1"
    assert request["max_tokens"] == 8000
    assert request["stream"] is True
    assert request["system"] == "You are a support agent."
    assert request["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert request["tools"][0]["name"] == "lookup_order"
    assert request["tools"][0]["input_schema"]["required"] == ["order_id"]
    assert request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Where is order 42?"}]}
    ]
    usage = outcome.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens, usage.total_tokens) == (
        1,
        260,
        40,
        300,
    )
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (200, 10)
    metadata = outcome.model_call_metadata
    assert metadata is not None
    assert (metadata.request_model, metadata.response_model, metadata.provider_name) == (
        "claude-test-1",
        "claude-scripted",
        "anthropic",
    )
    assert (metadata.response_id, metadata.finish_reasons) == ("msg_01", ("tool_use",))

    await session.run_tools()
    await session.run_model()
    replayed = endpoint.requests[1]["messages"]
    assert replayed[1] == {"role": "assistant", "content": first["content"]}
    assert replayed[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": "order 42 shipped",
                "is_error": False,
            }
        ],
    }


async def test_parallel_tool_calls_are_deferred_in_order_and_answered_in_one_user_turn() -> None:
    endpoint = Endpoint(
        response_message(
            [
                tool_use("toolu_a", "lookup_order", {"order_id": "1"}),
                tool_use("toolu_b", "refund_order", {"order_id": "1", "amount": 5}),
                tool_use("toolu_c", "lookup_order", {"order_id": "2"}),
            ]
        ),
        response_message([text("Done.")]),
    )
    session = Session(runner_for(endpoint, [lookup_order, refund_order]))
    session.start_turn("Refund 5 on order 1, and check order 2")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert [(c.tool_call_id, c.tool_name) for c in outcome.tool_calls] == [
        ("toolu_a", "lookup_order"),
        ("toolu_b", "refund_order"),
        ("toolu_c", "lookup_order"),
    ]
    assert [c.policy for c in outcome.tool_calls] == [
        ResolvedToolPolicy(ToolEffect.READ, False),
        ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True),
        ResolvedToolPolicy(ToolEffect.READ, False),
    ]
    assert runs == []  # nothing ran in the model step
    assert len(endpoint.requests) == 1  # exactly one model request per RunModel
    # The calls finish in another order than they were made.
    session.records.reverse()
    await session.run_tools()
    session.records.reverse()
    assert sorted(runs) == [
        ("lookup_order", "1", "s-1/turn-1/toolu_a"),
        ("lookup_order", "2", "s-1/turn-1/toolu_c"),
        ("refund_order", ("1", 5), "s-1/turn-1/toolu_b"),
    ]
    done = await session.run_model()
    assert isinstance(done, TurnCompleted)
    messages = endpoint.requests[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["toolu_a", "toolu_b", "toolu_c"]
    assert [m.role for m in done.new_messages] == ["tool", "tool", "tool", "assistant"]
    assert len(endpoint.requests) == 2
    assert len(runs) == 3  # the resumed step ran no tool
    assert done.usage.model_calls == 1  # this response only, not the turn's total


async def test_a_rejection_reaches_claude_as_an_error_tool_result() -> None:
    endpoint = Endpoint(
        response_message([tool_use("toolu_r", "refund_order", {"order_id": "9", "amount": 50})]),
        response_message([text("Understood, no refund.")]),
    )
    session = Session(runner_for(endpoint, [refund_order]))
    session.start_turn("Refund order 9")
    await session.run_model()
    session.reject("toolu_r", "Refunds need a receipt.")
    await session.run_tools()
    assert runs == []
    outcome = await session.run_model()
    assert isinstance(outcome, TurnCompleted)
    assert endpoint.requests[1]["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_r",
            "content": "Refunds need a receipt.",
            "is_error": True,
        }
    ]
    stored = outcome.new_messages[0]
    assert (stored.role, stored.tool_name, stored.tool_output) == (
        "tool",
        "refund_order",
        "Refunds need a receipt.",
    )


async def test_a_provider_error_fails_the_attempt_and_the_rerun_sends_the_same_request() -> None:
    endpoint = Endpoint(
        error_response(529, "overloaded_error", "Overloaded"),
        response_message([text("Hello.")]),
    )
    session = Session(runner_for(endpoint))
    session.start_turn("hi")
    with pytest.raises(anthropic.APIStatusError) as raised:
        await session.runner.run_model_step(session.context(attempt=1))
    assert raised.value.status_code == 529
    assert len(endpoint.requests) == 1  # no SDK retry: the session reruns the model call
    outcome = await session.runner.run_model_step(session.context(attempt=2))
    assert isinstance(outcome, TurnCompleted)
    assert endpoint.requests[0] == endpoint.requests[1]


async def test_tool_failures_the_model_should_see_and_unexpected_ones() -> None:
    @claude_tool(effect="idempotent_write")
    def flaky() -> str:
        """Fails unexpectedly."""
        raise ConnectionError("backend down")

    endpoint = Endpoint(
        response_message(
            [
                tool_use("t1", "cancel_order", {"order_id": "3"}),
                tool_use("t2", "lookup_order", {"wrong": 1}),
                tool_use("t3", "nope", {}),
                tool_use("t4", "flaky", {}),
            ]
        )
    )
    session = Session(runner_for(endpoint, [cancel_order, lookup_order, flaky]))
    session.start_turn("go")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert [c.policy for c in outcome.tool_calls] == [
        ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True),
        ResolvedToolPolicy(ToolEffect.READ, False),
        # A tool the runner does not have gets the session default (call_policy).
        ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True),
        ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False),
    ]
    cancel, bad, unknown, unexpected = session.records
    with pytest.raises(ToolExecutionError, match="already left the warehouse"):
        await session.runner.execute_deferred_tool_call(session.execution(cancel))
    with pytest.raises(ToolExecutionError, match="invalid arguments for lookup_order"):
        await session.runner.execute_deferred_tool_call(session.execution(bad))
    with pytest.raises(ToolExecutionError, match="unknown tool nope"):
        await session.runner.execute_deferred_tool_call(session.execution(unknown))
    with pytest.raises(ConnectionError):
        await session.runner.execute_deferred_tool_call(session.execution(unexpected))
    assert runs == []


async def test_session_policy_wins_and_built_ins_are_offered() -> None:
    endpoint = Endpoint(
        response_message(
            [
                tool_use("t1", "refund_order", {"order_id": "1", "amount": 1}),
                tool_use("t2", "ask_user", {"question": "Sure?"}),
            ]
        )
    )
    session = Session(
        runner_for(endpoint, [refund_order]),
        policies={"refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)},
        built_ins=("ask_user",),
    )
    session.start_turn("go")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert [c.policy for c in outcome.tool_calls] == [
        ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, True),
        ResolvedToolPolicy(ToolEffect.READ, False),
    ]
    assert [t["name"] for t in endpoint.requests[0]["tools"]] == ["refund_order", "ask_user"]


async def test_an_orphaned_tool_use_gets_an_outcome_unknown_result() -> None:
    endpoint = Endpoint(
        response_message(
            [
                tool_use("t1", "lookup_order", {"order_id": "1"}),
                tool_use("t2", "lookup_order", {"order_id": "2"}),
            ]
        ),
        response_message([text("fresh start")]),
    )
    runner = runner_for(endpoint, [lookup_order])
    session = Session(runner)
    session.start_turn("first")
    await session.run_model()
    session.records[0] = replace(
        session.records[0], status=AgentToolCallStatus.SUCCEEDED, output="one"
    )
    unfinished = runner.build_unfinished_turn_messages(session.context())
    assert [(m.role, m.tool_call_id, m.tool_output) for m in unfinished] == [("tool", "t1", "one")]
    session.store(unfinished)
    session.store([runner.build_user_message("[Dex] The previous turn failed ...")])
    session.start_turn("second")
    await session.run_model()
    messages = endpoint.requests[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "one", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "t2",
            "content": OUTCOME_UNKNOWN_TOOL_RESULT,
            "is_error": True,
        },
        {"type": "text", "text": "[Dex] The previous turn failed ..."},
        {"type": "text", "text": "second"},
    ]


def test_options_are_checked_when_the_runner_is_built() -> None:
    with pytest.raises(ValueError, match="request_options may not set"):
        ClaudeRunner("m", request_options={"messages": []})
    with pytest.raises(ValueError, match="two tools"):
        ClaudeRunner("m", tools=[lookup_order, lookup_order])
    with pytest.raises(ValueError, match="model"):
        ClaudeRunner("")


async def test_without_a_client_factory_the_key_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DEX_TEST_ANTHROPIC_KEY", raising=False)
    runner = ClaudeRunner("m", api_key_env="DEX_TEST_ANTHROPIC_KEY")
    with pytest.raises(RuntimeError, match="DEX_TEST_ANTHROPIC_KEY is not set"):
        runner.client()
    monkeypatch.setenv("DEX_TEST_ANTHROPIC_KEY", "sk-test")
    client = runner.client()
    assert client.api_key == "sk-test"
    assert client.max_retries == 0
    assert runner.client() is client  # one client per process and event loop


def test_user_messages_are_native_message_params() -> None:
    runner = ClaudeRunner("m")
    message = runner.build_user_message("hello")
    assert json.loads(message.framework_item) == {
        "role": "user",
        "content": [{"type": "text", "text": "hello"}],
    }
    assert runner.build_user_message("hello") == message


async def test_stored_items_are_decoded_once_and_the_sdk_leaves_them_as_stored() -> None:
    from dex_agents_claude_sdk import _messages as messages

    cache = messages._DECODED_ITEMS  # pyright: ignore[reportPrivateUsage]
    endpoint = Endpoint(
        response_message([tool_use("toolu_a", "lookup_order", {"order_id": "7"})]),
        response_message([text("Order 7 shipped.")]),
        response_message([text("Nothing else.")]),
    )
    session = Session(runner_for(endpoint, [lookup_order]))
    session.start_turn("where is order 7, asks only this test?")
    await session.run_model()
    await session.run_tools()
    await session.run_model()
    session.start_turn("anything else?")
    hits, misses = cache.hits, cache.misses

    await session.run_model()

    # The four earlier items come from the cache (an answer is decoded when its step
    # stores it); decoded now: the new question and this step's own answer.
    assert (cache.hits - hits, cache.misses - misses) == (4, 2)
    assert endpoint.requests[2]["messages"][:4] == session.items()[:4]
    cached = [messages.decode_item(message.framework_item) for message in session.messages]
    assert cached == session.items(), "nothing changed a cached item"


async def test_a_tools_schema_is_checked_and_compiled_once_not_on_every_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jsonschema.validators

    compiled: list[object] = []
    real = jsonschema.validators.validator_for

    def counting(schema: Any, *args: Any, **kwargs: Any) -> Any:
        compiled.append(schema)
        return real(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.validators, "validator_for", counting)
    endpoint = Endpoint(
        response_message(
            [
                tool_use("c1", "lookup_order", {"order_id": "1"}),
                tool_use("c2", "lookup_order", {"order_id": "2"}),
                tool_use("c3", "lookup_order", {"order_id": 3}),
            ]
        )
    )
    session = Session(runner_for(endpoint, [lookup_order]))
    session.start_turn("go")
    await session.run_model()
    first, second, wrong = session.records
    await session.runner.execute_deferred_tool_call(session.execution(first))
    await session.runner.execute_deferred_tool_call(session.execution(second))
    with pytest.raises(ToolExecutionError, match="invalid arguments for lookup_order: 3 is not"):
        await session.runner.execute_deferred_tool_call(session.execution(wrong))
    # Three calls, the failing one included, and the schema was compiled once at most (an
    # earlier test in this process may have compiled it already).
    schema = lookup_order.function_tool.input_schema
    assert len([checked for checked in compiled if checked == schema]) <= 1
    assert [order for _, order, _ in runs] == ["1", "2"]
