"""The scripted demo model: a deterministic stand-in for a real model.

It reads the request like a model would (the last user message and the tool
results of this turn) and exercises every kind of tool: reads, a refund that
needs approval, a question to the user, and a durable wait. Deterministic,
because a crashed ``RunModel`` asks it again and must get the same answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dex_agents.models._scripted import ScriptedModelReply, ScriptedToolCall
from dex_agents.models._types import ModelRequest, ToolResultItem, UserTextItem

__all__ = ["DEMO_HELP", "demo_model_reply"]

DEMO_HELP = (
    "I am the scripted demo model (no API key needed). Try: 'list my orders', "
    "'where is order 43', 'refund order 42', 'help me choose', 'wait 5 seconds', "
    "or '/plan check order 43'. With --mcp-config: 'mcp tools' or "
    '\'mcp <server>__<tool> {"argument": "value"}\'.'
)
_APPROVED_PLAN = "[Dex] The user approved plan revision"
_PLAN_TASK = re.compile(r"^- \[(pending|in_progress|completed)\] (.+)$", re.MULTILINE)

_ORDER_ID = re.compile(r"\b(\d{1,6})\b")
_SECONDS = re.compile(r"(\d{1,5})\s*(s|sec|secs|second|seconds|m|min|mins|minute|minutes)?\b")


def _turn_view(request: ModelRequest) -> tuple[str, list[ToolResultItem]]:
    """The last user text, and this turn's tool results in order."""
    last_user = ""
    results: list[ToolResultItem] = []
    for item in request.items:
        if isinstance(item, UserTextItem):
            last_user = item.text
            results = []
        elif isinstance(item, ToolResultItem):
            results.append(item)
    return last_user, results


def _json(text: str) -> dict[str, Any] | None:
    try:
        value: Any = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None  # pyright: ignore[reportUnknownVariableType]


def demo_model_reply(request: ModelRequest) -> ScriptedModelReply:
    text, results = _turn_view(request)
    lowered = text.lower()
    order = _ORDER_ID.search(lowered)
    order_id = order.group(1) if order else "42"

    if [tool.name for tool in request.tools] == ["write_todos"]:
        return _plan(order_id, results)
    if text.startswith(_APPROVED_PLAN):
        return _execute_plan(request, results)

    if lowered.startswith("mcp "):
        return _mcp(request, text, results)
    if "refund" in lowered:
        return _refund(order_id, results)
    if "wait" in lowered or "remind" in lowered:
        return _wait(lowered, results)
    if "choose" in lowered or "ask me" in lowered or "question" in lowered:
        return _question(results)
    if "list" in lowered or "my orders" in lowered:
        if not results:
            return ScriptedModelReply(
                text="Let me fetch your orders.", tool_calls=[ScriptedToolCall("list_orders")]
            )
        orders = _json(results[-1].output) or {}
        lines = [
            f"- order {key}: {value['item']}, {value['status']}" for key, value in orders.items()
        ]
        return ScriptedModelReply(text="Your orders:\n" + "\n".join(lines))
    if "order" in lowered or "where" in lowered:
        if not results:
            return ScriptedModelReply(
                text=f"Looking up order {order_id}.",
                reasoning="The user asks about one order, so I read it first.",
                tool_calls=[ScriptedToolCall("lookup_order", {"order_id": order_id})],
            )
        found = _json(results[-1].output)
        if found is None:
            return ScriptedModelReply(text=f"I could not find it: {results[-1].output}")
        return ScriptedModelReply(
            text=f"Order {order_id} ({found['item']}) is {found['status']}; "
            f"it cost {found['total_eur']:.2f} EUR."
        )
    return ScriptedModelReply(text=DEMO_HELP)


def _mcp(request: ModelRequest, text: str, results: list[ToolResultItem]) -> ScriptedModelReply:
    """``mcp tools`` names the MCP tools offered; ``mcp <tool> <JSON>`` calls one."""
    if results:
        return ScriptedModelReply(text=f"{results[-1].tool_name} said: {results[-1].output}")
    offered = [tool.name for tool in request.tools if "__" in tool.name or tool.name[:4] == "mcp_"]
    _, _, rest = text.partition(" ")
    name, _, arguments = rest.strip().partition(" ")
    if name == "tools" or name not in offered:
        listed = ", ".join(offered) or "none (start the demo with --mcp-config FILE)"
        return ScriptedModelReply(text=f"MCP tools offered: {listed}.")
    return ScriptedModelReply(
        text=f"Calling {name}.",
        tool_calls=[ScriptedToolCall(name, _json(arguments) or {})],
    )


