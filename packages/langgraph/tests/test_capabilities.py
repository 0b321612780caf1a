"""The 0.2.0 capabilities on the LangGraph runner: a tool that asks with LangGraph's own
``interrupt()``, plan mode on the one-node graph, and the model chosen per session."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.types import interrupt
from pydantic import Field

from dex_agents import ToolEffect
from dex_agents.runner import (
    ToolCallsRequested,
    ToolExecutionResult,
    ToolInputRequested,
    TurnCompleted,
    build_plan_note,
)
from dex_agents.testing import RunnerDriver, summary_request
from dex_agents.values import AgentPlan, AgentToolCallStatus, InteractionMode, PlanTask
from dex_agents_langgraph import LangGraphRunner, create_langgraph_session_flow, declare_tool_effect
from dex_agents_langgraph._tools import tool_input_requested

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


def _react_agent(model: BaseChatModel) -> Any:
    """A prebuilt agent stopped before its tools (create_react_agent warns it moved)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, [READ_LOOKUP], interrupt_before=["tools"])


class RecordingChatModel(BaseChatModel):
    """Answers with ``responses`` in order and records each call and each ``bind_tools``."""

    responses: list[AIMessage]
    calls: list[list[BaseMessage]] = Field(default_factory=list[list[BaseMessage]])
    bound_tool_names: list[list[str]] = Field(default_factory=list[list[str]])
    bound_tool_choices: list[object] = Field(default_factory=list[object])
    model_name: str = "recording-1"

    @property
    def _llm_type(self) -> str:
        return "recording"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        schemas = [convert_to_openai_tool(t) for t in tools]
        self.bound_tool_names.append([s["function"]["name"] for s in schemas])
        self.bound_tool_choices.append(kwargs.get("tool_choice"))
        return self.bind(tools=schemas, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        response = self.responses[len(self.calls) - 1]
        return ChatResult(generations=[ChatGeneration(message=response.model_copy(deep=True))])


def recording_model(*responses: AIMessage) -> RecordingChatModel:
    return RecordingChatModel(responses=list(responses))


def ai_calls(*calls: tuple[str, str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[
            {"id": call_id, "name": name, "args": args, "type": "tool_call"}
            for call_id, name, args in calls
        ],
    )


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id} shipped"


READ_LOOKUP = declare_tool_effect(lookup_order, ToolEffect.READ)
painted: list[tuple[str, str, str, str | None]] = []


@tool
async def paint_fence(side: str, config: RunnableConfig) -> str:
    """Paint one side of the fence in the colour and on the day the user picks."""
    colour = interrupt(
        {"question": "Which colour?", "choices": ["red", "blue"], "continuation": "colour"}
    )
    day = interrupt("Which day?")
    execution = config["configurable"]["dex_tool_execution"]
    painted.append((side, colour, day, execution.tool_call.input_continuation))
    return f"painted {side} {colour} on {day}"


PAINT = declare_tool_effect(paint_fence, ToolEffect.IDEMPOTENT_WRITE)


async def _paint_call(driver: RunnerDriver[LangGraphRunner]) -> Any:
    driver.start_turn("paint the north side")
    await driver.run_model()
    return driver.record("c1")


async def test_a_tool_asks_with_interrupt_and_each_rerun_resumes_it_with_the_answers() -> None:
    painted.clear()
    model = recording_model(ai_calls(("c1", "paint_fence", {"side": "north"})))
    driver = RunnerDriver(LangGraphRunner.from_chat_model(model, [PAINT]))
    record = await _paint_call(driver)
    runner = driver.runner

    first = await runner.execute_deferred_tool_call(driver.execution(record))
    assert first == ToolInputRequested(
        "Which colour?", choices=("red", "blue"), continuation="colour"
    )
    asked_again = replace(record, input_continuation="colour")
    second = await runner.execute_deferred_tool_call(
        driver.execution(asked_again, input_answers=["red"])
    )
    assert second == ToolInputRequested("Which day?")
    assert painted == [], "the tool asks before any effect"
    done = await runner.execute_deferred_tool_call(
        driver.execution(record, input_answers=["red", "tuesday"])
    )
    assert done == ToolExecutionResult("painted north red on tuesday")
    assert painted == [("north", "red", "tuesday", None)]


@pytest.mark.parametrize(
    "value",
    [
        {"question": " "},
        {"question": "Which?", "choices": "red"},
        {"question": "Which?", "allows_free_text": "no"},
        {"question": "Which?", "urgency": "high"},
        {"prompt": "Which?"},
        42,
    ],
)
def test_an_interrupt_value_that_is_no_question_is_refused(value: object) -> None:
    with pytest.raises(TypeError, match="called interrupt"):
        tool_input_requested("paint_fence", value)


def test_an_interrupt_value_gives_the_question_its_choices_and_continuation() -> None:
    asked = tool_input_requested(
        "paint_fence",
        {"question": "Which?", "choices": ("a", "b"), "allows_free_text": False},
    )
    assert asked == ToolInputRequested("Which?", choices=("a", "b"), allows_free_text=False)


# --- plan mode ---------------------------------------------------------------------


def _todos(status: str = "pending") -> dict[str, Any]:
    return {"todos": [{"content": "look up order 4", "status": status}]}


async def test_a_planning_turn_binds_only_write_todos_forced_on_its_first_call() -> None:
    model = recording_model(
        ai_calls(("p-1", "write_todos", _todos())),
        AIMessage(content="plan ready"),
        ai_calls(("p-2", "write_todos", _todos())),
    )
    runner = LangGraphRunner.from_chat_model(model, [READ_LOOKUP], planning_tool_choice="required")
    assert runner.supports_plan_mode
    driver = RunnerDriver(runner, built_ins=("write_todos",))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.start_turn("plan order 4")
    assert isinstance(await driver.run_model(), ToolCallsRequested)
    driver.finish("p-1", AgentToolCallStatus.SUCCEEDED, output="draft")
    draft = AgentPlan(revision=1, status="draft", tasks=(PlanTask("look up order 4", "pending"),))
    driver.plan = draft
    assert isinstance(await driver.run_model(), TurnCompleted)
    # Feedback on the draft plans again, without forcing a tool call.
    driver.start_turn("order 4, please")
    await driver.run_model()

    assert model.bound_tool_names == [["write_todos"]] * 3
    assert model.bound_tool_choices == ["write_todos", None, None]
    # The plan note comes before the turn's messages in every call that has a plan.
    feedback = model.calls[-1]
    note = build_plan_note(draft, InteractionMode.PLANNING)
    assert [m.content for m in feedback if isinstance(m, HumanMessage)] == [
        "plan order 4",
        note,
        "order 4, please",
    ]
    assert feedback[-2].content == note


async def test_a_chat_turn_and_an_executing_turn_bind_every_tool() -> None:
    model = recording_model(AIMessage(content="hi"), AIMessage(content="running"))
    driver = RunnerDriver(
        LangGraphRunner.from_chat_model(model, [READ_LOOKUP], planning_tool_choice="required"),
        built_ins=("write_todos",),
    )
    await driver.run_text_turns("hello")
    driver.interaction_mode = InteractionMode.EXECUTING
    await driver.run_text_turns("go")
    assert model.bound_tool_names == [["lookup_order", "write_todos"]] * 2
    assert model.bound_tool_choices == [None, None]


def test_a_graph_runner_declares_no_plan_mode_and_refuses_a_planning_tool_choice() -> None:
    graph = _react_agent(recording_model())
    assert not LangGraphRunner(graph).supports_plan_mode
    with pytest.raises(ValueError, match="plan_mode_enabled needs a runner"):
        create_langgraph_session_flow(
            graph, "Planner", built_in_tools=("write_todos",), plan_mode_enabled=True
        )
    with pytest.raises(ValueError, match="a graph binds its model to its tools itself"):
        create_langgraph_session_flow(graph, "Planner", planning_tool_choice="required")


class RefusingChatModel(RecordingChatModel):
    model_name: str = "claude-opus-5-5"


class ThinkingChatModel(RecordingChatModel):
    """Like ``ChatAnthropic(model="claude-sonnet-4-5", thinking=...)``."""

    model_name: str = "claude-sonnet-4-5"
    thinking: dict[str, Any] | None = None


def test_required_is_refused_for_a_model_that_refuses_a_forced_tool_choice() -> None:
    with pytest.raises(ValueError, match="claude-opus-5-5 refuses a forced tool choice"):
        LangGraphRunner.from_chat_model(
            RefusingChatModel(responses=[]), [], planning_tool_choice="required"
        )
    thinking = ThinkingChatModel(responses=[], thinking={"type": "enabled", "budget_tokens": 1024})
    with pytest.raises(ValueError, match="extended thinking"):
        LangGraphRunner.from_chat_model(thinking, [], planning_tool_choice="required")
    LangGraphRunner.from_chat_model(
        RefusingChatModel(responses=[]), [], planning_tool_choice="auto"
    )


# --- the model chosen per session --------------------------------------------------


async def test_resolve_model_chooses_the_model_of_every_call_and_of_summary_calls() -> None:
    small = recording_model(AIMessage(content="small answer"), AIMessage(content="small summary"))
    large = recording_model(AIMessage(content="large answer"))
    models = {"small": small, "large": large}
    runner = LangGraphRunner.from_chat_model(
        small, [READ_LOOKUP], resolve_model=lambda s: models[str(s.get("model", "small"))]
    )
    driver = RunnerDriver(runner)
    driver.session_settings = {"model": "large"}
    await driver.run_text_turns("hello")
    driver.session_settings = {}
    await driver.run_text_turns("again")
    assert [m.text for m in driver.messages if m.role == "assistant"] == [
        "large answer",
        "small answer",
    ]
    summary = await runner.summarize_context(summary_request(driver.context()))
    assert summary.summary == "small summary"
    assert len(large.calls) == 1


async def test_a_resolved_model_that_refuses_a_forced_tool_choice_fails_the_planning_call() -> None:
    refusing = RefusingChatModel(responses=[])
    runner = LangGraphRunner.from_chat_model(
        recording_model(),
        [],
        resolve_model=lambda settings: refusing,
        planning_tool_choice="required",
    )
    driver = RunnerDriver(runner, built_ins=("write_todos",))
    driver.interaction_mode = InteractionMode.PLANNING
    driver.start_turn("plan")
    with pytest.raises(ValueError, match="the chat model resolve_model chose"):
        await driver.run_model()


async def test_resolve_graph_chooses_the_graph_of_each_turn() -> None:
    small = recording_model(AIMessage(content="from the small graph"))
    large = recording_model(AIMessage(content="from the large graph"))
    graphs = {name: _react_agent(model) for name, model in {"small": small, "large": large}.items()}
    runner = LangGraphRunner(
        graphs["small"], resolve_graph=lambda s: graphs[str(s.get("model", "small"))]
    )
    driver = RunnerDriver(runner)
    driver.session_settings = {"model": "large"}
    await driver.run_text_turns("hello")
    assert driver.messages[-1].text == "from the large graph"
    assert small.calls == []
