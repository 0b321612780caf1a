"""Playing a neutral ``ModelScript`` inside a framework's scripted model, one call at a time.

Every adapter's conformance factory wraps the suite's script in its
framework's own test model, and each such model must behave the same way (see
the conformance README): pick the scripted response for the turn and its
position, stream ``text_before_gate`` and wait on the gate, fail on the
scripted attempts, and name tool calls ``call-<position>-<index>`` unless the
script names them, and record each call before it answers.
``play_scripted_model_call`` does that part, so the model only turns the chosen
``ModelTurn`` into its framework's response.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path

from dex_agents.testing._gates import FileGate
from dex_agents.testing._scripts import (
    ModelScript,
    ModelTurn,
    ToolCallSpec,
    ToolChoice,
    record_model_call,
    record_summary_call,
)

__all__ = [
    "SCRIPTED_SUMMARY_MAX_CHARACTERS",
    "ScriptedModelFailure",
    "play_scripted_model_call",
    "play_scripted_summary",
    "scripted_answer_text",
    "scripted_tool_call_id",
    "scripted_turn_number",
]

SCRIPTED_SUMMARY_MAX_CHARACTERS = 4000
"""The longest answer of a scripted summary call, about 1,000 tokens."""

TextWriter = Callable[[str], Awaitable[None] | None]
"""Where a scripted model call writes its text deltas (sync or async)."""


class ScriptedModelFailure(RuntimeError):
    """The unexpected error a scripted model call raises on its failing attempts."""

    __module__ = "dex_agents.testing"  # the public import path, as tracebacks show it


def scripted_turn_number(turn_id: str) -> int:
    """The user turn number of a session turn ID (``turn-3`` -> 3)."""
    prefix, _, number = turn_id.partition("-")
    if prefix != "turn" or not number.isdigit():
        raise ValueError(f"unexpected turn ID {turn_id!r}; expected turn-<n>")
    return int(number)


def scripted_tool_call_id(spec: ToolCallSpec, position: int, index: int) -> str:
    """The ID of scripted call ``index`` of model call ``position``: the script's, or a default."""
    return spec.tool_call_id or f"call-{position}-{index}"


async def play_scripted_model_call(
    script: ModelScript,
    state_directory: Path,
    *,
    turn_id: str,
    position: int,
    attempt: int,
    history: Sequence[str],
    tool_results: Mapping[str, str],
    write_text: TextWriter,
    model: str | None = None,
    offered_tools: Sequence[str] | None = None,
    tool_choice: ToolChoice | None = None,
) -> ModelTurn:
    """Record this model call, then give its scripted response after the gate and failure rules.

    ``history`` and ``tool_results`` are what the call read, ``model`` the scripted
    model that makes it, ``offered_tools`` and ``tool_choice`` what it was offered (see
    ``record_model_call``); the record is written first, so a call a SIGKILL
    cuts short still counts. With a gate, ``text_before_gate`` goes to
    ``write_text`` (sync or async) first, then the call waits at the gate. On
    the scripted failing attempts it raises ``ScriptedModelFailure`` (an
    unexpected error: the session retries).
    """
    if not callable(write_text):
        raise TypeError(
            "play_scripted_model_call(write_text=) is where text_before_gate goes, such as"
            " turn.events.write_text_delta"
        )
    directory = Path(state_directory)
    record_model_call(
        directory,
        turn_id=turn_id,
        position=position,
        attempt=attempt,
        history=history,
        tool_results=tool_results,
        model=model,
        offered_tools=offered_tools,
        tool_choice=tool_choice,
    )
    response = script.response_for(scripted_turn_number(turn_id), position)
    if response.gate is not None:
        if response.text_before_gate is not None:
            written = write_text(response.text_before_gate)
            if inspect.isawaitable(written):
                await written
        await FileGate(directory, response.gate).pass_through_async()
    if attempt <= response.fail_attempts:
        raise ScriptedModelFailure(
            f"scripted model call {position + 1} of {turn_id} failed on attempt {attempt}"
        )
    return response


async def play_scripted_summary(
    state_directory: Path,
    summary_gate: str | None,
    lines: Sequence[str],
    *,
    model: str | None = None,
) -> str:
    """The answer of a scripted summary call (``summarize_context``): ``summary of`` and the
    lines it was given (its first ``SCRIPTED_SUMMARY_MAX_CHARACTERS``, so a long session's
    summary stays the size of a real one), so a scenario can check what it summarized; with
    ``summary_gate`` (``ScenarioSession.summary_gate``) it waits at that gate first.

    The call is recorded first, with ``model``, the scripted model that makes it."""
    record_summary_call(Path(state_directory), model=model)
    if summary_gate is not None:
        await FileGate(Path(state_directory), summary_gate).pass_through_async()
    return ("summary of " + " | ".join(lines))[:SCRIPTED_SUMMARY_MAX_CHARACTERS]


def scripted_answer_text(
    response: ModelTurn, turn_tool_results: Callable[[], Iterable[tuple[str, str]]]
) -> str:
    """The text of a scripted final answer.

    ``response.text``, or with ``text_from_tool_results`` one ``<tool name>: <output>``
    line per result of the turn so far (``turn_tool_results()``, read only then),
    or ``(no tool results)`` when there are none.
    """
    if not callable(turn_tool_results):
        raise TypeError(
            "scripted_answer_text(response, turn_tool_results) takes a function that returns"
            " the turn's (tool name, output) pairs; it is called only for text_from_tool_results"
        )
    if not response.text_from_tool_results:
        return response.text or ""
    lines = [f"{name}: {output}" for name, output in turn_tool_results()]
    return "\n".join(lines) if lines else "(no tool results)"
