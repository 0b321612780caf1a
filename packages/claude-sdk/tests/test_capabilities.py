"""Plan mode, forced tool choice, a model per session and a tool's own question, on
ClaudeRunner driven directly over the real SDK and a MockTransport endpoint."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import httpx2
import pytest

from dex_agents import AgentToolCallStatus, ToolEffect
from dex_agents.runner import (
    PLANNING_TURN_TOOL_REJECTED,
    ContextSummaryRequest,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolInputRequested,
    TurnCompleted,
    get_deferred_tool_execution,
)
from dex_agents.testing import RunnerDriver
from dex_agents.values import AgentPlan, InteractionMode, PlanTask
from dex_agents_claude_sdk import (
    ClaudeRunner,
    claude_tool,
    create_claude_session_flow,
)
from dex_agents_claude_sdk.testing import mock_client_factory, response_message, sse_response

TODOS = {"todos": [{"content": "look up order 4", "status": "pending"}]}


class Endpoint:
    """Answers from a list and records each request's body."""

    def __init__(self, *contents: list[dict[str, Any]]) -> None:
        self.contents = list(contents)
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if request.url.path.endswith("/count_tokens"):
            return httpx2.Response(200, json={"input_tokens": 42})
        message = response_message(self.contents.pop(0))
        return sse_response(message) if body.get("stream") else httpx2.Response(200, json=message)


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


@claude_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id} shipped"


def runner_for(endpoint: Endpoint, *tools: Any, **options: Any) -> ClaudeRunner:
    return ClaudeRunner(
        "claude-sonnet-5", tools=tools, client_factory=mock_client_factory(endpoint), **options
    )


def offered(request: Mapping[str, Any]) -> list[str]:
    return [tool["name"] for tool in request.get("tools", [])]


# --- plan mode ------------------------------------------------------------------------


async def test_a_planning_turn_offers_only_write_todos() -> None:
    endpoint = Endpoint(
        [tool_use("c1", "lookup_order", {"order_id": "4"})], [text("here is the plan")]
    )
    driver = RunnerDriver(runner_for(endpoint, lookup_order), built_ins=("ask_user", "write_todos"))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.start_turn("plan order 4")

    requested = await driver.run_model()

    assert isinstance(requested, ToolCallsRequested), "a call it did not offer reaches the session"
    assert offered(endpoint.requests[0]) == ["write_todos"]
    assert "tool_choice" not in endpoint.requests[0], "auto forces nothing"
    driver.reject("c1", PLANNING_TURN_TOOL_REJECTED)
    assert isinstance(await driver.run_model(), TurnCompleted)
    # The API wants the history's tools defined; the planning turn still cannot call them.
    assert offered(endpoint.requests[1]) == ["write_todos", "lookup_order"]
    [result] = endpoint.requests[1]["messages"][-1]["content"]
    assert (result["tool_use_id"], result["content"]) == ("c1", PLANNING_TURN_TOOL_REJECTED)


async def test_required_forces_write_todos_on_the_first_planning_call_without_a_draft() -> None:
    endpoint = Endpoint(
        [tool_use("c1", "write_todos", TODOS)], [text("planned")], [text("revised")]
    )
    driver = RunnerDriver(
        runner_for(endpoint, lookup_order, planning_tool_choice="required"),
        built_ins=("write_todos",),
    )
    driver.interaction_mode = InteractionMode.PLANNING
    driver.start_turn("plan it")
    await driver.run_model()
    driver.finish("c1", AgentToolCallStatus.SUCCEEDED, output='{"status":"updated"}')
    await driver.run_model()
    driver.plan = AgentPlan(1, "draft", (PlanTask("look up order 4", "pending"),))
    driver.start_turn("change step one")
    await driver.run_model()

    assert [request.get("tool_choice") for request in endpoint.requests] == [
        {"type": "tool", "name": "write_todos"},
        None,
        None,
    ]


async def test_required_forces_nothing_outside_planning_turns() -> None:
    endpoint = Endpoint([text("hello")])
    driver = RunnerDriver(
        runner_for(endpoint, planning_tool_choice="required"), built_ins=("write_todos",)
    )
    driver.start_turn("hi")
    await driver.run_model()
    assert "tool_choice" not in endpoint.requests[0]


