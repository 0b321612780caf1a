"""In-memory state of Flows and Step executions, and its JSON form for SQLite.

The engine keeps every running Flow in memory, owned by one event loop, and writes
each change through to SQLite. Protobuf messages are stored as base64 of their
serialized bytes inside small JSON documents; Attributes, Channel messages and
history events get their own rows so a change rewrites only what changed.
"""

from __future__ import annotations

import base64
import json
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar, cast

from dex.dexpb import dex_pb2 as pb
from google.protobuf.message import Message

M = TypeVar("M", bound=Message)


def encode_message(message: Message) -> str:
    """A protobuf message as base64 text for JSON rows."""
    return base64.b64encode(message.SerializeToString()).decode("ascii")


def decode_message(kind: type[M], text: str) -> M:
    """A protobuf message from ``encode_message`` text."""
    message = kind()
    message.ParseFromString(base64.b64decode(text))
    return message


class Phase(StrEnum):
    """Where a Step execution is in its life."""

    WAIT_FOR_LOCK = "wait_for_lock"  # waiting for its wait_for Attribute locks
    WAIT_FOR = "wait_for"  # the wait_for method is scheduled, running or backing off
    WAITING = "waiting"  # waiting for its Timer and Channel condition
    EXECUTE_LOCK = "execute_lock"  # waiting for its execute Attribute locks
    EXECUTE = "execute"  # the execute method is scheduled, running or backing off
    COMPLETED = "completed"  # execute returned a decision
    FAILED = "failed"  # a method failed for good
    CANCELED = "canceled"  # canceled by a decision, an RPC, or the Flow closing


ENDED_PHASES = frozenset({Phase.COMPLETED, Phase.FAILED, Phase.CANCELED})
METHOD_PHASES = frozenset({Phase.WAIT_FOR, Phase.EXECUTE})


