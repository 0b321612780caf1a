"""gRPC errors in the shape the Dex SDK maps to its exception classes.

The SDK reads the ``grpc-status-details-bin`` trailer, takes the first packed
``ServiceErrorResponse`` and picks an exception from its ``sub_status`` and the call's
code. The details status must carry the same code and message as the call itself.
"""

from __future__ import annotations

from typing import Any, NoReturn, cast

import grpc
from dex.dexpb import dex_pb2 as pb
from google.protobuf import any_pb2
from google.rpc import status_pb2
from grpc_status import rpc_status


class DexError(Exception):
    """An error answered to the caller with a gRPC code and a ServiceErrorResponse."""

    def __init__(
        self,
        code: grpc.StatusCode,
        sub_status: pb.ErrorSubStatus,
        detail: str,
        worker_error: pb.WorkerErrorResponse | None = None,
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.sub_status = sub_status
        self.detail = detail
        self.worker_error = worker_error

    def to_status(self) -> Any:
        """The gRPC status with the ServiceErrorResponse details."""
        response = pb.ServiceErrorResponse(detail=self.detail, sub_status=self.sub_status)
        if self.worker_error is not None:
            response.original_worker_error_detail = self.worker_error.detail
            response.original_worker_error_type = self.worker_error.error_type
            response.original_worker_error_status = self.worker_error.grpc_status
            response.original_worker_error_stack_trace = self.worker_error.stack_trace
        packed = any_pb2.Any()
        packed.Pack(response)
        code_value = cast(tuple[int, str], self.code.value)[0]
        status = status_pb2.Status(code=code_value, message=self.detail, details=[packed])
        return cast(Any, rpc_status).to_status(status)


def invalid(detail: str) -> DexError:
    """An INVALID_ARGUMENT error with this detail."""
    return DexError(grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_SUB_STATUS_UNCATEGORIZED, detail)


def flow_not_found(flow_id: str, *, active: bool) -> DexError:
    """The error the SDK maps to FlowNotFoundError, or with ``active`` to
    FlowNotActiveOrNotFoundError."""
    what = "is not running or does not exist" if active else "does not exist"
    return DexError(
        grpc.StatusCode.NOT_FOUND,
        pb.ERROR_SUB_STATUS_FLOW_NOT_EXISTS,
        f"Flow {flow_id!r} {what}",
    )


def long_poll_timeout(what: str) -> DexError:
    """The long-poll timeout the SDK turns into a retry or LongPollTimeoutError."""
    return DexError(
        grpc.StatusCode.DEADLINE_EXCEEDED,
        pb.ERROR_SUB_STATUS_LONG_POLL_TIME_OUT,
        f"long poll ended before {what}; call again",
    )


def unimplemented(rpc: str) -> DexError:
    """An UNIMPLEMENTED error naming the RPC."""
    return DexError(
        grpc.StatusCode.UNIMPLEMENTED,
        pb.ERROR_SUB_STATUS_UNCATEGORIZED,
        f"{rpc} is not implemented by dex-local-engine",
    )


async def abort(context: Any, error: DexError) -> NoReturn:
    """End the call with the error's status and ServiceErrorResponse details."""
    await context.abort_with_status(error.to_status())
    raise AssertionError("abort_with_status returned")  # pragma: no cover
