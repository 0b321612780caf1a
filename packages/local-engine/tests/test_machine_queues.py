"""The machine's queues: Worker commands run when a transition block ends, before the
commit, in the order they were queued; a Flow due to continue as new moves at commit.

These drive the machine directly (a real ``Engine`` over a real SQLite file) with a
Workers layer that records what it is asked, instead of a dispatcher and Workers.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine.engine import Engine
from dex_local_engine._machine.work import WorkerCommand
from dex_local_engine._store.store import Store


class RecordingWorkers:
    """A Workers layer that takes every task at once, and notes what it saw."""

    def __init__(self, engine: Engine, database: Path) -> None:
        self.engine = engine
        self.database = database
        self.seen: list[tuple[str, str, bool]] = []  # (action, kind, Flow row committed)

    def apply(self, command: WorkerCommand) -> None:
        with sqlite3.connect(self.database) as reader:
            committed = reader.execute(
                "SELECT count(*) FROM flows WHERE flow_id = ?", (command.task.flow_id,)
            ).fetchone()[0]
        self.seen.append((command.action, command.task.kind, bool(committed)))
        if command.action == "submit":
            command.task.started = True
            command.task.on_assigned(command.task)  # as the dispatcher does, at once


def engine_at(tmp_path: Path) -> tuple[Engine, RecordingWorkers]:
    database = tmp_path / "engine.db"
    engine = Engine(Store(database))
    workers = RecordingWorkers(engine, database)
    engine.workers = workers
    return engine, workers


def start_request(flow_id: str, **config: int) -> pb.StartFlowRequest:
    return pb.StartFlowRequest(
        flow_id=flow_id,
        flow_type="QueueFlow",
        start_step_type="First",
        step_options=pb.StepOptions(skip_wait_for=True, heartbeat_timeout_seconds=30),
        flow_start_options=pb.FlowStartOptions(
            flow_config_override=pb.FlowConfig(
                worker_target=pb.WorkerTarget(is_pull_mode=True), **config
            )
        ),
    )


async def test_a_task_reaches_the_workers_inside_its_transition_before_the_commit(
    tmp_path: Path,
) -> None:
    engine, workers = engine_at(tmp_path)
    engine.start_flow(start_request("queued"))
    assert workers.seen == [("submit", "execute", False)]
    step = engine.flows["queued"].steps["First-1"]
    # The Worker took the task during the drain, in a transition nested in the same
    # commit: the stored Step says it runs.
    assert step.method.running
    row = engine.store.steps("queued")[0]
    assert '"running":true' in row
    await engine.close()
    engine.store.close()


async def test_commands_run_in_the_order_their_transitions_queued_them(tmp_path: Path) -> None:
    engine, workers = engine_at(tmp_path)
    engine.start_flow(start_request("first"))
    engine.start_flow(start_request("second"))
    # Stopping cancels the running attempt (it has a heartbeat timeout, so the Worker
    # is told); the cancel runs when the stop's transition ends.
    engine.stop_flow(pb.StopFlowRequest(flow_id="first", stop_type=pb.STOP_TYPE_CANCEL))
    assert [(action, committed) for action, _, committed in workers.seen] == [
        ("submit", False),
        ("submit", False),
        ("cancel", True),
    ]
    await engine.close()
    engine.store.close()


async def test_a_command_outside_a_transition_runs_at_once(tmp_path: Path) -> None:
    engine, workers = engine_at(tmp_path)
    engine.start_flow(start_request("outside"))
    task = engine.attempts[("outside", "First-1")].task
    engine.command("abandon", task)
    assert workers.seen[-1] == ("abandon", "execute", True)
    await engine.close()
    engine.store.close()


async def test_a_run_that_reaches_its_threshold_continues_as_new_at_commit(
    tmp_path: Path,
) -> None:
    engine, _ = engine_at(tmp_path)
    engine.start_flow(start_request("long", continue_as_new_threshold=1))
    flow = engine.flows["long"]
    first_run = flow.run_id
    with engine.tx():
        engine.record(flow, pb.FlowHistoryEvent(channel_external_publish={}))
        assert flow.run_id == first_run  # queued, not yet moved
    assert flow.run_id != first_run
    assert engine.continue_due == {}
    history = [pb.FlowHistoryEvent.FromString(data) for data in engine.store.events("long", 1, 10)]
    assert [event.WhichOneof("payload") for event in history] == ["flow_started_or_continued"]
    assert history[0].flow_started_or_continued.continued_start.previous_run_id == first_run
    await engine.close()
    engine.store.close()
