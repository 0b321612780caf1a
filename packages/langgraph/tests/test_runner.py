"""LangGraphRunner driven directly with an AgentTurnContext, as the session builds it."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from dex_agents import AgentToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.runner import (
    DISPLAY_ONLY_FRAMEWORK_ITEM,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    ResolvedToolPolicy,
    ToolCallsRequested,
    TurnCompleted,
    get_deferred_tool_execution,
)
from dex_agents.testing import RunnerDriver as Session
from dex_agents_langgraph import (
    LangGraphRunner,
    declare_tool_effect,
    dex_tool_metadata,
    idempotency_key_of,
    tool_execution_of,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


# --- a chat model that answers from a list and records what it was given -------------


class RecordingChatModel(BaseChatModel):
    """Answers with ``responses`` in order; ``calls`` holds each call's input messages."""

    responses: list[AIMessage]
    calls: list[list[BaseMessage]] = Field(default_factory=list[list[BaseMessage]])
    bound_tool_names: list[list[str]] = Field(default_factory=list[list[str]])
    model_name: str = "recording-1"

    @property
    def _llm_type(self) -> str:
        return "recording"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        schemas = [convert_to_openai_tool(t) for t in tools]
        self.bound_tool_names.append([s["function"]["name"] for s in schemas])
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
        self.calls.append([m.model_copy(deep=True) for m in messages])
        response = self.responses[len(self.calls) - 1]
        return ChatResult(generations=[ChatGeneration(message=response.model_copy(deep=True))])


def recording_model(*responses: AIMessage) -> RecordingChatModel:
    return RecordingChatModel(responses=list(responses))


def ai_calls(*calls: tuple[str, str, dict[str, Any]], **fields: Any) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[
            {"id": call_id, "name": name, "args": args, "type": "tool_call"}
            for call_id, name, args in calls
        ],
        **fields,
    )


# --- tools -------------------------------------------------------------------------

runs: list[tuple[str, dict[str, Any], str | None]] = []


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    runs.append(("lookup_order", {"order_id": order_id}, None))
    return f"order {order_id} shipped"


@tool
async def refund_order(order_id: str, config: RunnableConfig) -> str:
    """Refund an order."""
    key = idempotency_key_of(config)
    execution = tool_execution_of(config)
    assert execution is not None
    runs.append(("refund_order", {"order_id": order_id}, key))
    return f"refunded {order_id} with key {key}"


@tool
def broken(reason: str) -> str:
    """Always fails with a message for the model."""
    raise ToolException(f"cannot do it: {reason}")


READ_LOOKUP = declare_tool_effect(lookup_order, ToolEffect.READ)
WRITE_REFUND = declare_tool_effect(refund_order, ToolEffect.NON_IDEMPOTENT_WRITE)


@pytest.fixture(autouse=True)
def clear_runs() -> None:
    runs.clear()


# --- tests -------------------------------------------------------------------------


async def test_prebuilt_agent_defers_every_call_and_makes_one_model_call_per_step() -> None:
    model = recording_model(
        ai_calls(
            ("c1", "lookup_order", {"order_id": "42"}), ("c2", "refund_order", {"order_id": "42"})
        ),
        AIMessage(content="Order 42 shipped and was refunded."),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(model, [READ_LOOKUP, WRITE_REFUND], interrupt_before=["tools"])
    runner = LangGraphRunner(graph)  # tools come from the agent's ToolNode
    assert sorted(runner.tools) == ["lookup_order", "refund_order"]
    session = Session(runner)
    session.start_turn("Refund order 42")

    first = await session.run_model()
    assert isinstance(first, ToolCallsRequested)
    assert len(model.calls) == 1
    assert runs == []  # nothing ran inside the model step
    assert [(c.tool_call_id, c.tool_name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("c1", "lookup_order", {"order_id": "42"}),
        ("c2", "refund_order", {"order_id": "42"}),
    ]
    assert [c.policy for c in first.tool_calls] == [
        ResolvedToolPolicy(ToolEffect.READ, False),
        ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True),
    ]
    # One assistant message per call; the first carries the AIMessage, the second only shows.
    assert [(m.role, m.tool_call_id, m.tool_name) for m in first.new_messages] == [
        ("assistant", "c1", "lookup_order"),
        ("assistant", "c2", "refund_order"),
    ]
    assert first.new_messages[1].framework_item == DISPLAY_ONLY_FRAMEWORK_ITEM

    await session.run_tools()
    assert runs == [
        ("lookup_order", {"order_id": "42"}, None),
        ("refund_order", {"order_id": "42"}, "s-1/turn-1/c2"),
    ]

    second = await session.run_model()
    assert isinstance(second, TurnCompleted)
    assert len(model.calls) == 2
    seen = model.calls[1]
    assert [type(m).__name__ for m in seen] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
    ]
    results = [m for m in seen if isinstance(m, ToolMessage)]
    assert [(r.tool_call_id, r.content, r.status) for r in results] == [
        ("c1", "order 42 shipped", "success"),
        ("c2", "refunded 42 with key s-1/turn-1/c2", "success"),
    ]
    assert [m.role for m in second.new_messages] == ["tool", "tool", "assistant"]
    assert second.new_messages[-1].text == "Order 42 shipped and was refunded."
    assert len(runs) == 2  # the resumed step ran no tool


