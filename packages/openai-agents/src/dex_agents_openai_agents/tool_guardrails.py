"""A function tool's own input and output guardrails, run in the tool Step around its body.

In the SDK a tripwire ends the whole run; in a session it ends only the call,
which records ``failed`` with a message the model sees (retrying would trip it
again). ``reject_content`` before the body means the body never runs, so the
call fails with the guardrail's message; after the body the call did run, so
the guardrail's message replaces the output, as the SDK does.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, FunctionTool
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolInputGuardrailData, ToolOutputGuardrailData

from dex_agents import ToolExecutionError

__all__ = ["check_tool_input", "check_tool_output"]


async def check_tool_input(
    tool: FunctionTool, context: ToolContext[Any], agent: Agent[Any]
) -> None:
    """Run the tool's input guardrails; raise ``ToolExecutionError`` when one stops the call."""
    for guardrail in tool.tool_input_guardrails or ():
        verdict = await guardrail.run(ToolInputGuardrailData(context=context, agent=agent))
        behavior = verdict.behavior
        if behavior["type"] == "raise_exception":
            raise ToolExecutionError(
                f"the tool input guardrail {guardrail.get_name()!r} stopped this call"
            )
        if behavior["type"] == "reject_content":
            raise ToolExecutionError(behavior["message"])


async def check_tool_output(
    tool: FunctionTool, context: ToolContext[Any], agent: Agent[Any], output: Any
) -> Any:
    """Run the tool's output guardrails; the output the model should see."""
    for guardrail in tool.tool_output_guardrails or ():
        verdict = await guardrail.run(
            ToolOutputGuardrailData(context=context, agent=agent, output=output)
        )
        behavior = verdict.behavior
        if behavior["type"] == "raise_exception":
            raise ToolExecutionError(
                f"the tool output guardrail {guardrail.get_name()!r} withheld this call's"
                " output; the tool did run"
            )
        if behavior["type"] == "reject_content":
            return behavior["message"]
    return output