@dataclass
class MethodState:
    """Attempts of the method (wait_for or execute) a Step execution is in."""

    attempt: int = 1
    first_attempt_at: float = 0.0
    checkpoint: pb.Value | None = None
    retry_at: float | None = None  # set while backing off before the next attempt
    running: bool = False  # the current attempt reached a Worker and has not reported
    started_attempts: int = 0  # attempts that reached a Worker, for recovery errors
    last_error: pb.WorkerErrorResponse | None = None

    def to_json(self) -> dict[str, Any]:
        """The row data."""
        return {
            "attempt": self.attempt,
            "first": self.first_attempt_at,
            "checkpoint": None if self.checkpoint is None else encode_message(self.checkpoint),
            "retry_at": self.retry_at,
            "running": self.running,
            "started": self.started_attempts,
            "error": None if self.last_error is None else encode_message(self.last_error),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MethodState:
        """Rebuild from the row data."""
        checkpoint = data.get("checkpoint")
        error = data.get("error")
        return cls(
            attempt=int(data["attempt"]),
            first_attempt_at=float(data["first"]),
            checkpoint=None if checkpoint is None else decode_message(pb.Value, checkpoint),
            retry_at=data.get("retry_at"),
            running=bool(data.get("running", False)),
            started_attempts=int(data.get("started", 0)),
            last_error=None if error is None else decode_message(pb.WorkerErrorResponse, error),
        )


@dataclass
class StepExec:
    """One Step execution: ``<StepType>-<n>``."""

    sid: str
    step_type: str
    number: int
    from_id: str
    step_input: pb.Value
    options: pb.StepOptions
    recovery: pb.RecoveryErrorInfo | None
    order: int  # creation order within the Flow; waits and locks are served in this order
    phase: Phase = Phase.WAIT_FOR_LOCK
    method: MethodState = field(default_factory=MethodState)
    locals: dict[str, pb.Value] = field(default_factory=dict[str, pb.Value])
    condition: pb.WaitingCondition | None = None
    wait_started: float = 0.0
    skipped_timers: set[int] = field(default_factory=lambda: set())
    results: pb.ConditionResults | None = None
    wait_for_failed: bool = False

    @property
    def ended(self) -> bool:
        """Whether the Step execution has ended."""
        return self.phase in ENDED_PHASES

    def to_json(self) -> str:
        """The row data."""
        data: dict[str, Any] = {
            "sid": self.sid,
            "type": self.step_type,
            "n": self.number,
            "from": self.from_id,
            "phase": self.phase.value,
            "order": self.order,
        }
        if not self.ended:
            data.update(
                {
                    "input": encode_message(self.step_input),
                    "options": encode_message(self.options),
                    "recovery": None if self.recovery is None else encode_message(self.recovery),
                    "method": self.method.to_json(),
                    "locals": {k: encode_message(v) for k, v in self.locals.items()},
                    "condition": None if self.condition is None else encode_message(self.condition),
                    "wait_started": self.wait_started,
                    "skipped": sorted(self.skipped_timers),
                    "results": None if self.results is None else encode_message(self.results),
                    "wait_for_failed": self.wait_for_failed,
                }
            )
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> StepExec:
        """Rebuild from the row data."""
        data = json.loads(text)
        step = cls(
            sid=data["sid"],
            step_type=data["type"],
            number=int(data["n"]),
            from_id=data["from"],
            step_input=pb.Value(),
            options=pb.StepOptions(),
            recovery=None,
            order=int(data["order"]),
            phase=Phase(data["phase"]),
        )
        if step.ended:
            return step
        step.step_input = decode_message(pb.Value, data["input"])
        step.options = decode_message(pb.StepOptions, data["options"])
        if data.get("recovery") is not None:
            step.recovery = decode_message(pb.RecoveryErrorInfo, data["recovery"])
        step.method = MethodState.from_json(data["method"])
        step.locals = {k: decode_message(pb.Value, v) for k, v in data["locals"].items()}
        if data.get("condition") is not None:
            step.condition = decode_message(pb.WaitingCondition, data["condition"])
        step.wait_started = float(data["wait_started"])
        step.skipped_timers = {int(i) for i in data["skipped"]}
        if data.get("results") is not None:
            step.results = decode_message(pb.ConditionResults, data["results"])
        step.wait_for_failed = bool(data["wait_for_failed"])
        return step


@dataclass
class ChannelMsg:
    """One Channel message: sequence number, Channel, ID and value."""

    seq: int
    channel: str
    message_id: str
    value: pb.Value


@dataclass
class StaleSkip:
    """A SkipTimer for a Step execution that was not waiting yet."""

    sid: str
    condition_id: str
    index: int | None


@dataclass
class Flow:
    """The latest run of one Flow ID."""

    flow_id: str
    run_id: str
    flow_type: str
    request_id: str
    start_time: float
    config: pb.FlowConfig
    status: int = pb.FLOW_STATUS_RUNNING
    close_time: float = 0.0
    error_type: int = pb.FLOW_ERROR_TYPE_UNSPECIFIED
    error_message: str = ""
    timeout_seconds: int = 0
    timeout_policy: int = pb.FLOW_TIMEOUT_POLICY_UNSPECIFIED
    graceful: bool = False
    parent: str = ""  # a SubFlow's parent: "<Flow ID>\n<Step execution ID>"
    counters: dict[str, int] = field(default_factory=dict[str, int])
    outputs: list[pb.StepCompletionOutput] = field(default_factory=list[pb.StepCompletionOutput])
    stale_skips: list[StaleSkip] = field(default_factory=list[StaleSkip])
    next_seq: int = 1  # Channel message sequence
    next_event_id: int = 1
    next_order: int = 1
    # Rows kept in their own tables:
    attributes: dict[str, pb.Value] = field(default_factory=dict[str, pb.Value])
    channels: dict[str, deque[ChannelMsg]] = field(default_factory=dict[str, deque[ChannelMsg]])
    inflight: dict[str, list[ChannelMsg]] = field(default_factory=dict[str, list[ChannelMsg]])
    steps: dict[str, StepExec] = field(default_factory=dict[str, StepExec])  # active only
    ended_steps: dict[str, Phase] = field(default_factory=dict[str, Phase])

    @property
    def running(self) -> bool:
        """Whether the run is still running."""
        return self.status == pb.FLOW_STATUS_RUNNING

    @property
    def is_pull(self) -> bool:
        """Whether pull Workers serve the Flow."""
        return self.config.worker_target.is_pull_mode

    @property
    def worker_address(self) -> str:
        """The listening Worker's address."""
        return self.config.worker_target.address or "localhost:8803"

    def channel_size(self, name: str) -> int:
        """Unconsumed messages in a Channel."""
        queue = self.channels.get(name)
        return 0 if queue is None else len(queue)

    def meta_json(self) -> str:
        """The Flow row's meta column."""
        return json.dumps(
            {
                "request_id": self.request_id,
                "start": self.start_time,
                "close": self.close_time,
                "error_type": self.error_type,
                "error_message": self.error_message,
                "config": encode_message(self.config),
                "timeout": self.timeout_seconds,
                "timeout_policy": self.timeout_policy,
                "graceful": self.graceful,
                "parent": self.parent,
                "counters": self.counters,
                "outputs": [encode_message(o) for o in self.outputs],
                "stale_skips": [[s.sid, s.condition_id, s.index] for s in self.stale_skips],
                "next_seq": self.next_seq,
                "next_event_id": self.next_event_id,
                "next_order": self.next_order,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_row(cls, flow_id: str, run_id: str, flow_type: str, status: int, meta: str) -> Flow:
        """Rebuild a Flow from its row."""
        data = json.loads(meta)
        return cls(
            flow_id=flow_id,
            run_id=run_id,
            flow_type=flow_type,
            request_id=data["request_id"],
            start_time=float(data["start"]),
            config=decode_message(pb.FlowConfig, data["config"]),
            status=status,
            close_time=float(data["close"]),
            error_type=int(data["error_type"]),
            error_message=data["error_message"],
            timeout_seconds=int(data["timeout"]),
            timeout_policy=int(data["timeout_policy"]),
            graceful=bool(data["graceful"]),
            parent=str(data.get("parent", "")),
            counters={str(k): int(v) for k, v in data["counters"].items()},
            outputs=[decode_message(pb.StepCompletionOutput, o) for o in data["outputs"]],
            stale_skips=[StaleSkip(s[0], s[1], s[2]) for s in data["stale_skips"]],
            next_seq=int(data["next_seq"]),
            next_event_id=int(data["next_event_id"]),
            next_order=int(data["next_order"]),
        )


def flow_result(flow: Flow) -> pb.FlowResult:
    """The result WaitForFlow returns for a closed Flow."""
    return pb.FlowResult(
        flow_status=cast(pb.FlowStatus, flow.status),
        results=flow.outputs,
        error_type=cast(pb.FlowErrorType, flow.error_type),
        error_message=flow.error_message,
    )
