"""The ``mock/dex`` model: a deterministic command model that drives every feature
without a key.

It is a ``ScriptedModelClient`` script, so it answers from the request alone and a
rerun ``RunModel`` gets the same answer. Commands (the last user message):

- plain text: ``Local demo response: <text>``
- ``/wait <seconds> <reason>``: a ``durable_wait`` call
- ``/tool <name> <json-object>``: calls any offered tool by name
- ``/ask <question>``: an ``ask_user`` question with free text
- ``/choose <prompt> | <choice> | <choice>...``: a question with choices
- ``/ask-many <prompt>``: a question and a durable wait in one reply
- in plan mode, any text: a two-task plan with ``write_todos``; ``/plan-clear`` clears it,
  and ``/plan-stop ...`` makes execution stop once, after its first task
- executing an approved plan: one task moves forward per model call; a plan made from
  ``/ask <question>`` asks it (``ask_user``) before its first task completes
- ``/slow <label>``: a long reply streamed over a few seconds (to try Stop on)
- ``/markdown``: a reply in markdown (a heading, a list, a link, a code block)
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, cast

from dex_agents.models import (
    ModelRequest,
    ModelResponse,
    ModelStreamSink,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolResultItem,
    UserTextItem,
)

DEX_NOTE = "[Dex]"
PLAN_NOTE = "[Dex] Plan"
PLAN_TASK = re.compile(r"^- \[(pending|in_progress|completed)\] (.*)$")
PLAN_STOP = "/plan-stop"
ASK = "/ask "
EXECUTION_TEXT = "[Dex] The user approved plan revision"
STREAM_CHUNK = 12
SLOW = "/slow"
SLOW_PAUSE_SECONDS = 0.15
MARKDOWN_REPLY = """## A reply in markdown

