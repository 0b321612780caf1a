"""What the machine hands to Workers: tasks, and the commands the Workers layer runs.

A transition never calls the Workers layer (``dex_local_engine._workers``), which sits
above the machine. It builds a :class:`Task` and queues a :class:`WorkerCommand` on the
engine state (``EngineState.command``); the Workers layer runs the queued commands, in
the order they were queued, when the transition's block ends and before its commit
(outside any transition, at once). The Workers layer reports back through the task's
callbacks: each one is a transition of its own, entered from above.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from dex.dexpb import dex_pb2 as pb

TaskKind = Literal["wait_for", "execute", "rpc"]
Payload = pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | pb.InvokeWorkerRPCRequest

_ids = itertools.count(1)


class FrameSink(Protocol):
    """Where frames to the Worker running a task go (a pull stream)."""

    def send(self, frame: pb.PollWorkerTaskResponse) -> None:
        """Queue a frame for the Worker."""
        ...


@dataclass(eq=False)
class Task:
    """One attempt of a Step method, or one RPC, waiting for or running on a Worker."""

    flow_id: str
    flow_type: str
    kind: TaskKind
    payload: Payload
    deadline: float | None  # wall-clock seconds handed to the Worker as the task deadline
    on_assigned: Callable[[Task], None]
    on_frame: Callable[[Task, pb.PollWorkerTaskFrame], None]
    on_lost: Callable[[Task, bool, str], None]  # (task, reached a Worker, why)
    push_address: str | None = None
    task_id: str = field(default_factory=lambda: f"t{next(_ids)}")
    stream: FrameSink | None = None
    started: bool = False
    done: bool = False  # the engine no longer waits for this task
    frames: int = 0
    push_call: asyncio.Task[None] | None = None
    unknown_to: set[str] = field(default_factory=set[str])  # app_worker_ids that rejected the name
    undeliverable: bool = False  # too large for any Worker: retrying would build the same task


WorkerAction = Literal["submit", "cancel", "abandon"]


@dataclass(frozen=True)
class WorkerCommand:
    """A queued instruction for the Workers layer.

    ``submit`` hands the task to a Worker now or queues it until one is free;
    ``cancel`` stops waiting for it and tells a running one to stop; ``abandon`` stops
    waiting for it but lets a running one finish (its result is dropped).
    """

    action: WorkerAction
    task: Task


class WorkerPort(Protocol):
    """The Workers layer as the machine sees it: something that runs its commands."""

    def apply(self, command: WorkerCommand) -> None:
        """Run one queued command."""
        ...