def test_a_graph_that_runs_its_own_tools_is_refused() -> None:
    model = recording_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(model, [READ_LOOKUP])
    with pytest.raises(ValueError, match="interrupt_before=\\['tools'\\]"):
        LangGraphRunner(graph)


async def test_a_rejection_reaches_the_model_as_an_error_tool_message() -> None:
    model = recording_model(
        ai_calls(("c1", "refund_order", {"order_id": "7"})),
        AIMessage(content="I did not refund it."),
    )
    session = Session(LangGraphRunner.from_chat_model(model, [WRITE_REFUND]))
    session.start_turn("Refund order 7")
    await session.run_model()
    session.reject("c1", "Not without a receipt.")
    await session.run_tools()
    assert runs == []
    outcome = await session.run_model()
    assert isinstance(outcome, TurnCompleted)
    result = model.calls[1][-1]
    assert isinstance(result, ToolMessage)
    assert (result.tool_call_id, result.content, result.status) == (
        "c1",
        "Not without a receipt.",
        "error",
    )
    stored = outcome.new_messages[0]
    assert (stored.role, stored.tool_call_id, stored.tool_output) == (
        "tool",
        "c1",
        "Not without a receipt.",
    )


async def test_provider_content_blocks_are_stored_and_replayed_unchanged() -> None:
    thinking = {"type": "thinking", "thinking": "Order first.", "signature": "c2lnbmF0dXJl=="}
    redacted = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
    response = AIMessage(
        content=[thinking, redacted, {"type": "text", "text": "Looking it up."}],
        tool_calls=[
            {
                "id": "toolu_01",
                "name": "lookup_order",
                "args": {"order_id": "1"},
                "type": "tool_call",
            }
        ],
        additional_kwargs={"provider_extra": {"kept": True}},
        response_metadata={"id": "msg_01", "model_name": "claude-x", "stop_reason": "tool_use"},
        usage_metadata={
            "input_tokens": 120,
            "output_tokens": 30,
            "total_tokens": 150,
            "input_token_details": {"cache_read": 100, "cache_creation": 5},
            "output_token_details": {"reasoning": 12},
        },
    )
    model = recording_model(response, AIMessage(content="Shipped."))
    session = Session(LangGraphRunner.from_chat_model(model, [READ_LOOKUP]))
    session.start_turn("Where is order 1?")

    first = await session.run_model()
    assert isinstance(first, ToolCallsRequested)
    assert session.events.reasoning == ["Order first."]
    assert session.events.text == ["Looking it up."]
    assert first.usage.model_calls == 1
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.total_tokens) == (
        120,
        30,
        150,
    )
    assert (first.usage.cache_read_tokens, first.usage.cache_write_tokens) == (100, 5)
    assert first.usage.reasoning_tokens == 12
    metadata = first.model_call_metadata
    assert metadata is not None
    assert (metadata.request_model, metadata.response_model, metadata.response_id) == (
        "recording-1",
        "claude-x",
        "msg_01",
    )
    assert metadata.finish_reasons == ("tool_use",)

    stored = session.items()[-1]
    assert stored["data"]["content"] == [
        thinking,
        redacted,
        {"type": "text", "text": "Looking it up."},
    ]
    assert stored["data"]["additional_kwargs"] == {"provider_extra": {"kept": True}}

    await session.run_tools()
    await session.run_model()
    replayed = model.calls[1][1]
    assert isinstance(replayed, AIMessage)
    original = messages_to_dict([response])[0]["data"]
    again = messages_to_dict([replayed])[0]["data"]
    for key in (
        "content",
        "additional_kwargs",
        "response_metadata",
        "tool_calls",
        "usage_metadata",
    ):
        assert again[key] == original[key], key


