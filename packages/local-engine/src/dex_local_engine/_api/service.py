"""The Dex FlowService for Clients and Workers, over one engine.

Each call checks its request, runs one engine entry point (or a long-poll over the
engine's state) and maps engine errors to the gRPC status and details Dex sends.
Pull Workers' task streams are served by ``dex_local_engine._workers``.
"""

from __future__ import annotations

import functools
import socket
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any, TypeVar, cast

from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc
from google.protobuf import empty_pb2

from dex_local_engine._api import rpcs
from dex_local_engine._api.long_polls import wait_for_history_event
from dex_local_engine._machine.engine import Engine
from dex_local_engine._rules import errors
from dex_local_engine._rules.constants import LONG_POLL_CAP_SECONDS, WAIT_FOR_FLOW_CAP_SECONDS
from dex_local_engine._rules.errors import DexError
from dex_local_engine._rules.model import Flow

SERVER_VERSION = f"dex-local-engine-{version('dex-local-engine')}"

R = TypeVar("R")
Handler = Callable[[Any, Any, Any], Awaitable[R]]

SUPPORTED_FLOW_RPCS = frozenset(
    {
        "HealthCheck",
        "GetServerInfo",
        "SyncAttributeIndexes",
        "StartFlow",
        "StopFlow",
        "InvokeRPC",
        "WriteStream",
        "ReadStream",
        "ListStreamMessages",
        "WaitForFlow",
        "GetFlowSummary",
        "SkipTimer",
        "WaitForStepCompletion",
        "WaitForAttribute",
        "GetHistoryEvents",
        "WaitForHistoryEvent",
        "PublishToChannel",
        "SetAttributes",
        "GetAttributes",
        "GetFlowState",
        "SearchFlows",
        "ResetFlow",
        "TriggerContinueAsNew",
    }
)


