"""The adapters' own share of a Step, measured by calling the runner code directly.

- **Tool Step**: CPU of one Pydantic AI tool Step through ``ToolManager`` (what the
  runner does) against the agent run it falls back to, interleaved call by call.
- **History per model Step**: each adapter's history decoding of a 200-turn
  conversation (800 stored items, fresh strings as a Step's Attribute load gives
  them) with a cold decode cache (every item decoded, the cost before the caches)
  and a warm one (every later Step of a Worker).
- **Pydantic AI turn, framework work only**: CPU of one turn (two model requests, one
  tool call) as the runner does it in a session, two model Steps' agent runs and the
  tool Step (``RunnerDriver``: no engine, no Worker), against one ``agent.run`` over the
  same history, interleaved turn by turn. The session's own cost is what
  ``agent_turns.py`` adds on top of this.

Usage::

    uv run python benchmarks/adapter_steps.py [--turns 200] [--calls 300] [--session-turns 60]

Nothing here asserts a time; it measures and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from dex_agents import AgentMessage
from dex_agents.runner import DecodeCache
from dex_agents.values import FrameworkMessage


def _fresh(framework_messages: Sequence[FrameworkMessage]) -> list[AgentMessage]:
    """Stored messages whose items are new, equal strings (as a Step's load gives them)."""
    stored: list[AgentMessage] = []
    for message in framework_messages:
        copied = FrameworkMessage(
            role=message.role,
            framework_item=json.loads(json.dumps(message.framework_item)),
            text=message.text,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            tool_arguments=message.tool_arguments,
            tool_output=message.tool_output,
        )
        stored.append(
            AgentMessage.from_framework_message(copied, sequence=len(stored) + 1, turn_id="t")
        )
    return stored


def _cold_and_warm(
    name: str,
    decode: Callable[[list[AgentMessage]], object],
    cache: DecodeCache[Any],
    messages: list[AgentMessage],
) -> None:
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(15):
        cache.clear()
        started = time.process_time()
        decode(messages)
        cold.append(time.process_time() - started)
        started = time.process_time()
        decode(messages)
        warm.append(time.process_time() - started)
    cold_ms = statistics.median(cold) * 1000
    warm_ms = statistics.median(warm) * 1000
    print(
        f"{name:14s} {len(messages)} items: every item decoded {cold_ms:6.2f} ms,"
        f" cached {warm_ms:6.2f} ms"
    )


def history_per_model_step(turns: int) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )

    from dex_agents_claude_sdk import messages as claude
    from dex_agents_langgraph import messages as langgraph
    from dex_agents_openai_agents import items as openai_agents
    from dex_agents_pydantic_ai import messages as pydantic_ai

    stored: list[FrameworkMessage] = []
    for turn in range(turns):
        stored.append(langgraph.framework_message_of(HumanMessage(content=f"where is {turn}?")))
        call = {"name": "lookup_order", "args": {"order_id": str(turn)}, "id": f"c{turn}"}
        stored += langgraph.framework_messages_of(
            AIMessage(content="", id=f"run-{turn}a", tool_calls=[{**call, "type": "tool_call"}])
        )
        stored.append(
            langgraph.framework_message_of(
                ToolMessage(content=f"order {turn} shipped", tool_call_id=f"c{turn}")
            )
        )
        stored += langgraph.framework_messages_of(
            AIMessage(content=f"Order {turn} shipped.", id=f"run-{turn}b")
        )
    _cold_and_warm(
        "LangGraph",
        langgraph.stored_messages,
        langgraph._DECODED_MESSAGES,  # pyright: ignore[reportPrivateUsage]
        _fresh(stored),
    )

    stored = []
    for turn in range(turns):
        names = {f"c{turn}": "lookup_order"}
        for item in [
            openai_agents.user_input_item(f"where is {turn}?"),
            {
                "type": "function_call",
                "call_id": f"c{turn}",
                "name": "lookup_order",
                "arguments": json.dumps({"order_id": str(turn)}),
                "id": f"fc_{turn}",
            },
            {"type": "function_call_output", "call_id": f"c{turn}", "output": f"order {turn}"},
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{turn}",
                "content": [{"type": "output_text", "text": f"Order {turn} shipped."}],
            },
        ]:
            stored.append(openai_agents.framework_message_of(item, names))
    _cold_and_warm(
        "OpenAI Agents",
        openai_agents.replay_items,
        openai_agents._DECODED_ITEMS,  # pyright: ignore[reportPrivateUsage]
        _fresh(stored),
    )

    stored = []
    for turn in range(turns):
        stored.append(claude.user_message(f"where is {turn}?"))
        use: dict[str, Any] = {"type": "tool_use", "id": f"c{turn}", "name": "lookup_order"}
        stored += claude.assistant_messages([use])
        result = {"type": "tool_result", "tool_use_id": f"c{turn}", "content": f"order {turn}"}
        stored.append(
            FrameworkMessage(
                role="tool",
                framework_item=json.dumps({"role": "user", "content": [result]}),
                tool_call_id=f"c{turn}",
                tool_name="lookup_order",
                tool_output=f"order {turn}",
            )
        )
        stored += claude.assistant_messages([{"type": "text", "text": f"Order {turn}."}])
    _cold_and_warm(
        "Claude",
        lambda messages: claude.request_messages(claude.stored_items(messages)),
        claude._DECODED_ITEMS,  # pyright: ignore[reportPrivateUsage]
        _fresh(stored),
    )

    stored = []
    for turn in range(turns):
        call = ToolCallPart("lookup_order", {"order_id": str(turn)}, tool_call_id=f"c{turn}")
        stored.append(pydantic_ai.user_prompt_message(f"where is {turn}?"))
        stored += pydantic_ai.project_message(ModelResponse(parts=[call]))
        stored += pydantic_ai.project_message(
            ModelRequest(parts=[ToolReturnPart("lookup_order", "shipped", tool_call_id=f"c{turn}")])
        )
        stored += pydantic_ai.project_message(ModelResponse(parts=[TextPart(f"Order {turn}.")]))
    _cold_and_warm(
        "Pydantic AI",
        pydantic_ai.decode_history,
        pydantic_ai._DECODED_ITEMS,  # pyright: ignore[reportPrivateUsage]
        _fresh(stored),
    )