def _refund(order_id: str, results: list[ToolResultItem]) -> ScriptedModelReply:
    if not results:
        return ScriptedModelReply(
            text=f"First I check order {order_id}.",
            reasoning="A refund is a write: read the order before asking to refund it.",
            tool_calls=[ScriptedToolCall("lookup_order", {"order_id": order_id})],
        )
    last = results[-1]
    if last.tool_name == "lookup_order":
        found = _json(last.output)
        if found is None:
            return ScriptedModelReply(text=f"I cannot refund it: {last.output}")
        return ScriptedModelReply(
            text=f"Order {order_id} cost {found['total_eur']:.2f} EUR. "
            "I will refund it in full once you approve.",
            tool_calls=[
                ScriptedToolCall(
                    "refund_order", {"order_id": order_id, "reason": "customer request"}
                )
            ],
        )
    refund = _json(last.output)
    if refund is None:
        return ScriptedModelReply(text=f"The refund was not made: {last.output}")
    return ScriptedModelReply(
        text=f"Refunded {refund['amount_eur']:.2f} EUR for order {order_id} "
        f"(refund {refund['refund_id']})."
    )


def _wait(lowered: str, results: list[ToolResultItem]) -> ScriptedModelReply:
    if results:
        outcome = _json(results[-1].output)
        if outcome is not None and outcome.get("status") == "completed":
            return ScriptedModelReply(
                text=f"I waited {outcome['waited_seconds']} seconds on a durable timer. "
                "Time to check again!"
            )
        return ScriptedModelReply(text=f"The wait ended early: {results[-1].output}")
    match = _SECONDS.search(lowered)
    seconds = int(match.group(1)) if match else 5
    if match and (match.group(2) or "").startswith("m"):
        seconds *= 60
    seconds = max(1, seconds)
    return ScriptedModelReply(
        text=f"I will wait {seconds} seconds. The timer is durable: stop the demo and "
        "resume the session, and it still fires.",
        tool_calls=[
            ScriptedToolCall(
                "durable_wait", {"duration_seconds": seconds, "reason": "the user asked to wait"}
            )
        ],
    )


def _question(results: list[ToolResultItem]) -> ScriptedModelReply:
    if not results:
        return ScriptedModelReply(
            text="Let me ask you.",
            tool_calls=[
                ScriptedToolCall(
                    "ask_user",
                    {
                        "question": "Which coffee do you like best?",
                        "choices": ["espresso", "filter", "cold brew"],
                        "allows_free_text": True,
                    },
                )
            ],
        )
    answer = _json(results[-1].output)
    if answer is not None and answer.get("status") == "answered":
        return ScriptedModelReply(text=f"Good choice: {answer['answer']}.")
    return ScriptedModelReply(text=f"No answer, then ({results[-1].output}).")


def _plan(order_id: str, results: list[ToolResultItem]) -> ScriptedModelReply:
    """A planning turn: write a draft, then hand it to the user for review."""
    if not results:
        tasks = [f"Look up order {order_id}", "Tell you what I found"]
        return ScriptedModelReply(
            text="Here is how I would go about it.",
            tool_calls=[
                ScriptedToolCall(
                    "write_todos",
                    {"todos": [{"content": task, "status": "pending"} for task in tasks]},
                )
            ],
        )
    return ScriptedModelReply(text="That is my plan; nothing has run yet.")


def _execute_plan(request: ModelRequest, results: list[ToolResultItem]) -> ScriptedModelReply:
    """An executing turn: do the plan's lookup, then mark every task completed."""
    tasks = _plan_tasks(request)
    order = next((_ORDER_ID.search(task) for task in tasks if _ORDER_ID.search(task)), None)
    if not results and order is not None:
        return ScriptedModelReply(
            text="Working through the plan.",
            tool_calls=[ScriptedToolCall("lookup_order", {"order_id": order.group(1)})],
        )
    if not results or results[-1].tool_name != "write_todos":
        found = _json(results[-1].output) if results else None
        summary = f"{found['item']} is {found['status']}" if found else "nothing to look up"
        return ScriptedModelReply(
            text=f"Done: {summary}.",
            tool_calls=[
                ScriptedToolCall(
                    "write_todos",
                    {"todos": [{"content": task, "status": "completed"} for task in tasks]},
                )
            ],
        )
    return ScriptedModelReply(text="Every task of the plan is done.")


def _plan_tasks(request: ModelRequest) -> list[str]:
    """The tasks of the plan note the session shows before the turn's messages."""
    for item in request.items:
        if isinstance(item, UserTextItem) and item.text.startswith("[Dex] Plan"):
            return [match.group(2) for match in _PLAN_TASK.finditer(item.text)]
    return []
