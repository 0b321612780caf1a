"""Which Step executions have ended is derived from the counters, not kept per execution."""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._rules.model import Flow, StepExec


def _flow() -> Flow:
    flow = Flow(
        flow_id="f",
        run_id="r",
        flow_type="T",
        request_id="q",
        start_time=0.0,
        config=pb.FlowConfig(),
    )
    flow.counters = {"Await": 3, "Run-Model": 2}
    flow.steps["Await-3"] = StepExec(
        sid="Await-3",
        step_type="Await",
        number=3,
        from_id="",
        step_input=pb.Value(),
        options=pb.StepOptions(),
        recovery=None,
        order=5,
    )
    return flow


def test_created_executions_that_are_not_active_have_ended() -> None:
    flow = _flow()
    assert flow.has_ended("Await-1")
    assert flow.has_ended("Await-2")
    assert not flow.has_ended("Await-3")  # still active
    assert not flow.has_ended("Await-4")  # not created yet
    assert flow.has_ended("Run-Model-2")  # a type name with a dash
    assert not flow.has_ended("Run-Model-3")
    for malformed in ("Await-0", "Await", "Await-x", "Other-1", "-1"):
        assert not flow.has_ended(malformed)