- **bold** and *emphasis*, `inline code`
- a [link](https://example.com/docs)

```python
print("hello from a code block")
```
"""


class MockModelClient(ScriptedModelClient):
    """The scripted mock; a ``/slow`` reply streams its text with a pause per piece."""

    async def generate(self, request: ModelRequest, stream: ModelStreamSink) -> ModelResponse:
        if _last_user_text(request).startswith(SLOW):
            return await super().generate(request, _PacedSink(stream))
        return await super().generate(request, stream)


class _PacedSink:
    def __init__(self, inner: ModelStreamSink) -> None:
        self._inner = inner

    async def text_delta(self, text: str) -> None:
        await self._inner.text_delta(text)
        await asyncio.sleep(SLOW_PAUSE_SECONDS)

    async def reasoning_delta(self, text: str) -> None:
        await self._inner.reasoning_delta(text)


def create_mock_model() -> ScriptedModelClient:
    """A fresh ``mock/dex`` client."""
    return MockModelClient(mock_reply, stream_chunk_size=STREAM_CHUNK)


def mock_reply(request: ModelRequest) -> ScriptedModelReply:
    offered = {tool.name for tool in request.tools}
    plan_note = _plan_note(request)
    results = ScriptedModelClient.tool_results(request)
    if plan_note is not None and "execution:" in plan_note.splitlines()[0]:
        return _execute_plan(
            plan_note,
            _result_this_turn(request, "ask_user"),
            _result_this_turn(request, "write_todos"),
        )
    if results:
        return _after_tool_results(results)
    text = _last_user_text(request)
    if offered == {"write_todos"}:
        return _plan(text)
    return _command(text, offered)


def _plan(text: str) -> ScriptedModelReply:
    if text.startswith("/tool"):
        name = text.split()[1] if len(text.split()) > 1 else ""
        return ScriptedModelReply(text=_disabled(name))
    if text.startswith("/plan-clear"):
        return ScriptedModelReply(tool_calls=[_write_todos([])])
    tasks = [
        {"content": f"Complete the objective: {text}", "status": "pending"},
        {"content": "Verify and report the result", "status": "pending"},
    ]
    return ScriptedModelReply(
        text="I will prepare a plan for review.", tool_calls=[_write_todos(tasks)]
    )


def _execute_plan(plan_note: str, asked: bool, moved: bool) -> ScriptedModelReply:
    # The note is rebuilt for every model call, so it shows what the last write_todos stored.
    tasks = [
        {"content": match.group(2), "status": match.group(1)}
        for line in plan_note.splitlines()
        if (match := PLAN_TASK.match(line))
    ]
    unfinished = [task for task in tasks if task["status"] != "completed"]
    if not unfinished:
        return ScriptedModelReply(text="I completed the approved plan.")
    # A stopping plan stops right after its first task; Continue plan then finishes it.
    stops = moved and len(tasks) > 1 and tasks[1]["status"] == "pending"
    stops = stops and tasks[0]["content"].startswith(f"Complete the objective: {PLAN_STOP}")
    if stops and tasks[0]["status"] == "completed":
        return ScriptedModelReply(text="I stopped before completing every plan task.")
    task = unfinished[0]
    question = task["content"].removeprefix(f"Complete the objective: {ASK}").strip()
    if task["status"] == "in_progress" and question != task["content"].strip() and not asked:
        # A plan made from "/ask <question>" needs the user's answer before it goes on.
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("ask_user", {"question": question})])
    task["status"] = "in_progress" if task["status"] == "pending" else "completed"
    return ScriptedModelReply(tool_calls=[_write_todos(tasks)])


def _after_tool_results(results: list[ToolResultItem]) -> ScriptedModelReply:
    if all(result.tool_name == "write_todos" for result in results):
        cleared = any('"status":"cleared"' in result.output for result in results)
        return ScriptedModelReply(
            text="I cleared the plan." if cleared else "The plan is ready for review."
        )
    content = "\n".join(result.output for result in results if result.tool_name != "write_todos")
    return ScriptedModelReply(text=f"The tool finished with this result: {content}")


def _command(text: str, offered: set[str]) -> ScriptedModelReply:
    command, _, rest = text.partition(" ")
    rest = rest.strip()
    if command == "/wait":
        seconds_text, _, reason = rest.partition(" ")
        seconds = int(seconds_text) if seconds_text.isdigit() else 5
        arguments = {"duration_seconds": seconds, "reason": reason.strip() or "demo"}
        return _call(offered, "durable_wait", arguments, "I will wait durably.")
    if command == "/tool":
        name, _, raw = rest.partition(" ")
        return _call(offered, name, _json_object(raw), "")
    if command == "/ask":
        return _call(
            offered,
            "ask_user",
            {"question": rest or "What should I do next?"},
            "I need more information before I continue.",
        )
    if command == "/choose":
        prompt, *choices = [part.strip() for part in rest.split("|")]
        arguments = {"question": prompt, "choices": choices, "allows_free_text": False}
        return _call(offered, "ask_user", arguments, "")
    if command == "/ask-many":
        return ScriptedModelReply(
            text="I need more information before I continue.",
            tool_calls=[
                ScriptedToolCall("ask_user", {"question": rest or "What next?"}),
                ScriptedToolCall("durable_wait", {"duration_seconds": 30, "reason": rest}),
            ],
        )
    if command == SLOW:
        words = " ".join(f"word{number}" for number in range(1, 31))
        return ScriptedModelReply(text=f"Slow reply {rest}: {words}")
    if command == "/markdown":
        return ScriptedModelReply(text=MARKDOWN_REPLY)
    return ScriptedModelReply(text=f"Local demo response: {text}")


def _call(offered: set[str], name: str, arguments: dict[str, Any], text: str) -> ScriptedModelReply:
    if name not in offered:
        return ScriptedModelReply(text=_disabled(name))
    return ScriptedModelReply(text=text, tool_calls=[ScriptedToolCall(name, arguments)])


def _disabled(name: str) -> str:
    status = {"status": "failed", "error": "unknown_or_disabled_tool", "tool": name}
    return json.dumps(status)


def _write_todos(tasks: list[dict[str, str]]) -> ScriptedToolCall:
    return ScriptedToolCall("write_todos", {"todos": tasks})


def _json_object(raw: str) -> dict[str, Any]:
    try:
        value: Any = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def _result_this_turn(request: ModelRequest, tool_name: str) -> bool:
    """Whether a result of ``tool_name`` follows the turn's plan-execution message."""
    found = False
    for item in request.items:
        if isinstance(item, UserTextItem) and item.text.startswith(EXECUTION_TEXT):
            found = False
        elif isinstance(item, ToolResultItem) and item.tool_name == tool_name:
            found = True
    return found


def _plan_note(request: ModelRequest) -> str | None:
    for item in request.items:
        if isinstance(item, UserTextItem) and item.text.startswith(PLAN_NOTE):
            return item.text
    return None


def _last_user_text(request: ModelRequest) -> str:
    for item in reversed(request.items):
        if isinstance(item, UserTextItem) and not item.text.startswith(DEX_NOTE):
            return item.text.strip()
    return ""
