"""Handing a Step method attempt to the Workers: its task, its method timeout.

The attempt's task goes out as a queued ``submit`` command (see ``work``); what the
Worker reports, and the method timeout, come back as transitions of their own
(``EngineState.on_attempt_*``, handled by ``tasks``).
"""

from __future__ import annotations

import asyncio
import time

from dex_local_engine._machine.state import Attempt, EngineState
from dex_local_engine._machine.work import Task
from dex_local_engine._rules import worker_requests
from dex_local_engine._rules.constants import DEFAULT_METHOD_TIMEOUT_SECONDS
from dex_local_engine._rules.model import Flow, Phase, StepExec


def dispatch_attempt(engine: EngineState, flow: Flow, step: StepExec) -> None:
    """Hand the Step's current method attempt to the Workers, with its timeout.

    The task is built now, from the Flow's state at this point of the transition; the
    Workers layer gets it when the transition block ends."""
    is_wait_for = step.phase is Phase.WAIT_FOR
    options = step.options
    timeout = (
        options.wait_for_timeout_seconds if is_wait_for else options.execute_timeout_seconds
    ) or DEFAULT_METHOD_TIMEOUT_SECONDS
    payload = (
        worker_requests.wait_for_request(flow, step)
        if is_wait_for
        else worker_requests.execute_request(flow, step)
    )
    task = Task(
        flow_id=flow.flow_id,
        flow_type=flow.flow_type,
        kind="wait_for" if is_wait_for else "execute",
        payload=payload,
        deadline=time.time() + timeout,
        on_assigned=engine.on_attempt_assigned,
        on_frame=engine.on_attempt_frame,
        on_lost=engine.on_attempt_lost,
        push_address=None if flow.is_pull else flow.worker_address,
    )
    attempt = Attempt(flow, step, task)
    attempt.method_timer = asyncio.get_running_loop().call_later(
        timeout, engine.on_method_timeout, attempt, timeout
    )
    engine.attempts[(flow.flow_id, step.sid)] = attempt
    engine.command("submit", task)
