"""``RespondingModel``: every call answered from its input, however many calls come."""

from __future__ import annotations

from agents import Agent, RunConfig, Runner
from agents.testing import ModelCall, ModelStep, assistant_message

from dex_agents_openai_agents.testing import RespondingModel


def echo(call: ModelCall) -> ModelStep:
    texts = [item["content"] for item in call.input if item.get("role") == "user"]
    return ModelStep(output=[assistant_message(f"echo: {texts[-1]}")])


async def test_every_call_is_answered_by_reply_with_no_queue_to_run_out() -> None:
    agent = Agent(name="echo", model=RespondingModel(echo))
    config = RunConfig(tracing_disabled=True)
    for text in [f"message {n}" for n in range(12)]:  # more calls than any queued script
        result = await Runner.run(agent, text, run_config=config)
        assert result.final_output == f"echo: {text}"
    streamed = Runner.run_streamed(agent, "streamed", run_config=config)
    async for _ in streamed.stream_events():
        pass
    assert streamed.final_output == "echo: streamed"