async def pydantic_ai_tool_step(calls: int) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from dex_agents.testing import RunnerDriver
    from dex_agents_pydantic_ai import IDEMPOTENCY_KEY_METADATA_KEY, PydanticAIRunner

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": "42"}, "c1")])

    agent = Agent(FunctionModel(respond))

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Look up an order."""
        return f"order {order_id} shipped"

    runner = PydanticAIRunner(agent)
    driver = RunnerDriver(runner)
    driver.start_turn("where is 42?")
    await driver.run_model()
    execution = driver.execution(driver.record("c1"))
    call = ToolCallPart("lookup_order", execution.tool_call.arguments, tool_call_id="c1")
    metadata = {IDEMPOTENCY_KEY_METADATA_KEY: execution.idempotency_key}
    direct: list[float] = []
    agent_run: list[float] = []
    for index in range(calls + 30):  # the first 30 of each warm up
        started = time.process_time()
        await runner.execute_deferred_tool_call(execution)
        middle = time.process_time()
        await runner._run_tool_in_agent_run(call, None, execution, metadata)  # pyright: ignore[reportPrivateUsage]
        if index >= 30:
            direct.append(middle - started)
            agent_run.append(time.process_time() - middle)
    print(
        f"Pydantic AI tool Step CPU, mean of {calls}: ToolManager"
        f" {statistics.fmean(direct) * 1000:.2f} ms, agent run"
        f" {statistics.fmean(agent_run) * 1000:.2f} ms"
    )


async def pydantic_ai_turn_framework_work(turns: int) -> None:
    from agent_turns import pydantic_ai_agent
    from pydantic_ai.messages import ModelMessage

    from dex_agents.runner import TurnCompleted
    from dex_agents.testing import RunnerDriver
    from dex_agents_pydantic_ai import PydanticAIRunner

    agent = pydantic_ai_agent("framework-work")
    driver = RunnerDriver(PydanticAIRunner(agent))
    history: list[ModelMessage] = []
    plain: list[float] = []
    steps: list[float] = []
    for number in range(turns):
        started = time.process_time()
        history = (await agent.run(f"question {number}", message_history=history)).all_messages()
        middle = time.process_time()
        driver.start_turn(f"question {number}")
        outcome = await driver.run_model()
        while not isinstance(outcome, TurnCompleted):
            await driver.run_tools()
            outcome = await driver.run_model()
        plain.append(middle - started)
        steps.append(time.process_time() - middle)
    # The first and the last 20 turns (one window when there are 20 or fewer).
    for first, last in dict.fromkeys(((0, min(20, turns)), (max(0, turns - 20), turns))):
        one_run = statistics.median(plain[first:last]) * 1000
        two_runs = statistics.median(steps[first:last]) * 1000
        print(
            f"Pydantic AI turn, framework work, turns {first + 1}-{last} (median CPU):"
            f" one agent.run {one_run:.2f} ms, two model Steps and the tool Step"
            f" {two_runs:.2f} ms ({two_runs / one_run:.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="The adapters' own share of a Step.")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--session-turns", type=int, default=60)
    arguments = parser.parse_args()
    asyncio.run(pydantic_ai_tool_step(arguments.calls))
    asyncio.run(pydantic_ai_turn_framework_work(arguments.session_turns))
    history_per_model_step(arguments.turns)


if __name__ == "__main__":
    main()
