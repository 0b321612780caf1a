"""Stepwise sessions on the real local engine with a real AsyncWorker and a scripted model."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow, AgentSnapshot, ToolEffect, ToolPolicy
from dex_agents.models import (
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.runner import model_call_limit_result
from dex_agents.stepwise import (
    AgentDefinition,
    ToolCallContext,
    create_stepwise_session_flow,
    function_tool,
)
from dex_agents.testing import (
    AgentSessionTestClient,
    AgentTestEnvironment,
    executed_step_types,
    read_step_history,
)
from dex_agents.values import ResolveInterruptInput
from dex_local_engine import LocalEngine

_flow_numbers = itertools.count(1)


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine(database=":memory:", port=0) as running:
        yield running


class Env:
    """One Stepwise Flow on the module's engine with an in-process Worker (the testing module's)."""

    def __init__(self, environment: AgentTestEnvironment, flow: AgentSessionFlow) -> None:
        self.environment = environment
        self.flow = flow
        self.client = environment.client
        self.address = environment.server_address
        self.sessions = AgentSessionTestClient(environment.client, flow)

    async def start(self, session_id: str, text: str) -> None:
        await self.sessions.start_session(session_id, text)

    async def send(self, session_id: str, text: str) -> None:
        assert await self.sessions.send_user_message(session_id, text)

    async def snapshot(self, session_id: str) -> AgentSnapshot:
        return await self.sessions.snapshot(session_id)

    async def wait_for(
        self, session_id: str, predicate: Callable[[AgentSnapshot], bool]
    ) -> AgentSnapshot:
        return await self.sessions.wait_for_snapshot(
            session_id, predicate, description="the state the test waits for"
        )

    async def wait_for_turns(self, session_id: str, turns: int) -> AgentSnapshot:
        return await self.sessions.wait_for_completed_turns(session_id, turns)

    async def step_types(self, session_id: str) -> list[str]:
        return executed_step_types(await read_step_history(self.address, session_id))


@pytest.fixture
async def open_env(engine: LocalEngine) -> AsyncIterator[Callable[[AgentDefinition], Any]]:
    opened: list[AgentTestEnvironment] = []

    async def make(definition: AgentDefinition | AgentSessionFlow) -> Env:
        flow = (
            definition
            if isinstance(definition, AgentSessionFlow)
            else create_stepwise_session_flow(definition, f"StepwiseTest{next(_flow_numbers)}")
        )
        environment = await AgentTestEnvironment.start(
            flows=[flow], server_address=engine.address, worker_in_process=True
        )
        opened.append(environment)
        return Env(environment, flow)

    yield make
    for environment in opened:
        await environment.close()


def answer_with_results(request: ModelRequest) -> ScriptedModelReply | None:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text="; ".join(f"{r.tool_name}: {r.output}" for r in results))
    return None


async def test_read_tool_turn_stores_the_transcript_while_the_tool_runs(open_env: Any) -> None:
    tool_started = asyncio.Event()
    release = asyncio.Event()

    @function_tool(effect=ToolEffect.READ)
    async def lookup_order(order_id: str) -> str:
        """Look up an order."""
        tool_started.set()
        await release.wait()
        return f"order {order_id} shipped"

    def script(request: ModelRequest) -> ScriptedModelReply:
        return answer_with_results(request) or ScriptedModelReply(
            text="Checking.", tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "42"})]
        )

    model = ScriptedModelClient(script)
    env = await open_env(
        AgentDefinition(name="support", instructions="Help.", model=model, tools=[lookup_order])
    )
    await env.start("s-read", "Where is order 42?")
    await asyncio.wait_for(tool_started.wait(), 60)

    # While the tool runs, the model output is already stored and the run state is the count.
    running = await env.snapshot("s-read")
    assert [m.role for m in running.messages] == ["user", "assistant"]
    item = json.loads(running.messages[1].framework_item)
    assert item["type"] == "model_output"
    assert item["tool_calls"][0]["tool_name"] == "lookup_order"
    assert len(model.requests) == 1

    release.set()
    done = await env.wait_for_turns("s-read", 1)
    assert [m.role for m in done.messages] == ["user", "assistant", "tool", "assistant"]
    assert done.messages[-1].text == "lookup_order: order 42 shipped"
    assert len(model.requests) == 2  # one model call per RunModel
    assert done.usage.model_calls == 2
    assert await env.step_types("s-read") == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "ResumeTurn",
        "RunModel",
    ]

    # History replay: the next turn's model call sees the whole stored transcript.
    await env.send("s-read", "Thanks")
    await env.wait_for_turns("s-read", 2)
    last = model.requests[2]  # the first model call of turn 2
    assert ScriptedModelClient.user_texts(last) == ["Where is order 42?", "Thanks"]
    assert [i.type for i in last.items] == [
        "user_text",
        "model_output",
        "tool_result",
        "model_output",
        "user_text",
    ]


async def test_an_approved_write_runs_once_in_a_single_attempt_step(open_env: Any) -> None:
    runs: list[str] = []

    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
    def refund_order(order_id: str, context: ToolCallContext) -> dict[str, str]:
        """Refund an order."""
        runs.append(context.idempotency_key)
        return {"refunded": order_id}

    def script(request: ModelRequest) -> ScriptedModelReply:
        return answer_with_results(request) or ScriptedModelReply(
            tool_calls=[ScriptedToolCall("refund_order", {"order_id": "42"})]
        )

    env = await open_env(
        AgentDefinition(
            name="support", instructions="", model=ScriptedModelClient(script), tools=[refund_order]
        )
    )
    await env.start("s-write", "refund 42")
    pending = await env.wait_for("s-write", lambda s: bool(s.pending_interrupts))
    interrupt = pending.pending_interrupts[0]
    assert interrupt.tool_name == "refund_order"
    assert runs == []
    assert await env.client.invoke_rpc(
        env.flow.resolve_interrupt,
        "s-write",
        ResolveInterruptInput(
            interrupt_id=interrupt.interrupt_id, approved=True, rejection_message=None
        ),
    )
    done = await env.wait_for_turns("s-write", 1)
    assert runs == [f"s-write/turn-1/{interrupt.tool_call_id}"]
    assert done.messages[-1].text == 'refund_order: {"refunded": "42"}'
    steps = await env.step_types("s-write")
    assert "CallSingleAttemptTool" in steps
    assert "CallTool" not in steps
    assert steps.index("AwaitToolApproval") < steps.index("CallSingleAttemptTool")


async def test_a_schema_mismatch_reaches_the_model_as_a_failed_call(open_env: Any) -> None:
    ran: list[int] = []

    @function_tool(effect=ToolEffect.READ)
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        ran.append(a + b)
        return a + b

    def script(request: ModelRequest) -> ScriptedModelReply:
        return answer_with_results(request) or ScriptedModelReply(
            tool_calls=[ScriptedToolCall("add", {"a": 1, "b": "two"})]
        )

    env = await open_env(
        AgentDefinition(
            name="calc", instructions="", model=ScriptedModelClient(script), tools=[add]
        )
    )
    await env.start("s-schema", "add")
    done = await env.wait_for_turns("s-schema", 1)
    assert ran == []
    tool_message = next(m for m in done.messages if m.role == "tool")
    assert tool_message.tool_output is not None
    assert tool_message.tool_output.startswith(
        "invalid arguments for tool add at b: 'two' is not of type 'integer'"
    )
    assert "RunModel" in await env.step_types("s-schema")


async def test_the_model_call_limit_ends_a_looping_turn(open_env: Any) -> None:
    @function_tool(effect=ToolEffect.READ)
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedModelClient(
        lambda request: ScriptedModelReply(tool_calls=[ScriptedToolCall("ping")])
    )
    env = await open_env(
        AgentDefinition(
            name="loop", instructions="", model=model, tools=[ping], max_model_calls_per_turn=2
        )
    )
    await env.start("s-limit", "loop forever")
    done = await env.wait_for_turns("s-limit", 1)
    assert [len(r.tools) for r in model.requests] == [1, 1, 0]
    assert done.messages[-1].role == "tool"
    assert done.messages[-1].tool_output == model_call_limit_result(2)
    assert done.state is not None
    assert done.state.last_turn_error is None


async def test_a_session_policy_wins_over_the_tools_own_approval(open_env: Any) -> None:
    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
    def reindex() -> str:
        """Rebuild the search index."""
        return "reindexed"

    def script(request: ModelRequest) -> ScriptedModelReply:
        return answer_with_results(request) or ScriptedModelReply(
            tool_calls=[ScriptedToolCall("reindex")]
        )

    env = await open_env(
        AgentDefinition(
            name="ops",
            instructions="",
            model=ScriptedModelClient(script),
            tools=[reindex],
            tool_policies={
                "reindex": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=False)
            },
        )
    )
    await env.start("s-policy", "reindex")
    done = await env.wait_for_turns("s-policy", 1)
    assert done.pending_interrupts == ()
    assert done.messages[-1].text == "reindex: reindexed"
    steps = await env.step_types("s-policy")
    assert "AwaitToolApproval" not in steps
    assert "CallTool" in steps


async def test_a_function_tool_shadowing_an_enabled_built_in_fails_the_turn_without_a_model_call(
    open_env: Any,
) -> None:
    from dex_agents import create_agent_session_flow
    from dex_agents.stepwise import StepwiseRunner

    @function_tool(effect=ToolEffect.READ)
    def ask_user(question: str) -> str:
        """Shadows the built-in."""
        return question

    model = ScriptedModelClient(lambda request: "never")
    definition = AgentDefinition(name="bad", instructions="", model=model, tools=[ask_user])
    # The built-in is enabled only in the session options, so the definition cannot see it.
    flow = create_agent_session_flow(
        StepwiseRunner(definition),
        f"StepwiseTest{next(_flow_numbers)}",
        built_in_tools=("ask_user",),
    )
    env = await open_env(flow)
    await env.start("s-reserved", "hello")
    done = await env.wait_for_turns("s-reserved", 1)
    assert done.state is not None
    assert done.state.last_turn_error is not None
    assert "tool ask_user uses the name of an enabled built-in tool" in done.state.last_turn_error
    assert len(model.requests) == 0


async def _answer(env: Env, session_id: str, interrupt_id: str, answer: str) -> bool:
    sessions = AgentSessionClient(env.client, env.flow)
    return await sessions.answer_question(session_id, interrupt_id, answer)


async def test_ask_user_and_a_function_tools_own_question(open_env: Any) -> None:
    from dex_agents.runner import ToolInputRequested

    asked: list[tuple[tuple[str, ...], str | None]] = []

    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    def deploy(service: str, context: ToolCallContext) -> object:
        """Deploy a service."""
        asked.append((context.input_answers, context.input_continuation))
        if not context.input_answers:
            return ToolInputRequested(
                question=f"Deploy {service} where?",
                choices=("staging", "production"),
                continuation="where",
            )
        return f"deployed {service} to {context.input_answers[-1]}"

    def script(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        if not results:
            return ScriptedModelReply(
                tool_calls=[
                    ScriptedToolCall("ask_user", {"question": "Which service?", "choices": None}),
                ]
            )
        if results[-1].tool_name == "ask_user":
            service = json.loads(results[-1].output)["answer"]
            return ScriptedModelReply(tool_calls=[ScriptedToolCall("deploy", {"service": service})])
        return ScriptedModelReply(text=results[-1].output)

    env = await open_env(
        AgentDefinition(
            name="ops",
            instructions="",
            model=ScriptedModelClient(script),
            tools=[deploy],
            built_in_tools=["ask_user"],
        )
    )
    await env.start("s-ask", "deploy something")
    first = await env.wait_for("s-ask", lambda s: bool(s.pending_interrupts))
    question = first.pending_interrupts[0]
    assert question.question == "Which service?"
    assert await _answer(env, "s-ask", question.interrupt_id, "billing")

    second = await env.wait_for(
        "s-ask", lambda s: any(i.question == "Deploy billing where?" for i in s.pending_interrupts)
    )
    tool_question = second.pending_interrupts[0]
    assert tool_question.choices == ("staging", "production")
    assert tool_question.interrupt_id.endswith("-input-1")
    assert await _answer(env, "s-ask", tool_question.interrupt_id, "staging")

    done = await env.wait_for_turns("s-ask", 1)
    assert done.messages[-1].text == "deployed billing to staging"
    assert asked == [((), None), (("staging",), "where")]
    steps = await env.step_types("s-ask")
    assert "AwaitQuestionAnswer" in steps
    assert "CallSingleAttemptTool" in steps
