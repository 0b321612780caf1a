"""CommittedReads: a model Step's earlier reads of stored messages, by run."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dex
import pytest

from dex_agents import AgentHost, create_agent_session_flow
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.session._committed_reads import CommittedReads
from dex_agents.values import FrameworkMessage, empty_agent_usage


@dataclass(frozen=True)
class _Run:
    """The two identifiers a cache entry belongs to, as a Dex Context carries them."""

    flow_id: str
    run_id: str


def test_a_key_read_before_in_the_run_is_not_read_again() -> None:
    reads = CommittedReads()
    loaded: list[str] = []

    def load(key: str) -> str:
        loaded.append(key)
        return f"value of {key}"

    run = _Run("session-1", "run-1")
    first = reads.read(run, "window", ["1", "2"], load)
    again = reads.read(run, "window", ["1", "2", "3"], load)

    assert first == {"1": "value of 1", "2": "value of 2"}
    assert again == {"1": "value of 1", "2": "value of 2", "3": "value of 3"}
    assert loaded == ["1", "2", "3"]


def test_runs_kinds_and_forgotten_keys_are_kept_apart() -> None:
    reads = CommittedReads()
    loaded: list[tuple[str, str]] = []

    def loader(source: str) -> Callable[[str], str]:
        def load(key: str) -> str:
            loaded.append((source, key))
            return f"{source}:{key}"

        return load

    old, new = _Run("session-1", "run-1"), _Run("session-1", "run-2")
    reads.read(old, "window", ["1"], loader("old"))
    # A reset's new run reads its own values under the same keys.
    assert reads.read(new, "window", ["1"], loader("new")) == {"1": "new:1"}
    # A chunk and a window instance under one key are different values.
    assert reads.read(old, "chunk", ["1"], loader("chunk")) == {"1": "chunk:1"}
    # A key that left the window (rolled over) is forgotten, so a read after it loads.
    reads.read(old, "window", ["2"], loader("old"))
    assert reads.read(old, "window", ["1"], loader("again")) == {"1": "again:1"}
    assert reads.read(old, "chunk", ["1"], loader("unused")) == {"1": "chunk:1"}
    assert ("unused", "1") not in loaded


def test_a_deleted_key_is_left_out_and_the_oldest_runs_go_first() -> None:
    reads = CommittedReads(max_runs=2)

    def load(key: str) -> str:
        if key == "gone":
            raise KeyError(key)
        return key

    for number in range(3):
        run = _Run("session", f"run-{number}")
        assert reads.read(run, "chunk", ["a", "gone"], load) == {"a": "a"}
    assert len(reads) == 2
    with pytest.raises(ValueError, match="max_runs must be a positive integer"):
        CommittedReads(max_runs=0)


class _CountingRunner:
    """Answers each model call with a new text and records the texts the call was given."""

    def __init__(self) -> None:
        self.calls = 0
        self.inputs: list[list[str | None]] = []

    def build_user_message(self, text: str) -> FrameworkMessage:
        return _message(text, "user")

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted:
        self.calls += 1
        self.inputs.append([message.text for message in turn.messages])
        return TurnCompleted([_message(f"reply {self.calls}", "assistant")], empty_agent_usage())

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        raise AssertionError(f"this agent has no tools, yet {call.tool_call.tool_name} ran")


def _message(text: str, role: str) -> FrameworkMessage:
    return FrameworkMessage(role=role, framework_item=json.dumps({"text": text}), text=text)  # type: ignore[arg-type]


async def test_a_reset_run_reads_its_own_messages_under_the_old_sequences(
    tmp_path: Path,
) -> None:
    """Time travel back to the first model Step: the new run stores another reply under
    sequence 2, and the next model Step is given that one, not the old run's. (One
    Worker forgets the old run's later keys at the new run's first read; the run ID in
    the key is what keeps two Workers apart, proven above.)"""
    runner = _CountingRunner()
    flow = create_agent_session_flow(runner, "CommittedReadsAgent")
    async with AgentHost([flow], database=tmp_path / "engine.sqlite") as host:
        sessions = host.client(flow)
        await sessions.start_session("reset-me", "hello")
        await sessions.wait_for_turn("reset-me", 1)
        await sessions.send_user_message_and_wait("reset-me", "second")
        assert runner.inputs == [["hello"], ["hello", "reply 1", "second"]]

        await host.dex_client.time_travel(
            "reset-me",
            dex.TimeTravelOptions(
                type=dex.TimeTravelType.STEP_EXECUTION_ID,
                step_execution_id="RunModel-1",
                step_method=dex.TimeTravelStepMethod.EXECUTE,
                skip_writes_reapply=True,
            ),
        )
        await sessions.wait_for_turn("reset-me", 1)
        await sessions.send_user_message_and_wait("reset-me", "third")

    assert runner.inputs[2:] == [["hello"], ["hello", "reply 3", "third"]]