def _answering_errors(handler: Handler[R]) -> Handler[R]:
    """Turn engine errors into the gRPC status and details the SDK maps."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: Any) -> R:
        try:
            return await handler(self, request, context)
        except DexError as error:
            await errors.abort(context, error)
        except ValueError as error:
            await errors.abort(context, errors.invalid(str(error)))

    return wrapper


def _wait_budget(request_timeout: int, handler_timeout: int) -> float:
    budget = float(handler_timeout) if handler_timeout > 0 else LONG_POLL_CAP_SECONDS
    if request_timeout > 0:
        budget = min(budget, float(request_timeout))
    return budget


class FlowService(cast(Any, pb_grpc).FlowServiceServicer):
    """The Dex FlowService over one engine.

    Each call checks its request, runs one engine entry point and maps engine errors
    to the gRPC status and details Dex sends.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @_answering_errors
    async def HealthCheck(self, request: empty_pb2.Empty, context: Any) -> pb.HealthInfo:
        """HealthCheck: always OK while the server runs."""
        return pb.HealthInfo(condition="OK", hostname=socket.gethostname())

    @_answering_errors
    async def GetServerInfo(self, request: empty_pb2.Empty, context: Any) -> pb.ServerInfo:
        """GetServerInfo: the engine version and the protocol versions it speaks."""
        return pb.ServerInfo(
            server_version=SERVER_VERSION,
            minimum_supported_protocol_version=1,
            current_protocol_version=3,
        )

    @_answering_errors
    async def SyncAttributeIndexes(
        self, request: pb.SyncAttributeIndexRequest, context: Any
    ) -> pb.SyncAttributeIndexResponse:
        """SyncAttributeIndexes: remember the Attribute indexes a Worker declares."""
        self.engine.sync_indexes(request)
        return pb.SyncAttributeIndexResponse()

    @_answering_errors
    async def ResetFlow(self, request: pb.ResetFlowRequest, context: Any) -> pb.ResetFlowResponse:
        """ResetFlow: time travel to a point of the Flow's current run."""
        return self.engine.reset_flow(request)

    @_answering_errors
    async def TriggerContinueAsNew(
        self, request: pb.TriggerContinueAsNewRequest, context: Any
    ) -> empty_pb2.Empty:
        """TriggerContinueAsNew: move a running Flow to a new run now."""
        self.engine.trigger_continue_as_new(request)
        return empty_pb2.Empty()

    @_answering_errors
    async def SearchFlows(
        self, request: pb.SearchFlowsRequest, context: Any
    ) -> pb.SearchFlowsResponse:
        """SearchFlows: one page of the Flows a visibility query matches."""
        return self.engine.search_flows(request)

    @_answering_errors
    async def StartFlow(self, request: pb.StartFlowRequest, context: Any) -> pb.StartFlowResponse:
        """StartFlow: start a run under the ID reuse policy."""
        return pb.StartFlowResponse(run_id=self.engine.start_flow(request))

    @_answering_errors
    async def StopFlow(self, request: pb.StopFlowRequest, context: Any) -> empty_pb2.Empty:
        """StopFlow: cancel, terminate or fail a running Flow."""
        self.engine.stop_flow(request)
        return empty_pb2.Empty()

    @_answering_errors
    async def InvokeRPC(self, request: pb.InvokeRPCRequest, context: Any) -> pb.InvokeRPCResponse:
        """InvokeRPC: run an RPC handler on a Worker and apply its result."""
        return await rpcs.invoke_rpc(self.engine, request)

    @_answering_errors
    async def SkipTimer(self, request: pb.SkipTimerRequest, context: Any) -> empty_pb2.Empty:
        """SkipTimer: fire a waiting Step's Timer now."""
        self.engine.skip_timer(request)
        return empty_pb2.Empty()

    @_answering_errors
    async def WriteStream(self, request: pb.WriteStreamRequest, context: Any) -> empty_pb2.Empty:
        """WriteStream: append messages to a Flow's Stream."""
        _require_stream(request.flow_id, request.flow_type, request.stream_name)
        if not request.HasField("value"):
            raise errors.invalid("WriteStream needs a value")
        self.engine.streams.write(
            flow_type=request.flow_type,
            stream=request.stream_name,
            flow_id=request.flow_id,
            value=request.value,
            capacity=int(request.stream_capacity_bytes),
            source=request.source or "client",
        )
        return empty_pb2.Empty()

    @_answering_errors
    async def ReadStream(
        self, request: pb.ReadStreamRequest, context: Any
    ) -> pb.ReadStreamResponse:
        """ReadStream: Stream messages after a sequence number, long-polling for new ones."""
        _require_stream(request.flow_id, request.flow_type, request.stream_name)
        wait = float(request.wait_time_seconds) if request.wait_time_seconds > 0 else 30.0
        message = await self.engine.streams.read(
            request.flow_type,
            request.stream_name,
            request.flow_id,
            request.resume_token,
            min(wait, LONG_POLL_CAP_SECONDS),
        )
        if message is None:
            raise errors.long_poll_timeout("a Stream message arrived")
        return pb.ReadStreamResponse(message=message)

    @_answering_errors
    async def ListStreamMessages(
        self, request: pb.ListStreamMessagesRequest, context: Any
    ) -> pb.ListStreamMessagesResponse:
        """ListStreamMessages: one page of a Stream's retained messages."""
        _require_stream(request.flow_id, request.flow_type, request.stream_name)
        if request.page_size < 0:
            raise errors.invalid("page_size must not be negative")
        messages, token = self.engine.streams.page(
            request.flow_type,
            request.stream_name,
            request.flow_id,
            request.page_size,
            request.before_page_token,
        )
        return pb.ListStreamMessagesResponse(messages=messages, next_page_token=token)

    @_answering_errors
    async def WaitForFlow(self, request: pb.WaitForFlowRequest, context: Any) -> pb.FlowResult:
        """WaitForFlow: the Flow's result once it closes (long-poll, capped per call)."""
        flow = self._existing(request.flow_id, request.run_id)
        wait = float(request.wait_time_seconds) if request.wait_time_seconds > 0 else 0.0
        wait = min(wait, WAIT_FOR_FLOW_CAP_SECONDS) if wait else WAIT_FOR_FLOW_CAP_SECONDS
        deadline = time.monotonic() + wait
        while flow.running:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.long_poll_timeout("the Flow closed")
            await self.engine.wait_change(flow.flow_id, remaining)
            current = self.engine.flows.get(flow.flow_id)
            if current is not flow:
                break
        return self.engine.flow_result(flow)

    @_answering_errors
    async def GetFlowSummary(
        self, request: pb.GetFlowSummaryRequest, context: Any
    ) -> pb.GetFlowSummaryResponse:
        """GetFlowSummary: status, type and times of a run."""
        return self.engine.summary(self._existing(request.flow_id, request.run_id))

    @_answering_errors
    async def GetHistoryEvents(
        self, request: pb.GetHistoryEventsRequest, context: Any
    ) -> pb.GetHistoryEventsResponse:
        """GetHistoryEvents: one page of the run's history events."""
        flow = self._existing(request.flow_id, request.run_id)
        start = request.start_internal_event_id
        if request.next_page_token:
            try:
                start = int(request.next_page_token.decode())
            except ValueError:
                raise errors.invalid("malformed next_page_token") from None
        return self.engine.history(flow, start, request.estimate_page_size)

    @_answering_errors
    async def WaitForHistoryEvent(
        self, request: pb.WaitForHistoryEventRequest, context: Any
    ) -> pb.WaitForHistoryEventResponse:
        """WaitForHistoryEvent: return once the run recorded an event with an ID."""
        return await wait_for_history_event(self.engine, request, LONG_POLL_CAP_SECONDS)

    @_answering_errors
    async def WaitForStepCompletion(
        self, request: pb.WaitForStepCompletionRequest, context: Any
    ) -> pb.WaitForStepCompletionResponse:
        """WaitForStepCompletion: return once a Step execution has ended."""
        if not request.step_type or not request.step_execution_number.isdigit():
            raise errors.invalid("WaitForStepCompletion needs a step_type and a step number")
        sid = f"{request.step_type}-{int(request.step_execution_number)}"
        flow = self.engine.flow(request.flow_id, active=False)
        deadline = time.monotonic() + _wait_budget(
            request.request_timeout_seconds, request.internal_handler_timeout_seconds
        )
        while sid not in flow.ended_steps:
            if not flow.running:
                raise errors.flow_not_found(request.flow_id, active=True)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.long_poll_timeout(f"Step execution {sid} completed")
            await self.engine.wait_change(flow.flow_id, remaining)
            if self.engine.flows.get(flow.flow_id) is not flow:
                raise errors.flow_not_found(request.flow_id, active=True)
        return pb.WaitForStepCompletionResponse()

    @_answering_errors
    async def WaitForAttribute(
        self, request: pb.WaitForAttributeRequest, context: Any
    ) -> pb.WaitForAttributeResponse:
        """WaitForAttribute: return once an Attribute matches the condition."""
        match = request.match
        if not match.key:
            raise errors.invalid("WaitForAttribute needs a match key")
        if match.operator == pb.ATTRIBUTE_MATCH_OPERATOR_UNSPECIFIED:
            raise errors.invalid("WaitForAttribute needs a match operator")
        flow = self.engine.flow(request.flow_id, active=True)
        deadline = time.monotonic() + _wait_budget(
            request.request_timeout_seconds, request.internal_handler_timeout_seconds
        )
        while True:
            value = flow.attributes.get(match.key)
            if value is not None and attribute_matches(value, match.operator, match.operand):
                return pb.WaitForAttributeResponse(matched_value=value)
            if not flow.running or self.engine.flows.get(flow.flow_id) is not flow:
                raise errors.flow_not_found(request.flow_id, active=True)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.long_poll_timeout(f"Attribute {match.key!r} matched")
            await self.engine.wait_change(flow.flow_id, remaining)

    @_answering_errors
    async def PublishToChannel(
        self, request: pb.PublishToChannelRequest, context: Any
    ) -> empty_pb2.Empty:
        """PublishToChannel: publish messages to a Flow from outside."""
        self.engine.publish(request)
        return empty_pb2.Empty()

    @_answering_errors
    async def SetAttributes(
        self, request: pb.SetAttributesRequest, context: Any
    ) -> empty_pb2.Empty:
        """SetAttributes: write Attributes of a Flow from outside."""
        self.engine.set_attributes(request)
        return empty_pb2.Empty()

    @_answering_errors
    async def GetAttributes(
        self, request: pb.GetAttributesRequest, context: Any
    ) -> pb.GetAttributesResponse:
        """GetAttributes: read Attributes of a running or closed Flow."""
        return self.engine.get_attributes(request)

    @_answering_errors
    async def GetFlowState(
        self, request: pb.GetFlowStateRequest, context: Any
    ) -> pb.GetFlowStateResponse:
        """GetFlowState: config, Attributes, active Steps and pending messages."""
        return self.engine.flow_state(self._existing(request.flow_id, request.run_id))

    def _existing(self, flow_id: str, run_id: str) -> Flow:
        flow = self.engine.flow(flow_id, active=False)
        if run_id and run_id != flow.run_id:
            raise errors.flow_not_found(f"{flow_id}/{run_id}", active=False)
        return flow