@pytest.mark.parametrize(
    ("model", "thinking", "reason"),
    [
        ("claude-opus-5-5", None, "claude-opus-5-5"),
        ("claude-sonnet-5-5", None, "claude-sonnet-5-5"),
        ("claude-sonnet-5", {"type": "enabled", "budget_tokens": 2048}, "extended thinking"),
        ("claude-sonnet-5", {"type": "adaptive"}, "extended thinking"),
    ],
)
def test_required_with_a_model_that_refuses_a_forced_tool_choice_fails_at_build_time(
    model: str, thinking: dict[str, Any] | None, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        create_claude_session_flow(
            model, "Planner", thinking=thinking, planning_tool_choice="required"
        )
    with pytest.raises(ValueError, match="planning_tool_choice='auto'"):
        ClaudeRunner(model, thinking=thinking, planning_tool_choice="required")
    ClaudeRunner(model, thinking=thinking, planning_tool_choice="auto")
    ClaudeRunner("claude-sonnet-5", thinking={"type": "disabled"}, planning_tool_choice="required")


async def test_a_model_resolve_model_chose_is_checked_when_the_call_is_forced() -> None:
    endpoint = Endpoint([text("plan?")])
    runner = runner_for(
        endpoint,
        planning_tool_choice="required",
        resolve_model=lambda settings: settings.get("model"),
    )
    driver = RunnerDriver(runner, built_ins=("write_todos",))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.session_settings = {"model": "claude-opus-5-5"}
    driver.start_turn("plan it")
    with pytest.raises(ValueError, match="claude-opus-5-5"):
        await driver.run_model()
    assert endpoint.requests == []


# --- a model per session ---------------------------------------------------------------


async def test_resolve_model_chooses_the_model_of_every_request_of_the_turn() -> None:
    endpoint = Endpoint(
        [tool_use("c1", "lookup_order", {"order_id": "4"})],
        [text("shipped")],
        [text("the summary")],
        [text("hello")],
    )
    models = {"fast": "claude-haiku-5-5"}
    runner = runner_for(
        endpoint, lookup_order, resolve_model=lambda settings: models.get(settings.get("model", ""))
    )
    driver = RunnerDriver(runner)
    driver.session_settings = {"model": "fast"}
    driver.start_turn("order 4?")
    await driver.run_model()
    await driver.run_tools()
    final = await driver.run_model()
    assert isinstance(final, TurnCompleted)
    assert final.model_call_metadata is not None
    assert final.model_call_metadata.request_model == "claude-haiku-5-5"
    assert await runner.estimate_input_tokens(driver.context()) == 42
    summary = await runner.summarize_context(summary_request(driver, {"model": "fast"}))
    assert summary.summary == "the summary"
    # Settings that name no model keep the runner's own.
    driver.session_settings = {}
    driver.start_turn("hi")
    await driver.run_model()

    assert [request["model"] for request in endpoint.requests] == [
        "claude-haiku-5-5",
        "claude-haiku-5-5",
        "claude-haiku-5-5",
        "claude-haiku-5-5",
        "claude-sonnet-5",
    ]


async def test_resolve_model_must_return_a_model_name() -> None:
    runner = runner_for(Endpoint(), resolve_model=lambda settings: 42)  # pyright: ignore[reportArgumentType]
    driver = RunnerDriver(runner)
    driver.start_turn("hello")
    with pytest.raises(TypeError, match="resolve_model must return"):
        await driver.run_model()


def summary_request(
    driver: RunnerDriver[Any], settings: Mapping[str, Any]
) -> ContextSummaryRequest:
    context = driver.context()
    return ContextSummaryRequest(
        flow_id=context.flow_id,
        turn_id=context.turn_id,
        attempt=1,
        messages=context.messages,
        previous_summary=None,
        through_sequence=context.messages[-1].sequence,
        input_token_budget=10_000,
        session_settings=settings,
        events=context.events,
        cancellation=context.cancellation,
        deadline=context.deadline,
        step_execution_id="CompactContext-1",
        heartbeat=context.heartbeat,
    )


# --- a tool's own question --------------------------------------------------------------


@claude_tool(effect=ToolEffect.IDEMPOTENT_WRITE)
def confirm_address(order_id: str) -> ToolInputRequested | str:
    """Ask which address, keyed by the question it asked."""
    execution = get_deferred_tool_execution()
    if not execution.input_answers:
        return ToolInputRequested(
            "Ship to home or office?", choices=("home", "office"), continuation="address-1"
        )
    assert execution.tool_call.input_continuation == "address-1"
    return f"{order_id} ships to {execution.input_answers[-1]}"


async def test_a_tool_asks_first_and_its_rerun_reads_the_answer_and_the_continuation() -> None:
    endpoint = Endpoint([tool_use("c1", "confirm_address", {"order_id": "9"})])
    driver = RunnerDriver(runner_for(endpoint, confirm_address))
    driver.start_turn("ship 9")
    await driver.run_model()
    [record] = driver.records

    asked = await driver.runner.execute_deferred_tool_call(driver.execution(record))

    assert asked == ToolInputRequested(
        "Ship to home or office?", choices=("home", "office"), continuation="address-1"
    )
    rerun = replace(
        driver.execution(replace(record, input_continuation="address-1")),
        input_answers=("office",),
    )
    assert await driver.runner.execute_deferred_tool_call(rerun) == ToolExecutionResult(
        "9 ships to office"
    )