async def test_session_policy_wins_then_tool_metadata_then_default_effect() -> None:
    plain = tool("plain_tool", description="No declaration.")(lambda: "ok")
    assert isinstance(plain, BaseTool)
    approving_read = declare_tool_effect(lookup_order, "read", requires_approval=True)
    model = recording_model(
        ai_calls(
            ("c1", "lookup_order", {"order_id": "1"}),
            ("c2", "refund_order", {"order_id": "1"}),
            ("c3", "plain_tool", {}),
            ("c4", "no_such_tool", {}),
        )
    )
    session = Session(
        LangGraphRunner.from_chat_model(model, [approving_read, WRITE_REFUND, plain]),
        policies={"refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)},
    )
    session.start_turn("go")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert [c.policy for c in outcome.tool_calls] == [
        ResolvedToolPolicy(ToolEffect.READ, True),
        ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False),
        ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True),
        # A tool the runner does not have gets the session default too (call_policy).
        ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True),
    ]
    assert model.bound_tool_names == [["lookup_order", "refund_order", "plain_tool"]]


async def test_built_in_tools_are_offered_with_the_fixed_policy() -> None:
    model = recording_model(ai_calls(("c1", "ask_user", {"question": "Which order?"})))
    session = Session(
        LangGraphRunner.from_chat_model(model, [READ_LOOKUP]), built_ins=("ask_user",)
    )
    session.start_turn("help")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert model.bound_tool_names == [["lookup_order", "ask_user"]]
    assert outcome.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.READ, False)


async def test_tool_failures_the_model_should_see() -> None:
    model = recording_model(
        ai_calls(
            ("c1", "broken", {"reason": "closed"}),
            ("c2", "lookup_order", {"wrong": 1}),
            ("c3", "unknown_tool", {}),
        ),
        AIMessage(content="done"),
    )
    session = Session(LangGraphRunner.from_chat_model(model, [broken, READ_LOOKUP]))
    session.start_turn("go")
    await session.run_model()
    await session.run_tools()
    errors = [(r.status, r.error) for r in session.records]
    assert errors[0] == (AgentToolCallStatus.FAILED, "cannot do it: closed")
    assert errors[1][0] is AgentToolCallStatus.FAILED
    assert "invalid arguments for lookup_order" in str(errors[1][1])
    assert errors[2] == (AgentToolCallStatus.FAILED, "unknown tool unknown_tool")
    assert runs == []  # the bad arguments were refused before the tool ran
    await session.run_model()
    statuses = [m.status for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert statuses == ["error", "error", "error"]


async def test_an_unexpected_tool_error_propagates_for_the_session_to_retry() -> None:
    @tool
    def flaky() -> str:
        """Fails unexpectedly."""
        raise ConnectionError("backend down")

    model = recording_model(ai_calls(("c1", "flaky", {})))
    session = Session(LangGraphRunner.from_chat_model(model, [flaky]))
    session.start_turn("go")
    await session.run_model()
    with pytest.raises(ConnectionError):
        await session.runner.execute_deferred_tool_call(session.execution(session.records[0]))


async def test_an_orphaned_call_gets_an_outcome_unknown_result_and_unfinished_messages() -> None:
    model = recording_model(
        ai_calls(
            ("c1", "lookup_order", {"order_id": "1"}), ("c2", "lookup_order", {"order_id": "2"})
        ),
        AIMessage(content="next turn answer"),
    )
    runner = LangGraphRunner.from_chat_model(model, [READ_LOOKUP])
    session = Session(runner)
    session.start_turn("first")
    await session.run_model()
    # Only c1 finished when the turn failed: its result is the unfinished-turn message.
    session.records[0] = replace(
        session.records[0], status=AgentToolCallStatus.SUCCEEDED, output="one"
    )
    unfinished = runner.build_unfinished_turn_messages(session.context())
    assert [(m.role, m.tool_call_id, m.tool_output) for m in unfinished] == [("tool", "c1", "one")]
    session.store(unfinished)

    session.start_turn("second")
    await session.run_model()
    seen = model.calls[1]
    assert [type(m).__name__ for m in seen] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "HumanMessage",
    ]
    orphan = seen[3]
    assert isinstance(orphan, ToolMessage)
    assert (orphan.tool_call_id, orphan.content, orphan.status) == (
        "c2",
        OUTCOME_UNKNOWN_TOOL_RESULT,
        "error",
    )


async def test_a_rerun_model_step_sends_the_same_input() -> None:
    model = recording_model(
        ai_calls(("c1", "lookup_order", {"order_id": "1"})),
        AIMessage(content="a"),
        AIMessage(content="a"),
    )
    session = Session(
        LangGraphRunner.from_chat_model(model, [READ_LOOKUP], system_prompt="Be brief.")
    )
    session.start_turn("go")
    await session.run_model()
    await session.run_tools()
    context = session.context()
    await session.runner.run_model_step(context)
    await session.runner.run_model_step(replace(context, attempt=2))
    first, second = (messages_to_dict(call) for call in model.calls[1:])
    for message in (*first, *second):
        message["data"]["id"] = None  # the graph's reducer names unnamed messages
    assert first == second
    assert model.calls[1][0].content == "Be brief."
    assert all(m.get("type") != "system" for m in session.items())