def _unimplemented(name: str) -> Callable[..., Awaitable[Any]]:
    async def handler(self: Any, request: Any, context: Any) -> Any:
        await errors.abort(context, errors.unimplemented(name))

    handler.__name__ = name
    return handler


for _name in dir(cast(Any, pb_grpc).FlowServiceServicer):
    if _name[0].isupper() and _name not in SUPPORTED_FLOW_RPCS:
        setattr(FlowService, _name, _unimplemented(_name))


def _require_stream(flow_id: str, flow_type: str, stream_name: str) -> None:
    if not flow_id or not flow_type or not stream_name:
        raise errors.invalid("a Stream request needs flow_id, flow_type and stream_name")


def _scalar(value: pb.Value) -> tuple[str, Any] | None:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return ("string", value.string_value)
    if kind in ("int_value", "double_value"):
        return ("number", value.int_value if kind == "int_value" else value.double_value)
    if kind == "bool_value":
        return ("bool", value.bool_value)
    return None


def attribute_matches(value: pb.Value, operator: int, operand: pb.Value) -> bool:
    """Compare a stored Attribute with a scalar operand; other kinds never match."""
    left, right = _scalar(value), _scalar(operand)
    if left is None or right is None:
        return False
    if operator == pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL:
        return left == right
    if operator == pb.ATTRIBUTE_MATCH_OPERATOR_NOT_EQUAL:
        return left != right
    if left[0] != right[0] or left[0] == "bool":
        return False
    a, b = left[1], right[1]
    if operator == pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN:
        return bool(a > b)
    if operator == pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN_OR_EQUAL:
        return bool(a >= b)
    if operator == pb.ATTRIBUTE_MATCH_OPERATOR_LESS_THAN:
        return bool(a < b)
    if operator == pb.ATTRIBUTE_MATCH_OPERATOR_LESS_THAN_OR_EQUAL:
        return bool(a <= b)
    return False
