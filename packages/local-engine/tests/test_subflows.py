"""SubFlows through the real SDK: start, wait, results, ANY snapshots, reuse policies."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import subflow_app as app
from conftest import RunningFlows, running_flows
from dex import (
    Client,
    FlowNotFoundError,
    FlowStatus,
    StepExecutionId,
    TimerId,
    TimeTravelOptions,
    TimeTravelStepMethod,
    TimeTravelType,
)

from dex_local_engine import LocalEngine


def _output(running: RunningFlows, flow_id: str) -> str:
    return running.client.wait_for_flow(flow_id).single_output(str)


def _running_run(running: RunningFlows, flow_id: str, other_than: str = "") -> str:
    """Poll until a run other than ``other_than`` runs (no API waits for a start)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            info = running.client.describe_flow(flow_id)
        except FlowNotFoundError:
            info = None
        is_running = info is not None and info.status is FlowStatus.RUNNING
        if info is not None and is_running and info.run_id != other_than:
            return info.run_id
        time.sleep(0.02)
    raise AssertionError(f"{flow_id} has no new running run")


@pytest.fixture
def apps(engine: LocalEngine, cache_dir: str) -> Iterator[RunningFlows]:
    with running_flows(app.flows(), engine.address, cache_dir) as running:
        yield running


def _skip_park(client: Client, flow_id: str) -> None:
    client.skip_timer(flow_id, StepExecutionId("Parked", 1), TimerId(condition_id="park"))


def test_one_child_gives_its_id_status_and_output(apps: RunningFlows) -> None:
    apps.client.start_flow(apps.flow(app.OneParent), "one", 3)
    assert _output(apps, "one") == "SubFlow:one-RunOne-1-0|COMPLETED|6"
    child = apps.client.describe_flow("SubFlow:one-RunOne-1-0")
    assert child.status is FlowStatus.COMPLETED
    assert child.flow_type == "Child"


def test_all_of_waits_for_both_children_in_condition_order(apps: RunningFlows) -> None:
    apps.client.start_flow(apps.flow(app.BothParent), "both", 4)
    assert _output(apps, "both") == (
        "SubFlow:both-RunBoth-1-0|COMPLETED|8;SubFlow:both-RunBoth-1-1|COMPLETED|10"
    )


def test_any_of_reports_a_running_child_that_outlives_the_parent(apps: RunningFlows) -> None:
    apps.client.start_flow(apps.flow(app.BothParent), "any", -1)
    child_id = "SubFlow:any-RunBoth-1-0"
    assert _output(apps, "any") == f"{child_id}|RUNNING|-"
    assert apps.client.describe_flow(child_id).status is FlowStatus.RUNNING
    apps.client.stop_flow(child_id)
    assert apps.client.wait_for_flow(child_id).status is FlowStatus.CANCELED


def test_default_reuse_restarts_a_failed_child_and_keeps_a_completed_one(
    apps: RunningFlows,
) -> None:
    parent = apps.flow(app.OneParent)
    child_id = "SubFlow:reuse-RunOne-1-0"
    apps.client.start_flow(parent, "reuse", -2)
    assert _output(apps, "reuse") == f"{child_id}|FAILED|-"
    failed_run = apps.client.describe_flow(child_id).run_id
    apps.client.start_flow(parent, "reuse", 2)  # a new parent run, the same child ID
    assert _output(apps, "reuse") == f"{child_id}|COMPLETED|4"
    completed_run = apps.client.describe_flow(child_id).run_id
    assert completed_run != failed_run
    apps.client.start_flow(parent, "reuse", 7)  # completed: its result, no new run
    assert _output(apps, "reuse") == f"{child_id}|COMPLETED|4"
    assert apps.client.describe_flow(child_id).run_id == completed_run


@pytest.mark.parametrize(
    ("kind", "restarts"), [(app.AttachParent, False), (app.RestartParent, True)]
)
def test_running_child_is_attached_or_restarted_by_policy(
    apps: RunningFlows, kind: type[Any], restarts: bool
) -> None:
    parent = apps.flow(kind)
    flow_id = f"policy-{restarts}"
    child_id = f"SubFlow:{flow_id}-RunOne-1-0"
    apps.client.start_flow(parent, flow_id, 1)
    first_run = _running_run(apps, child_id)
    apps.client.stop_flow(flow_id)  # the child keeps running
    assert apps.client.describe_flow(child_id).status is FlowStatus.RUNNING
    apps.client.start_flow(parent, flow_id, 1)
    run = _running_run(apps, child_id, other_than=first_run if restarts else "")
    assert (run != first_run) is restarts
    _skip_park(apps.client, child_id)
    assert _output(apps, flow_id) == f"{child_id}|COMPLETED|1"


@pytest.mark.parametrize("method", [TimeTravelStepMethod.WAIT_FOR, TimeTravelStepMethod.EXECUTE])
def test_time_travel_to_the_waiting_step_keeps_the_completed_child(
    apps: RunningFlows, method: TimeTravelStepMethod
) -> None:
    flow_id = f"travel-{method.value}"
    apps.client.start_flow(apps.flow(app.OneParent), flow_id, 4)
    first = _output(apps, flow_id)
    child_id = f"SubFlow:{flow_id}-RunOne-1-0"
    child_run = apps.client.describe_flow(child_id).run_id
    apps.client.time_travel(
        flow_id,
        TimeTravelOptions(
            TimeTravelType.STEP_EXECUTION_ID, step_execution_id="RunOne-1", step_method=method
        ),
    )
    # The new parent run meets the completed child under its ID (a new request ID,
    # so the default reuse policy decides): it gets its result, the child stays.
    assert _output(apps, flow_id) == first == f"{child_id}|COMPLETED|8"
    assert apps.client.describe_flow(child_id).run_id == child_run
