"""Small Flows, one per engine rule, run by a real pull Worker in the semantics tests."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from dex import (
    Attribute,
    AttributeLock,
    AttributeMap,
    Channel,
    ChannelMap,
    Context,
    Flow,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    WaitForFailurePolicy,
    dead_end,
    force_complete,
    force_complete_if_channels_empty,
    force_fail,
    go_to,
    go_to_many,
    graceful_complete,
    rpc,
)

from dex_local_engine import recovery_attempt_progress

ONE_ATTEMPT = RetryPolicy(maximum_attempts=1)


# Timers ----------------------------------------------------------------------------


class ZeroTimer(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(0)))

    def execute(self, context: Context, input: str) -> StepDecision:
        return go_to(LongTimer, f"zero-fired={context.has_timer_fired(0)}")


class LongTimer(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.any_of(
            Timer.by_duration(timedelta(hours=1), condition_id="hour"),
            Timer.by_duration(timedelta(hours=2), condition_id="two-hours"),
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        fired = [context.has_timer_fired(0), context.has_timer_fired(1)]
        return go_to(SlowWaitTimer, f"{input}|long-fired={fired}")


class SlowWaitTimer(Step[str]):
    """Its wait_for is slow, so a SkipTimer can arrive before the timer waits."""

    def wait_for(self, context: Context, input: str) -> Wait:
        time.sleep(0.5)
        return Wait.until(Timer.by_duration(timedelta(hours=1)))

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(f"{input}|early-skip={context.has_timer_fired(0)}")


class TimerFlow(Flow[str]):
    def __init__(self) -> None:
        self.zero = ZeroTimer()
        self.long = LongTimer()
        self.slow = SlowWaitTimer()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.zero).other_steps(self.long, self.slow)


# Attributes, waits and cancellation --------------------------------------------------


class Idle(Step[str]):
    """Waits on a Channel nobody publishes to, until canceled."""

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(ControlFlow.never.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return dead_end()


class Fanout(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        ControlFlow.status.set(context, "fanned-out")
        return go_to_many(
            StepMovement.of(Idle, "a"),
            StepMovement.of(Idle, "b"),
            StepMovement.of(Canceler, "c"),
        )


class Canceler(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(ControlFlow.cancel.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return go_to(Finisher, "after-cancel").with_canceling_steps(Idle)


class Finisher(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        ControlFlow.status.set(context, "finished")
        return dead_end()


class ControlFlow(Flow[str]):
    status = Attribute("status", str)
    cancel = Channel("cancel", str)
    never = Channel("never", str)

    def __init__(self) -> None:
        self.fanout = Fanout()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.fanout).other_steps(Idle(), Canceler(), Finisher())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.status, self.cancel, self.never)

    @rpc
    def cancel_idle(self, context: Context) -> RPCResult[str]:
        return RPCResult("ok", next_steps=(StepMovement.of(Finisher, "rpc"),)).with_canceling_steps(
            Idle
        )

    @rpc
    def trigger(self, context: Context) -> RPCResult[None]:
        self.cancel.publish(context, "go")
        return RPCResult(None)


# Failures ----------------------------------------------------------------------------


class AlwaysFails(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            execute_retry=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=2)
        ).on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, input: str) -> StepDecision:
        raise RuntimeError(f"broken {input} on attempt {context.attempt}")


class Recover(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        error = context.recovery_error
        assert error is not None
        progress = recovery_attempt_progress(context)
        return graceful_complete(
            f"input={input}|from={context.from_step_execution_id}|{error.error_type}|"
            f"{error.detail}|{progress}"
        )


class BadWaitFor(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            wait_for_retry=ONE_ATTEMPT, wait_for_failure=WaitForFailurePolicy.PROCEED
        )

    def wait_for(self, context: Context, input: str) -> Wait:
        raise ValueError("wait_for broke")

    def execute(self, context: Context, input: str) -> StepDecision:
        error = context.recovery_error
        detail = error.detail if error is not None else None
        return graceful_complete(f"failed={context.wait_for_method_failed()}|{detail}")


class FailRouter(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        if input == "route":
            return go_to(AlwaysFails, "payload")
        if input == "proceed":
            return go_to(BadWaitFor, "x")
        if input == "force-fail":
            return force_fail("the Step gave up")
        if input == "dead-end":
            return dead_end()
        if input == "unhandled":
            return go_to(Unhandled, "x")
        if input == "override":
            # The movement's options replace the Step's own: two wait_for attempts,
            # then execute, where the Step alone would fail the Flow after one.
            override = StepOptions(
                wait_for_retry=RetryPolicy(maximum_attempts=2),
                wait_for_failure=WaitForFailurePolicy.PROCEED,
            )
            return go_to_many(StepMovement.of(StrictWaitFor, "x", options=override))
        return force_complete("forced")


class StrictWaitFor(Step[str]):
    """On its own: one wait_for attempt, and a failed wait_for fails the Flow."""

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            wait_for_retry=ONE_ATTEMPT, wait_for_failure=WaitForFailurePolicy.FAIL_FLOW
        )

    def wait_for(self, context: Context, input: str) -> Wait:
        raise ValueError(f"wait_for broke on attempt {context.attempt}")

    def execute(self, context: Context, input: str) -> StepDecision:
        error = context.recovery_error
        detail = error.detail if error is not None else None
        return graceful_complete(f"failed={context.wait_for_method_failed()}|{detail}")


class Unhandled(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=ONE_ATTEMPT)

    def execute(self, context: Context, input: str) -> StepDecision:
        raise KeyError("nope")


class FailureFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(FailRouter()).other_steps(
            AlwaysFails(), Recover(), BadWaitFor(), Unhandled(), StrictWaitFor()
        )


# Never reaching a Worker -------------------------------------------------------------


class Hog(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        # SYNC: an RPC waits for the Flow's running ASYNC methods, not for SYNC ones.
        return StepOptions(execute_durability=StepDurability.SYNC)

    def execute(self, context: Context, input: str) -> StepDecision:
        time.sleep(3)
        return dead_end()


class Starved(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            execute_method_timeout=timedelta(seconds=1), execute_retry=ONE_ATTEMPT
        ).on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, input: str) -> StepDecision:
        return force_fail("Starved should never run")


class StarveStart(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return go_to(Hog, "h")


class StarveFlow(Flow[str]):
    """Run by a Worker with one Step slot: Starved times out before any Worker takes it."""

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(StarveStart()).other_steps(Hog(), Starved(), Recover())

    @rpc
    def starve(self, context: Context) -> RPCResult[None]:
        # RPCs run in the Worker's reserved slot while Hog holds the Step slot.
        return RPCResult(None, next_steps=(StepMovement.of(Starved, "s"),))


# Method and heartbeat timeouts ---------------------------------------------------------


class Sleeper(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            execute_method_timeout=timedelta(seconds=1), execute_retry=ONE_ATTEMPT
        ).on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, input: str) -> StepDecision:
        for _ in range(100):
            if context.is_cancellation_requested():
                break
            time.sleep(0.05)
        TimeoutFlow.saw_cancel.append(context.is_cancellation_requested())
        return dead_end()


class SilentStep(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        return StepOptions(
            heartbeat_timeout=timedelta(seconds=1), execute_retry=ONE_ATTEMPT
        ).on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, input: str) -> StepDecision:
        for _ in range(60):
            if context.is_cancellation_requested():
                break
            time.sleep(0.05)
        return dead_end()


class TimeoutStart(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return go_to(Sleeper if input == "method" else SilentStep, input)


class TimeoutFlow(Flow[str]):
    saw_cancel: list[bool] = []  # noqa: RUF012 - filled by the in-process Worker

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(TimeoutStart()).other_steps(Sleeper(), SilentStep(), Recover())


# Channels, maps, locks ---------------------------------------------------------------


class Drain(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(QueueFlow.jobs.for_range(at_least=1, at_most=2))

    def execute(self, context: Context, input: str) -> StepDecision:
        taken = list(QueueFlow.jobs.results(context))
        QueueFlow.seen.set(context, (QueueFlow.seen.get(context) or "") + ",".join(taken) + ";")
        return force_complete_if_channels_empty(
            QueueFlow.seen.get(context), StepMovement.of(Drain, input), QueueFlow.jobs
        )


class MapWait(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.all_of(QueueFlow.mailbox.for_one(input), QueueFlow.mailbox.for_one("other"))

    def execute(self, context: Context, input: str) -> StepDecision:
        mine = list(QueueFlow.mailbox.results(context, input))
        other = list(QueueFlow.mailbox.results(context, "other"))
        QueueFlow.boxes.set(context, input, f"{mine}+{other}")
        return dead_end()


class QueueStart(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        if input == "hold":  # nothing consumes the jobs Channel
            return dead_end()
        return go_to_many(StepMovement.of(Drain, input), StepMovement.of(MapWait, "mine"))


class QueueFlow(Flow[str]):
    jobs = Channel("jobs", str)
    seen = Attribute("seen", str)
    mailbox = ChannelMap("mailbox", str)
    boxes = AttributeMap("boxes", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(QueueStart()).other_steps(Drain(), MapWait())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.jobs, self.seen, self.mailbox, self.boxes)

    @rpc
    def publish(self, context: Context, jobs: list[str]) -> RPCResult[None]:
        for job in jobs:
            self.jobs.publish(context, job)
        return RPCResult(None)

    @rpc
    def mail(self, context: Context, box: str) -> RPCResult[None]:
        self.mailbox.publish(context, box, f"to-{box}")
        return RPCResult(None)

    @rpc(load_channels=[jobs])
    def pending(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult([m.value for m in self.jobs.pending_messages(context)])

    @rpc(load_channels=[jobs], is_transactional=True)
    def take_first(self, context: Context, also_missing: bool) -> RPCResult[str]:
        messages = self.jobs.pending_messages(context)
        self.jobs.delete(context, messages[0].message_id)
        if also_missing:
            self.jobs.delete(context, "no-such-message")
        return RPCResult(messages[0].value)


class Locker(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        # SYNC, so RPCs do not wait for it (they wait for ASYNC methods) and can conflict.
        return StepOptions(
            execute_lock_attributes=(AttributeLock(LockFlow.guarded),),
            execute_durability=StepDurability.SYNC,
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        LockFlow.guarded.set(context, (LockFlow.guarded.get(context) or "") + f"[{input}")
        time.sleep(0.6)
        LockFlow.guarded.set(context, (LockFlow.guarded.get(context) or "") + f"{input}]")
        return dead_end()


class LockStart(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return go_to_many(StepMovement.of(Locker, "a"), StepMovement.of(Locker, "b"))


class LockFlow(Flow[str]):
    guarded = Attribute("guarded", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(LockStart()).other_steps(Locker())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.guarded)

    @rpc(lock_attributes=[AttributeLock(guarded)])
    def touch(self, context: Context) -> RPCResult[str]:
        return RPCResult(self.guarded.get(context) or "")

    @rpc
    def read(self, context: Context) -> RPCResult[str]:
        return RPCResult(self.guarded.get(context) or "")


ALL_FLOWS: list[type[Flow[Any]]] = []


def flows() -> list[Flow[Any]]:
    return [kind() for kind in ALL_FLOWS] + [
        TimerFlow(),
        ControlFlow(),
        FailureFlow(),
        StarveFlow(),
        TimeoutFlow(),
        QueueFlow(),
        LockFlow(),
    ]


# Canceling a running Step ------------------------------------------------------------


class Blocker(Step[str]):
    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_method_timeout=timedelta(seconds=15))

    def execute(self, context: Context, input: str) -> StepDecision:
        RunningCancelFlow.events.append("blocker-started")
        for _ in range(60):
            if context.is_cancellation_requested():
                RunningCancelFlow.events.append("blocker-saw-cancel")
                break
            time.sleep(0.05)
        RunningCancelFlow.late.set(context, "late")
        RunningCancelFlow.events.append("blocker-returned")
        return force_fail("a canceled Step's decision was applied")


class Winner(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=1)))

    def execute(self, context: Context, input: str) -> StepDecision:
        return go_to(Final, "final").with_canceling_steps(Blocker)


class Final(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(input)


class RaceStart(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return go_to_many(StepMovement.of(Blocker, "b"), StepMovement.of(Winner, "w"))


class RunningCancelFlow(Flow[str]):
    late = Attribute("late", str)
    events: list[str] = []  # noqa: RUF012 - filled by the in-process Worker

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(RaceStart()).other_steps(Blocker(), Winner(), Final())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.late)


ALL_FLOWS.append(RunningCancelFlow)


# Flow timeouts -----------------------------------------------------------------------


class Forever(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(TimeoutHandlerFlow.never.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return dead_end()


class TimeoutHandlerFlow(Flow[str]):
    never = Channel("never", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Forever())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.never)

    def handle_timeout(self, context: Context) -> StepDecision:
        return force_complete(f"expired:{context.step_execution_id}")


ALL_FLOWS.append(TimeoutHandlerFlow)
