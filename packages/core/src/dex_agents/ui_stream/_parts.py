"""The pure mapping from ``AgentEvent`` values to AI SDK UI message stream parts.

``UIPartMapper`` holds only JSON data, so its state rides in the UI resume token
and a reconnect rebuilds it exactly. Tool details (arguments, results) come from
committed records that the caller looks up; events carry only IDs and statuses.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal, cast

from dex_agents._values import AgentEvent, AgentToolCallStatus, to_wire
from dex_agents.ui_stream._snapshots import assistant_message_id, parse_tool_input

__all__ = [
    "FinishReason",
    "ToolDetails",
    "UIPartMapper",
    "resume_token_part",
    "tool_outcome_part",
]

FinishReason = Literal["stop", "error", "tool-calls", "other"]
"""The ``finishReason`` of a UI message stream's ``finish`` part."""

_MODEL_TEXT = {"text_delta": "text", "reasoning_delta": "reasoning"}
_TOOL_EVENTS = frozenset({"tool_call_deferred", "tool_call_finished", "interrupt_raised"})
_TURN_EVENTS = frozenset(
    {"turn_started", "turn_completed", "turn_failed", "turn_steered", "turn_cancelled"}
)


@dataclass(frozen=True)
class ToolDetails:
    """What a tool part shows, read from the call's record or stored messages."""

    tool_name: str
    arguments: str | None
    status: AgentToolCallStatus | None = None
    output: str | None = None
    error: str | None = None


def resume_token_part(token: str) -> dict[str, Any]:
    return {"type": "data-agent-resume-token", "data": token, "transient": True}


def _empty_state(turn_id: str) -> dict[str, Any]:
    return {
        "turn": turn_id,
        "started": False,
        "step": None,  # [step_execution_id, attempt] of the RunModel text being shown
        "step_open": False,
        "text": None,
        "reasoning": None,
        "n": 0,
        "tool_steps": [],
        "tools": [],
        "approvals": [],
        "done": [],
        "ended": False,
    }


