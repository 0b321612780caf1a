"""PydanticAIRunner driven directly, as the session drives it, with Pydantic AI's FunctionModel."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

import dex_agents
from dex_agents import AgentToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.runner import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    TurnCompleted,
    get_deferred_tool_execution,
)
from dex_agents.testing import RunnerDriver as Session
from dex_agents_pydantic_ai import IDEMPOTENCY_KEY_METADATA_KEY, PydanticAIRunner, dex_tool_metadata


class ScriptedModel:
    """A FunctionModel script: one response per call, recording what each call received."""

    def __init__(self, *responses: ModelResponse) -> None:
        self.responses = list(responses)
        self.calls: list[tuple[list[ModelMessage], AgentInfo]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append((list(messages), info))
        if not self.responses:
            raise AssertionError("the model was called more often than scripted")
        return self.responses.pop(0)

    def model(self) -> FunctionModel:
        return FunctionModel(self)

    def tool_returns(self, call: int) -> dict[str, ToolReturnPart]:
        last = self.calls[call][0][-1]
        assert isinstance(last, ModelRequest)
        return {p.tool_call_id: p for p in last.parts if isinstance(p, ToolReturnPart)}


def calls(*parts: ToolCallPart, usage: RequestUsage | None = None) -> ModelResponse:
    return ModelResponse(
        parts=list(parts), usage=usage or RequestUsage(input_tokens=10, output_tokens=2)
    )


def answer(text: str, usage: RequestUsage | None = None) -> ModelResponse:
    return ModelResponse(
        parts=[TextPart(text)], usage=usage or RequestUsage(input_tokens=20, output_tokens=4)
    )


@dataclass
class Shop:
    owner: str
    runs: list[str]


def shop_agent(script: ScriptedModel) -> Agent[Shop, str]:
    agent = Agent(script.model(), deps_type=Shop, instructions="You run a shop.")

    @agent.tool(metadata=dex_tool_metadata(ToolEffect.READ))
    def lookup_order(ctx: RunContext[Shop], order_id: str) -> str:
        """Look up an order."""
        ctx.deps.runs.append(f"lookup {order_id}")
        if order_id == "retry":
            raise ModelRetry("order IDs are digits; try again")
        if order_id == "gone":
            raise ToolFailed("order gone was deleted")
        if order_id == "boom":
            raise RuntimeError("database down")
        return f"order {order_id} of {ctx.deps.owner}: shipped"

    @agent.tool(requires_approval=True, metadata={"dex_effect": "non_idempotent_write"})
    def refund_order(ctx: RunContext[Shop], order_id: str, amount: int) -> dict[str, Any]:
        """Refund an order."""
        ctx.deps.runs.append(f"refund {order_id}")
        assert ctx.tool_call_approved
        return {
            "refunded": order_id,
            "amount": amount,
            "key": (ctx.metadata or {}).get(IDEMPOTENCY_KEY_METADATA_KEY),
        }

    @agent.tool_plain
    def undeclared(note: str) -> str:
        """A tool that declares nothing."""
        return note

    return agent


def lookup(order_id: str, call_id: str) -> ToolCallPart:
    return ToolCallPart("lookup_order", {"order_id": order_id}, tool_call_id=call_id)


async def test_a_model_step_makes_one_request_and_defers_every_call_with_its_policy() -> None:
    script = ScriptedModel(
        calls(
            lookup("42", "c1"),
            ToolCallPart("refund_order", {"order_id": "42", "amount": 5}, tool_call_id="c2"),
            ToolCallPart("undeclared", {"note": "x"}, tool_call_id="c3"),
        )
    )
    shop = Shop("ann", [])
    session = Session(PydanticAIRunner(shop_agent(script), deps=shop))
    session.start_turn("Where is order 42?")

    outcome = await session.run_model()

    assert isinstance(outcome, ToolCallsRequested)
    assert len(script.calls) == 1
    assert shop.runs == []  # no tool ran inside the model step
    assert [(c.tool_call_id, c.tool_name, json.loads(c.arguments)) for c in outcome.tool_calls] == [
        ("c1", "lookup_order", {"order_id": "42"}),
        ("c2", "refund_order", {"order_id": "42", "amount": 5}),
        ("c3", "undeclared", {"note": "x"}),
    ]
    assert [c.policy for c in outcome.tool_calls] == [
        ResolvedToolPolicy(ToolEffect.READ, False),
        ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True),
        ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True),
    ]
    # The model was offered the agent's real tool definitions, with their schemas.
    offered = {t.name: t for t in script.calls[0][1].function_tools}
    assert set(offered) == {"lookup_order", "refund_order", "undeclared"}
    assert offered["lookup_order"].parameters_json_schema["required"] == ["order_id"]
    assert outcome.usage.model_calls == 1
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (10, 2)
    # Stored incrementally: one assistant message per call, the first carrying the response.
    stored = session.messages[1:]
    assert [(m.role, m.tool_call_id) for m in stored] == [
        ("assistant", "c1"),
        ("assistant", "c2"),
        ("assistant", "c3"),
    ]
    assert [len(ModelMessagesTypeAdapter.validate_json(m.framework_item)) for m in stored] == [
        1,
        0,
        0,
    ]


async def test_session_policies_win_over_the_tools_declaration_and_the_default_applies_last() -> (
    None
):
    script = ScriptedModel(
        calls(
            lookup("42", "c1"),
            ToolCallPart("undeclared", {"note": "x"}, tool_call_id="c2"),
        )
    )
    session = Session(
        PydanticAIRunner(shop_agent(script), deps=Shop("ann", [])),
        policies={"lookup_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)},
        default_effect=ToolEffect.READ,
    )
    session.start_turn("hi")

    outcome = await session.run_model()

    assert isinstance(outcome, ToolCallsRequested)
    assert [c.policy for c in outcome.tool_calls] == [
        ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, True),
        ResolvedToolPolicy(ToolEffect.READ, False),
    ]


async def test_resume_gives_each_call_its_recorded_result_through_pydantic_ai() -> None:
    script = ScriptedModel(
        calls(
            lookup("42", "c1"),
            ToolCallPart("refund_order", {"order_id": "42", "amount": 5}, tool_call_id="c2"),
            lookup("gone", "c3"),
        ),
        answer(
            "Order 42 shipped; no refund.", usage=RequestUsage(input_tokens=30, output_tokens=6)
        ),
    )
    shop = Shop("ann", [])
    session = Session(PydanticAIRunner(shop_agent(script), deps=shop))
    session.start_turn("Refund order 42")
    await session.run_model()
    session.finish("c1", AgentToolCallStatus.SUCCEEDED, output="order 42: shipped")
    session.finish("c2", AgentToolCallStatus.REJECTED, rejection_message="Not without a receipt.")
    session.finish("c3", AgentToolCallStatus.FAILED, error="order gone was deleted")

    outcome = await session.run_model()

    assert isinstance(outcome, TurnCompleted)
    assert len(script.calls) == 2
    assert shop.runs == []
    returns = script.tool_returns(1)
    assert (returns["c1"].content, returns["c1"].outcome) == ("order 42: shipped", "success")
    assert (returns["c2"].content, returns["c2"].outcome) == ("Not without a receipt.", "denied")
    assert (returns["c3"].content, returns["c3"].outcome) == ("order gone was deleted", "failed")
    # Only this call's usage, never the run's or the turn's running totals.
    assert (outcome.usage.model_calls, outcome.usage.input_tokens) == (1, 30)
    assert [(m.role, m.tool_call_id, m.tool_output, m.text) for m in outcome.new_messages] == [
        ("tool", "c1", "order 42: shipped", None),
        ("tool", "c2", "Not without a receipt.", None),
        ("tool", "c3", "order gone was deleted", None),
        ("assistant", None, None, "Order 42 shipped; no refund."),
    ]
    assert session.events.text == ["Order 42 shipped; no refund."]
    assert outcome.model_call_metadata is not None
    assert outcome.model_call_metadata.response_model == "function:ScriptedModel:"


async def test_every_stored_item_replays_unchanged_including_a_thinking_signature() -> None:
    thinking = ThinkingPart("I should look it up.", signature="sig-abc", provider_name="anthropic")
    script = ScriptedModel(
        ModelResponse(
            parts=[thinking, lookup("42", "c1")],
            usage=RequestUsage(input_tokens=10, output_tokens=2),
        ),
        answer("Shipped."),
        answer("You're welcome."),
    )
    session = Session(PydanticAIRunner(shop_agent(script), deps=Shop("ann", [])))
    session.start_turn("Where is 42?")
    await session.run_model()
    await session.run_tools()
    await session.run_model()
    session.start_turn("Thanks")
    await session.run_model()

    # The thinking part reached the model again, signature and provider included.
    for call in (1, 2):
        responses = [m for m in script.calls[call][0] if isinstance(m, ModelResponse)]
        assert responses[0].parts[0] == thinking
    # Each stored item is Pydantic AI's own JSON, exactly as dumped, and decodes back to it.
    for message in session.messages:
        decoded = ModelMessagesTypeAdapter.validate_json(message.framework_item)
        if message.role != "user":
            assert ModelMessagesTypeAdapter.dump_json(decoded).decode() == message.framework_item
    stored_response = json.loads(session.messages[1].framework_item)[0]
    assert stored_response["parts"][0]["signature"] == "sig-abc"
    # The second turn's model saw the whole first turn.
    kinds = [type(m).__name__ for m in script.calls[2][0]]
    assert kinds == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
    ]


async def test_execute_runs_the_real_tool_with_deps_and_the_idempotency_key() -> None:
    script = ScriptedModel(
        calls(ToolCallPart("refund_order", {"order_id": "42", "amount": 5}, tool_call_id="c1"))
    )
    made: list[str] = []

    def deps_factory(session_id: str) -> Shop:
        made.append(session_id)
        return Shop(f"owner of {session_id}", runs)

    runs: list[str] = []
    session = Session(PydanticAIRunner(shop_agent(script), deps_factory=deps_factory))
    session.start_turn("refund")
    await session.run_model()

    result = await session.runner.execute_deferred_tool_call(
        session.execution(session.record("c1"))
    )

    assert isinstance(result, ToolExecutionResult)
    assert json.loads(result.output) == {"refunded": "42", "amount": 5, "key": "s-1/turn-1/c1"}
    assert runs == ["refund 42"]
    assert made == ["s-1", "s-1"]  # the model step and the tool call each built deps
    assert len(script.calls) == 1  # running the tool asked the model nothing


async def test_a_tool_reads_the_session_call_it_serves() -> None:
    seen: list[str | None] = []
    script = ScriptedModel(calls(ToolCallPart("probe", {}, tool_call_id="c1")))
    agent = Agent(script.model())

    @agent.tool_plain(metadata=dex_tool_metadata(ToolEffect.IDEMPOTENT_WRITE))
    def probe() -> str:
        seen.append(get_deferred_tool_execution().idempotency_key)
        return "ok"

    session = Session(PydanticAIRunner(agent))
    session.start_turn("go")
    await session.run_model()
    await session.run_tools()

    assert seen == ["s-1/turn-1/c1"]
    with pytest.warns(DeprecationWarning, match="current_deferred_tool_execution"):
        assert dex_agents.current_deferred_tool_execution() is None  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(LookupError, match="only available inside a tool"):
        get_deferred_tool_execution()


async def test_model_retry_and_tool_failed_reach_the_model_as_failed_calls() -> None:
    script = ScriptedModel(calls(lookup("retry", "c1"), lookup("gone", "c2")))
    shop = Shop("ann", [])
    session = Session(PydanticAIRunner(shop_agent(script), deps=shop))
    session.start_turn("look")
    await session.run_model()

    with pytest.raises(ToolExecutionError) as retry:
        await session.runner.execute_deferred_tool_call(session.execution(session.record("c1")))
    with pytest.raises(ToolExecutionError) as failed:
        await session.runner.execute_deferred_tool_call(session.execution(session.record("c2")))

    assert "order IDs are digits; try again" in retry.value.message
    assert failed.value.message == "order gone was deleted"
    assert shop.runs == ["lookup retry", "lookup gone"]


async def test_arguments_are_validated_by_pydantic_ai_before_the_tool_runs() -> None:
    script = ScriptedModel(
        calls(
            ToolCallPart("lookup_order", {"order_id": 42, "extra": 1}, tool_call_id="c1"),
            ToolCallPart("lookup_order", "{not json", tool_call_id="c2"),
        )
    )
    shop = Shop("ann", [])
    session = Session(PydanticAIRunner(shop_agent(script), deps=shop))
    session.start_turn("look")
    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)  # deferred as the model made them

    for call_id in ("c1", "c2"):
        with pytest.raises(ToolExecutionError):
            await session.runner.execute_deferred_tool_call(
                session.execution(session.record(call_id))
            )
    assert shop.runs == []


async def test_an_unexpected_tool_error_propagates_for_the_session_to_retry() -> None:
    script = ScriptedModel(calls(lookup("boom", "c1")))
    session = Session(PydanticAIRunner(shop_agent(script), deps=Shop("ann", [])))
    session.start_turn("look")
    await session.run_model()

    with pytest.raises(RuntimeError, match="database down"):
        await session.runner.execute_deferred_tool_call(session.execution(session.record("c1")))


async def test_an_unknown_tool_fails_the_call_without_running_anything() -> None:
    script = ScriptedModel(calls(lookup("1", "c1")))
    session = Session(PydanticAIRunner(shop_agent(script), deps=Shop("ann", [])))
    session.start_turn("look")
    await session.run_model()
    record = replace(session.record("c1"), tool_name="no_such_tool")

    with pytest.raises(ToolExecutionError, match="no_such_tool"):
        await session.runner.execute_deferred_tool_call(session.execution(record))


async def test_unfinished_turn_messages_answer_every_stored_call() -> None:
    script = ScriptedModel(calls(lookup("1", "c1"), lookup("2", "c2")))
    session = Session(PydanticAIRunner(shop_agent(script), deps=Shop("ann", [])))
    session.start_turn("look")
    await session.run_model()
    session.finish("c1", AgentToolCallStatus.SUCCEEDED, output="one")
    session.finish("c2", AgentToolCallStatus.OUTCOME_UNKNOWN)

    messages = session.runner.build_unfinished_turn_messages(session.context())

    assert [(m.role, m.tool_call_id) for m in messages] == [("tool", "c1"), ("tool", "c2")]
    (request,) = ModelMessagesTypeAdapter.validate_json(messages[0].framework_item)
    assert isinstance(request, ModelRequest)
    outcomes = [(p.tool_call_id, p.outcome) for p in request.parts if isinstance(p, ToolReturnPart)]
    assert outcomes == [("c1", "success"), ("c2", "failed")]
    # With them stored, the next turn's history is complete for Pydantic AI.
    session.store(messages)
    script.responses.append(answer("ok"))
    session.start_turn("and now?")
    assert isinstance(await session.run_model(), TurnCompleted)


async def test_a_stored_call_without_a_stored_result_is_answered_as_outcome_unknown() -> None:
    script = ScriptedModel(calls(lookup("1", "c1"), lookup("2", "c2")), answer("sorry"))
    session = Session(PydanticAIRunner(shop_agent(script), deps=Shop("ann", [])))
    session.start_turn("look")
    await session.run_model()
    # The turn failed and its calls' results were never stored.
    stored_before = [m.framework_item for m in session.messages]
    session.start_turn("and now?")

    outcome = await session.run_model()

    assert isinstance(outcome, TurnCompleted)
    returns = script.tool_returns(1)
    assert [(p.tool_call_id, p.content, p.outcome) for p in returns.values()] == [
        ("c1", OUTCOME_UNKNOWN_TOOL_RESULT, "failed"),
        ("c2", OUTCOME_UNKNOWN_TOOL_RESULT, "failed"),
    ]
    last = script.calls[1][0][-1]
    assert isinstance(last, ModelRequest)
    assert isinstance(last.parts[-1], UserPromptPart)  # the new prompt follows the results
    # Nothing stored was rewritten: the results exist only in the request.
    assert [m.framework_item for m in session.messages][: len(stored_before)] == stored_before


async def test_system_prompts_reach_every_model_call_without_changing_stored_items() -> None:
    script = ScriptedModel(calls(lookup("1", "c1")), answer("done"))
    agent_with_prompt = Agent(script.model(), deps_type=Shop, system_prompt="Be terse.")

    @agent_with_prompt.tool(metadata=dex_tool_metadata(ToolEffect.READ))
    def lookup_order(ctx: RunContext[Shop], order_id: str) -> str:
        return "ok"

    session = Session(PydanticAIRunner(agent_with_prompt, deps=Shop("ann", [])))
    session.start_turn("look")
    user_item = session.messages[0].framework_item
    await session.run_model()
    await session.run_tools()
    await session.run_model()

    for messages, _ in script.calls:
        first = messages[0]
        assert isinstance(first, ModelRequest)
        assert isinstance(first.parts[0], SystemPromptPart)
        assert first.parts[0].content == "Be terse."
    assert session.messages[0].framework_item == user_item


def test_the_user_message_is_deterministic_pydantic_ai_json() -> None:
    runner = PydanticAIRunner(Agent(FunctionModel(lambda m, i: answer("x"))))

    first = runner.build_user_message("hello")
    assert first == runner.build_user_message("hello")
    assert (first.role, first.text) == ("user", "hello")
    (request,) = ModelMessagesTypeAdapter.validate_json(first.framework_item)
    assert isinstance(request, ModelRequest)
    prompt = request.parts[0]
    assert isinstance(prompt, UserPromptPart)
    assert prompt.content == "hello"


async def test_enabled_built_in_tools_are_offered_and_deferred_as_reads() -> None:
    script = ScriptedModel(
        calls(ToolCallPart("ask_user", {"question": "Which order?"}, tool_call_id="q1"))
    )
    session = Session(
        PydanticAIRunner(shop_agent(script), deps=Shop("ann", [])), built_ins=("ask_user",)
    )
    session.start_turn("refund my order")

    outcome = await session.run_model()

    assert "ask_user" in {t.name for t in script.calls[0][1].function_tools}
    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.READ, False)


def test_deps_and_deps_factory_are_exclusive() -> None:
    agent = Agent(FunctionModel(lambda m, i: answer("x")), deps_type=Shop)
    with pytest.raises(ValueError, match="not both"):
        PydanticAIRunner(agent, deps=Shop("a", []), deps_factory=lambda s: Shop(s, []))


async def test_an_invalid_declared_effect_is_a_clear_error() -> None:
    script = ScriptedModel(calls(ToolCallPart("odd", {}, tool_call_id="c1")))
    agent = Agent(script.model())

    @agent.tool_plain(metadata={"dex_effect": "sometimes"})
    def odd() -> str:
        return "x"

    session = Session(PydanticAIRunner(agent))
    session.start_turn("go")
    with pytest.raises(ValueError, match="dex_effect='sometimes'"):
        await session.run_model()


async def test_a_call_of_an_unknown_tool_is_deferred_and_its_failure_reaches_the_model() -> None:
    script = ScriptedModel(
        calls(ToolCallPart("no_such_tool", {"a": 1}, tool_call_id="c1")), answer("sorry")
    )
    session = Session(PydanticAIRunner(shop_agent(script), deps=Shop("ann", [])))
    session.start_turn("go")

    outcome = await session.run_model()
    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True)
    await session.run_tools()
    record = session.record("c1")
    assert record.status is AgentToolCallStatus.FAILED
    assert "no_such_tool" in (record.error or "")

    assert isinstance(await session.run_model(), TurnCompleted)
    assert len(script.calls) == 2  # one model request per step, no retry request in between
    returns = script.tool_returns(1)
    assert returns["c1"].outcome == "failed"
    assert "no_such_tool" in str(returns["c1"].content)


class City(BaseModel):
    name: str


async def test_structured_output_and_output_validators_run_in_the_final_step() -> None:
    validated: list[City] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        output_tool = info.output_tools[0].name
        if len(messages) == 1:
            return calls(
                ToolCallPart("lookup_order", {"order_id": "1"}, tool_call_id="c1"),
            )
        return calls(
            ToolCallPart(output_tool, {"name": "Paris"}, tool_call_id="out"),
            ToolCallPart("lookup_order", {"order_id": "2"}, tool_call_id="c2"),
        )

    agent = Agent(FunctionModel(respond), output_type=City, deps_type=Shop)
    shop = Shop("ann", [])

    @agent.tool(metadata=dex_tool_metadata(ToolEffect.READ))
    def lookup_order(ctx: RunContext[Shop], order_id: str) -> str:
        ctx.deps.runs.append(order_id)
        return "ok"

    @agent.output_validator
    def check(city: City) -> City:
        validated.append(city)
        return city

    session = Session(PydanticAIRunner(agent, deps=shop))
    session.start_turn("where?")
    assert isinstance(await session.run_model(), ToolCallsRequested)
    await session.run_tools()

    outcome = await session.run_model()

    assert isinstance(outcome, TurnCompleted)
    assert validated == [City(name="Paris")]
    assert shop.runs == ["1"]  # the call beside the output tool was skipped, as Pydantic AI does
    stored = ModelMessagesTypeAdapter.validate_json(outcome.new_messages[1].framework_item)
    assert isinstance(stored[0], ModelResponse)


async def test_stream_text_writes_text_deltas_as_the_model_streams() -> None:
    from collections.abc import AsyncIterator

    from pydantic_ai.models.function import DeltaToolCall

    requests: list[int] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        requests.append(len(messages))
        if len(requests) == 1:
            yield {
                0: DeltaToolCall(
                    name="lookup_order", json_args='{"order_id": "42"}', tool_call_id="c1"
                )
            }
            return
        for chunk in ("Order 42 ", "has ", "shipped."):
            yield chunk

    agent = Agent(FunctionModel(stream_function=stream), deps_type=Shop)
    shop = Shop("ann", [])

    @agent.tool(metadata=dex_tool_metadata(ToolEffect.READ))
    def lookup_order(ctx: RunContext[Shop], order_id: str) -> str:
        ctx.deps.runs.append(order_id)
        return "shipped"

    session = Session(PydanticAIRunner(agent, deps=shop, stream_text=True))
    session.start_turn("where is 42?")
    first = await session.run_model()
    assert isinstance(first, ToolCallsRequested)
    assert [c.tool_call_id for c in first.tool_calls] == ["c1"]
    assert shop.runs == []
    await session.run_tools()

    final = await session.run_model()

    assert isinstance(final, TurnCompleted)
    assert session.events.text == ["Order 42 ", "has ", "shipped."]
    assert final.new_messages[-1].text == "Order 42 has shipped."
    assert len(requests) == 2


async def test_a_tool_may_raise_tool_execution_error_but_not_defer_itself() -> None:
    from pydantic_ai import CallDeferred

    script = ScriptedModel(
        calls(
            ToolCallPart("refuse", {}, tool_call_id="c1"),
            ToolCallPart("later", {}, tool_call_id="c2"),
        )
    )
    agent = Agent(script.model())

    @agent.tool_plain
    def refuse() -> str:
        raise ToolExecutionError("the card was declined")

    @agent.tool_plain
    def later() -> str:
        raise CallDeferred()

    session = Session(PydanticAIRunner(agent))
    session.start_turn("go")
    await session.run_model()
    await session.run_tools()

    assert session.record("c1").status is AgentToolCallStatus.FAILED
    assert session.record("c1").error == "the card was declined"
    assert session.record("c2").status is AgentToolCallStatus.FAILED
    assert "deferred its own call" in (session.record("c2").error or "")


async def test_the_built_in_toolset_is_built_once_per_set_of_enabled_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dex_agents_pydantic_ai import _runner as runner_module

    built: list[object] = []
    real = runner_module._external_built_in_toolsets  # pyright: ignore[reportPrivateUsage]

    def counting(names: Any) -> Any:
        built.append(names)
        return real(names)

    monkeypatch.setattr(runner_module, "_external_built_in_toolsets", counting)
    script = ScriptedModel(answer("one"), answer("two"), answer("three"))
    runner = PydanticAIRunner(shop_agent(script), deps=Shop("ann", []))
    with_ask = Session(runner, built_ins=("ask_user",))
    await with_ask.run_text_turns("first", "second")
    without = Session(runner, flow_id="s-2")
    await without.run_text_turns("third")
    offered = [{t.name for t in info.function_tools} for _, info in script.calls]
    assert ["ask_user" in names for names in offered] == [True, True, False]
    # Three model steps, two sets of enabled names.
    assert built == [("ask_user",), ()]
