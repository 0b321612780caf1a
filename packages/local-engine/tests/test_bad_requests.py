"""Bad requests get INVALID_ARGUMENT with a message saying what is wrong, and change nothing."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_local_engine import LocalEngine


@pytest.fixture
def stub(engine: LocalEngine) -> Iterator[pb_grpc.FlowServiceStub]:
    with grpc.insecure_channel(engine.address) as channel:
        yield pb_grpc.FlowServiceStub(channel)


def _invalid(call: object, request: object) -> str:
    with pytest.raises(grpc.RpcError) as failure:
        call(request)  # type: ignore[operator]
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    return str(failure.value.details())  # type: ignore[attr-defined]


def test_start_flow_validation(stub: pb_grpc.FlowServiceStub) -> None:
    assert "flow_id" in _invalid(stub.StartFlow, pb.StartFlowRequest(flow_type="T"))
    assert "flow_type" in _invalid(stub.StartFlow, pb.StartFlowRequest(flow_id="f"))
    bad_retry = pb.StepOptions(execute_retry_policy=pb.RetryPolicy(initial_interval_seconds=-1))
    detail = _invalid(
        stub.StartFlow,
        pb.StartFlowRequest(
            flow_id="f", flow_type="T", start_step_type="S", step_options=bad_retry
        ),
    )
    assert "invalid StepOptions" in detail
    with pytest.raises(grpc.RpcError) as failure:
        stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="f"))
    assert failure.value.code() == grpc.StatusCode.NOT_FOUND  # nothing was started


def test_other_request_validation(stub: pb_grpc.FlowServiceStub) -> None:
    stub.StartFlow(pb.StartFlowRequest(flow_id="idle", flow_type="T"))  # no start Step
    assert "StepType" in _invalid(
        stub.SkipTimer,
        pb.SkipTimerRequest(flow_id="idle", step_execution_id="nonsense", timer_condition_index=0),
    )
    assert "timer_condition" in _invalid(
        stub.SkipTimer, pb.SkipTimerRequest(flow_id="idle", step_execution_id="S-1")
    )
    assert "match key" in _invalid(
        stub.WaitForAttribute, pb.WaitForAttributeRequest(flow_id="idle")
    )
    assert "step number" in _invalid(
        stub.WaitForStepCompletion,
        pb.WaitForStepCompletionRequest(flow_id="idle", step_type="S", step_execution_number="x"),
    )
    assert "rpc_name" in _invalid(stub.InvokeRPC, pb.InvokeRPCRequest(flow_id="idle"))
    assert "page_size" in _invalid(
        stub.ListStreamMessages,
        pb.ListStreamMessagesRequest(flow_id="f", flow_type="T", stream_name="s", page_size=-1),
    )
    assert "malformed stream token" in _invalid(
        stub.ReadStream,
        pb.ReadStreamRequest(flow_id="f", flow_type="T", stream_name="s", resume_token="zz"),
    )
    assert "channel_name" in _invalid(
        stub.PublishToChannel,
        pb.PublishToChannelRequest(flow_id="idle", messages=[pb.ChannelMessage()]),
    )
    summary = stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="idle"))
    assert summary.flow_status == pb.FLOW_STATUS_RUNNING


def _start(
    stub: pb_grpc.FlowServiceStub, policy: int = 0, request_id: str = "", ignore: bool = False
) -> str:
    return stub.StartFlow(
        pb.StartFlowRequest(
            flow_id="reuse",
            flow_type="T",
            request_id=request_id,
            flow_start_options=pb.FlowStartOptions(
                id_reuse_policy=policy,  # type: ignore[arg-type]
                flow_already_started_options=pb.FlowAlreadyStartedOptions(
                    ignore_already_started_error=ignore
                ),
            ),
        )
    ).run_id


def _already(stub: pb_grpc.FlowServiceStub, **kwargs: object) -> None:
    with pytest.raises(grpc.RpcError) as failure:
        _start(stub, **kwargs)  # type: ignore[arg-type]
    assert failure.value.code() == grpc.StatusCode.ALREADY_EXISTS  # type: ignore[attr-defined]


def test_start_idempotency_and_id_reuse_policies(stub: pb_grpc.FlowServiceStub) -> None:
    first = _start(stub, request_id="r1")
    assert _start(stub, request_id="r1", ignore=True) == first
    _already(stub, request_id="r1")  # same request, but not asked to ignore
    _already(stub, request_id="r2", ignore=True)  # another request
    second = _start(stub, policy=pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING, request_id="r3")
    assert second != first
    stub.StopFlow(pb.StopFlowRequest(flow_id="reuse", stop_type=pb.STOP_TYPE_CANCEL))
    _already(stub, policy=pb.ID_REUSE_POLICY_DISALLOW_REUSE, request_id="r4")
    third = _start(stub, policy=pb.ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY)
    assert third not in (first, second)  # the canceled run ended abnormally
