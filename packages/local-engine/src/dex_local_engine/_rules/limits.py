"""The engine's size and count limits, and the checks that apply them where input enters.

Every byte a session stores reaches a Worker again inside a task, and the SDK's
channels accept at most gRPC's default 4 MiB per message (the SDK sets no
larger receive size, and it cannot be configured). So the engine refuses what
it could never deliver at the moment it comes in:

* a request larger than ``max_request_bytes`` is refused by gRPC itself
  (RESOURCE_EXHAUSTED);
* a request carrying a ``Value`` larger than ``max_value_bytes`` (a Flow's start
  input, an RPC input, a Stream write, an Attribute or Channel write) is refused
  with INVALID_ARGUMENT, and a Step or RPC result writing one fails that attempt,
  so the Step's retry policy and failure route apply;
* a task larger than ``max_task_bytes`` is never sent: it fails its Step attempt
  (with no retry, as a retry would build the same task) or its RPC call, while
  the Worker's other streams and sessions carry on.

The interceptor that checks requests as they enter is ``_transport.request_checks``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from google.protobuf.message import Message

__all__ = [
    "DEFAULT_MAX_CONCURRENT_STREAMS_PER_WORKER",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_VALUE_BYTES",
    "SDK_MAX_RECEIVE_BYTES",
    "VALUE_TOO_LARGE_ERROR_TYPE",
    "EngineLimits",
    "MalformedRequest",
    "oversized_value",
    "task_too_large",
    "value_too_large",
]

_MIB = 1024 * 1024

SDK_MAX_RECEIVE_BYTES = 4 * _MIB
"""The most one gRPC message to a dex-python-sdk Client or Worker may hold (gRPC's default)."""

VALUE_TOO_LARGE_ERROR_TYPE = "dex_local_engine.ValueTooLarge"
DEFAULT_MAX_VALUE_BYTES = 2 * _MIB
DEFAULT_MAX_REQUEST_BYTES = 16 * _MIB
DEFAULT_MAX_CONCURRENT_STREAMS_PER_WORKER = 256


@dataclass(frozen=True, kw_only=True)
class EngineLimits:
    """Limits the engine enforces; every field is in bytes except the stream count.

    Attributes:
        max_value_bytes: Largest encoded ``Value`` a request or a Step result may carry.
        max_request_bytes: Largest gRPC message the engine receives.
        max_task_bytes: Largest task the engine sends to a Worker, and largest answer
            it sends to a Client; a larger one fails instead of reaching a peer that
            would reject it. More than ``SDK_MAX_RECEIVE_BYTES`` only helps peers
            whose channels accept more.
        max_concurrent_streams_per_worker: Most open ``PollWorkerTask`` streams of one
            Worker (one ``app_worker_id``); a further stream is refused with
            RESOURCE_EXHAUSTED.
    """

    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_task_bytes: int = SDK_MAX_RECEIVE_BYTES
    max_concurrent_streams_per_worker: int = DEFAULT_MAX_CONCURRENT_STREAMS_PER_WORKER

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if type(value) is not int or value <= 0:
                raise ValueError(f"EngineLimits.{field.name} must be a positive integer")
        if self.max_value_bytes > self.max_request_bytes:
            raise ValueError("EngineLimits.max_value_bytes must not exceed max_request_bytes")
        if self.max_value_bytes >= self.max_task_bytes:
            raise ValueError(
                "EngineLimits.max_value_bytes must be below max_task_bytes, "
                "or a stored value could never reach a Worker"
            )


def oversized_value(message: Message, limit: int) -> tuple[str, int] | None:
    """The field path and size of the first ``dex.Value`` in ``message`` over ``limit`` bytes."""
    if message.ByteSize() <= limit:
        return None  # nothing inside can be larger than the whole
    if message.DESCRIPTOR.full_name == "dex.Value":
        return "", message.ByteSize()
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            children = [
                (f"{field.name}[{key!r}]", child)
                for key, child in value.items()
                if isinstance(child, Message)
            ]
        elif isinstance(value, Message):
            children = [(field.name, value)]
        else:
            children = [(f"{field.name}[{index}]", child) for index, child in enumerate(value)]
        for path, child in children:
            found = oversized_value(child, limit)
            if found is not None:
                inner, size = found
                return (f"{path}.{inner}" if inner else path), size
    return None


def value_too_large(where: str, path: str, size: int, limit: int) -> str:
    """The error text for a value over ``max_value_bytes``."""
    return (
        f"{where}: the value at {path or 'the top'} is {size:,} bytes, over the engine's "
        f"max_value_bytes of {limit:,}; store large data outside the Flow (a file or blob "
        "store) and keep a reference in it"
    )


def task_too_large(name: str, size: int, limit: int) -> str:
    """The error text for a task no Worker can receive."""
    return (
        f"the task for {name} is {size:,} bytes, over the {limit:,} bytes a Worker "
        "can receive (max_task_bytes); the values it loads are too large together, "
        "so keep less in the Flow's state"
    )


class MalformedRequest:
    """What a request that does not parse decodes to, so a handler can refuse it clearly."""

    def __init__(self, error: str) -> None:
        self.error = error

    def describe(self, method: str) -> str:
        """The error text for ``method``."""
        return f"{method}: the request is not a valid protobuf message ({self.error})"