class UIPartMapper:
    """Turns one turn's events into parts of its assistant message."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    @classmethod
    def for_turn(cls, turn_id: str) -> UIPartMapper:
        return cls(_empty_state(turn_id))

    @classmethod
    def continuing(
        cls, turn_id: str, known_tool_call_ids: list[str], open_approval_ids: list[str]
    ) -> UIPartMapper:
        """For a stream that adds to a message the browser already holds."""
        state = _empty_state(turn_id)
        state["started"] = True
        state["tools"] = list(known_tool_call_ids)
        state["approvals"] = list(open_approval_ids)
        return cls(state)

    @classmethod
    def restore(cls, state: dict[str, Any]) -> UIPartMapper:
        base = _empty_state(str(state.get("turn", "")))
        base.update(state)
        return cls(base)

    def copy_state(self) -> dict[str, Any]:
        return copy.deepcopy(self.state)

    @property
    def turn_id(self) -> str:
        return cast("str", self.state["turn"])

    @property
    def awaits_approval_answers(self) -> bool:
        """Whether approvals were requested in this stream and not yet answered."""
        return bool(self.state["approvals"])

    @property
    def ended(self) -> bool:
        return bool(self.state["ended"])

    # --- parts -------------------------------------------------------------------------

    def map(self, event: AgentEvent, tool: ToolDetails | None = None) -> list[dict[str, Any]]:
        """The parts of ``event``; the turn's end parts come from ``finish``."""
        parts = self._start()
        payload = _payload(event)
        kind = event.type
        if kind == "tool_call_started":
            self._add_unique("tool_steps", event.step_execution_id)
        if kind in _MODEL_TEXT and event.step_execution_id not in self.state["tool_steps"]:
            text = payload.get("text")
            if isinstance(text, str) and text:
                parts += self._text(_MODEL_TEXT[kind], event, text)
            return parts
        if kind in _TURN_EVENTS:
            return parts  # the caller adds the end parts once the end committed
        if kind in _TOOL_EVENTS or kind == "interrupt_resolved":
            mapped = self._tool(kind, payload, tool)
            if mapped is not None:
                return parts + mapped
        return [*parts, {"type": "data-agent-event", "data": to_wire(event), "transient": True}]

    def finish(self, reason: FinishReason, error: str | None = None) -> list[dict[str, Any]]:
        """Close open parts and the step, then ``finish``; ``error`` adds an error part first."""
        parts = self._start() + self._close_step()
        if error is not None:
            parts.append({"type": "error", "errorText": error})
        parts.append({"type": "finish", "finishReason": reason})
        self.state["ended"] = True
        return parts

    def _start(self) -> list[dict[str, Any]]:
        if self.state["started"]:
            return []
        self.state["started"] = True
        return [{"type": "start", "messageId": assistant_message_id(self.turn_id)}]

    def _text(self, kind: str, event: AgentEvent, text: str) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        step = [event.step_execution_id, event.attempt]
        current = self.state["step"]
        if current != step:
            if current is not None and current[0] == step[0] and self.state["step_open"]:
                # A new attempt of the same Step execution: drop the partial one.
                parts.append({"type": "reset-step"})
                self.state["text"] = self.state["reasoning"] = None
            else:
                parts += self._close_step()
                parts.append({"type": "start-step"})
            self.state["step"] = step
            self.state["step_open"] = True
        elif not self.state["step_open"]:
            parts.append({"type": "start-step"})
            self.state["step_open"] = True
        other = "reasoning" if kind == "text" else "text"
        parts += self._end(other)
        if self.state[kind] is None:
            self.state["n"] += 1
            self.state[kind] = f"{kind}-{self.state['n']}"
            parts.append({"type": f"{kind}-start", "id": self.state[kind]})
        parts.append({"type": f"{kind}-delta", "id": self.state[kind], "delta": text})
        return parts

    def _end(self, kind: str) -> list[dict[str, Any]]:
        identifier = self.state[kind]
        if identifier is None:
            return []
        self.state[kind] = None
        return [{"type": f"{kind}-end", "id": identifier}]

    def _close_step(self) -> list[dict[str, Any]]:
        parts = self._end("text") + self._end("reasoning")
        if self.state["step_open"]:
            parts.append({"type": "finish-step"})
            self.state["step_open"] = False
        return parts

    def _tool(
        self, kind: str, payload: dict[str, Any], tool: ToolDetails | None
    ) -> list[dict[str, Any]] | None:
        call_id = payload.get("tool_call_id") or payload.get("interrupt_id")
        if not isinstance(call_id, str):
            return None
        if kind == "interrupt_raised" and payload.get("kind") != "approval":
            return None  # questions are not tool approvals: a data-agent-event
        if kind == "interrupt_resolved" and payload.get("kind") != "approval":
            return None
        parts = self._end("text") + self._end("reasoning")
        if kind == "tool_call_deferred" or call_id not in self.state["tools"]:
            if tool is None and kind != "tool_call_deferred":
                return None
            name = tool.tool_name if tool is not None else str(payload.get("tool_name", ""))
            arguments = tool.arguments if tool is not None else None
            if call_id not in self.state["tools"]:
                self.state["tools"].append(call_id)
                parts.append(
                    {
                        "type": "tool-input-available",
                        "toolCallId": call_id,
                        "toolName": name,
                        "input": parse_tool_input(arguments),
                        "dynamic": True,
                    }
                )
            if kind == "tool_call_deferred":
                return parts
        if kind == "interrupt_raised":
            self._add_unique("approvals", call_id)
            parts.append(
                {
                    "type": "tool-approval-request",
                    "approvalId": str(payload.get("interrupt_id", call_id)),
                    "toolCallId": call_id,
                }
            )
            return parts
        if kind == "interrupt_resolved":
            approval_id = str(payload.get("interrupt_id", call_id))
            self._remove("approvals", approval_id)
            response: dict[str, Any] = {
                "type": "tool-approval-response",
                "approvalId": approval_id,
                "approved": bool(payload.get("approved")),
            }
            reason = payload.get("rejection_message")
            if isinstance(reason, str) and reason:
                response["reason"] = reason
            return [*parts, response]
        self._remove("approvals", call_id)
        self._add_unique("done", call_id)
        status = _status(payload.get("status"))
        return [*parts, tool_outcome_part(call_id, status, tool)]

    def settle(self, finished: list[tuple[str, ToolDetails]]) -> list[dict[str, Any]]:
        """Outcome parts of finished calls whose events were not read yet.

        Used before finishing for approvals, so every other call of the step shows
        its result and the browser can send the approval answers.
        """
        parts: list[dict[str, Any]] = []
        for call_id, tool in finished:
            if call_id in self.state["done"]:
                continue
            event = {"tool_call_id": call_id, "status": tool.status.value if tool.status else None}
            parts += self._tool("tool_call_finished", event, tool) or []
        return parts

    def _add_unique(self, key: str, value: str) -> None:
        values = cast("list[str]", self.state[key])
        if value not in values:
            values.append(value)

    def _remove(self, key: str, value: str) -> None:
        values = cast("list[str]", self.state[key])
        if value in values:
            values.remove(value)


def tool_outcome_part(
    call_id: str, status: AgentToolCallStatus | None, tool: ToolDetails | None
) -> dict[str, Any]:
    """The part of a finished call: output, error, or denial."""
    if status is AgentToolCallStatus.REJECTED:
        return {"type": "tool-output-denied", "toolCallId": call_id}
    if status is AgentToolCallStatus.SUCCEEDED:
        output = tool.output if tool is not None and tool.output is not None else ""
        return {
            "type": "tool-output-available",
            "toolCallId": call_id,
            "output": output,
            "dynamic": True,
        }
    error = tool.error if tool is not None and tool.error else None
    return {
        "type": "tool-output-error",
        "toolCallId": call_id,
        "errorText": error or (status.value if status is not None else "failed"),
        "dynamic": True,
    }


def _status(value: object) -> AgentToolCallStatus | None:
    try:
        return AgentToolCallStatus(str(value))
    except ValueError:
        return None


def _payload(event: AgentEvent) -> dict[str, Any]:
    try:
        data = event.payload_data()
    except ValueError:
        return {}
    return cast("dict[str, Any]", data) if isinstance(data, dict) else {}