def test_bad_tool_metadata_is_refused_when_the_runner_is_built() -> None:
    bad = lookup_order.model_copy(update={"metadata": {"dex_effect": "sometimes"}})
    with pytest.raises(ValueError, match="dex_effect"):
        LangGraphRunner.from_chat_model(recording_model(), [bad])


def test_stored_user_message_is_langchains_dict_form() -> None:
    runner = LangGraphRunner.from_chat_model(recording_model())
    message = runner.build_user_message("hello")
    assert (message.role, message.text) == ("user", "hello")
    assert (
        json.loads(message.framework_item) == messages_to_dict([HumanMessage(content="hello")])[0]
    )
    assert runner.build_user_message("hello") == message


class StreamingChatModel(GenericFakeChatModel):
    """LangChain's fake model that streams its answer word by word, with bind_tools."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(**kwargs)


async def test_a_streaming_model_writes_each_delta_once() -> None:
    answer = "Order 42 left the warehouse on Monday."
    model = StreamingChatModel(messages=iter([AIMessage(content=answer)]))
    session = Session(LangGraphRunner.from_chat_model(model, [READ_LOOKUP]))
    session.start_turn("Where is order 42?")
    outcome = await session.run_model()
    assert isinstance(outcome, TurnCompleted)
    assert len(session.events.text) > 1  # it really streamed
    assert "".join(session.events.text) == answer
    assert outcome.new_messages[-1].text == answer


async def test_a_tool_reads_its_call_with_the_shared_helper_in_sync_and_async_tools() -> None:
    seen: list[tuple[str, str]] = []

    @tool
    def sync_probe() -> str:
        """Runs in LangChain's thread pool."""
        seen.append(("sync", get_deferred_tool_execution().idempotency_key))
        return "ok"

    @tool
    async def async_probe() -> str:
        """Runs on the event loop."""
        seen.append(("async", get_deferred_tool_execution().idempotency_key))
        return "ok"

    model = recording_model(
        ai_calls(("c1", "sync_probe", {}), ("c2", "async_probe", {})), AIMessage(content="done")
    )
    session = Session(
        LangGraphRunner.from_chat_model(
            model,
            [
                declare_tool_effect(sync_probe, ToolEffect.READ),
                declare_tool_effect(async_probe, ToolEffect.READ),
            ],
        )
    )
    session.start_turn("probe")
    await session.run_model()
    await session.run_tools()

    assert seen == [("sync", "s-1/turn-1/c1"), ("async", "s-1/turn-1/c2")]
    with pytest.raises(LookupError):
        get_deferred_tool_execution()


def test_declarations_use_the_shared_metadata_keys_and_keep_other_metadata() -> None:
    tagged = lookup_order.model_copy(update={"metadata": {"team": "orders"}})
    declared = declare_tool_effect(tagged, "idempotent_write", requires_approval=True)
    assert declared.metadata == {
        "team": "orders",
        "dex_effect": "idempotent_write",
        "dex_requires_approval": True,
    }
    assert declare_tool_effect(declared, ToolEffect.READ).metadata == {
        "team": "orders",
        "dex_effect": "read",
    }
    assert dex_tool_metadata(ToolEffect.READ) == {"dex_effect": "read"}
    with pytest.raises(ValueError, match="effect must be a ToolEffect"):
        declare_tool_effect(lookup_order, "sometimes")
    with pytest.raises(TypeError, match="BaseTool"):
        declare_tool_effect(lambda: "x", ToolEffect.READ)  # type: ignore[type-var]


async def test_stored_messages_are_decoded_once_and_each_step_gets_its_own_copies() -> None:
    from dex_agents_langgraph import _messages as stored

    cache = stored._DECODED_MESSAGES  # pyright: ignore[reportPrivateUsage]
    model = recording_model(*(AIMessage(content=f"answer {n}") for n in range(3)))
    session = Session(LangGraphRunner.from_chat_model(model, [READ_LOOKUP]))
    await session.run_text_turns("a question only this test asks", "and a second one")
    session.start_turn("and a third")
    hits, misses = cache.hits, cache.misses

    await session.run_model()

    # Replayed before, so cached: the first three messages. Decoded now, for the first time:
    # the last answer (written by the step before, never read yet) and the new question.
    assert (cache.hits - hits, cache.misses - misses) == (3, 2)
    assert [m.content for m in model.calls[2]] == [
        "a question only this test asks",
        "answer 0",
        "and a second one",
        "answer 1",
        "and a third",
    ]
    # The graph's reducer named the messages it was given; the cached ones stay as stored.
    assert all(m.id is not None for m in model.calls[2])
    cached = stored.stored_messages(session.messages)
    assert [m.id for m in cached if isinstance(m, HumanMessage)] == [None] * 3
    assert messages_to_dict(cached) == session.items()
